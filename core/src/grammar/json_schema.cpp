// JSON schema -> GBNF text (json_schema.h). One rule per subschema; a $ref
// target is compiled once into a rule of its own, so recursion is a rule that
// refers to itself and the work stays linear in the schema's size.
#include "ferrox/grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "json_schema_converter.h"

namespace ferrox::grammar {
namespace schema {
namespace {

// Keywords that describe and never constrain; accepted anywhere.
const std::set<std::string, std::less<>> kAnnotations{
    "title",    "description", "examples", "default",   "$schema", "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};

// Every keyword the converter enforces (each read below).
const std::set<std::string, std::less<>> kEnforced{"$ref",
                                                   "allOf",
                                                   "anyOf",
                                                   "oneOf",
                                                   "enum",
                                                   "const",
                                                   "type",
                                                   "properties",
                                                   "required",
                                                   "additionalProperties",
                                                   "items",
                                                   "prefixItems",
                                                   "minItems",
                                                   "maxItems",
                                                   "uniqueItems",
                                                   "minLength",
                                                   "maxLength",
                                                   "pattern",
                                                   "format",
                                                   "minimum",
                                                   "maximum",
                                                   "exclusiveMinimum",
                                                   "exclusiveMaximum"};

// JSON kinds, as bits: what a subschema's grammar can produce (oneOf's check).
enum Kind : unsigned {
    kNull = 1,
    kBool = 2,
    kInt = 4,
    kFraction = 8,  // a number that is not an integer
    kString = 16,
    kArray = 32,
    kObject = 64,
    kAnyKind = 127
};

std::string pointer_token(std::string_view key) {
    std::string out;
    for (const char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

unsigned kind_of_value(const ordered_json& v) {
    if (v.is_null()) return kNull;
    if (v.is_boolean()) return kBool;
    if (v.is_number_integer()) return kInt;
    if (v.is_number_float()) {
        const double d = v.get<double>();
        return std::floor(d) == d ? kInt : kFraction;
    }
    if (v.is_string()) return kString;
    if (v.is_array()) return kArray;
    return kObject;
}

unsigned kind_of_type(const std::string& t) {
    if (t == "null") return kNull;
    if (t == "boolean") return kBool;
    if (t == "integer") return kInt;
    if (t == "number") return kInt | kFraction;
    if (t == "string") return kString;
    if (t == "array") return kArray;
    if (t == "object") return kObject;
    return 0;
}

// The kinds the keywords of one family imply when "type" is absent.
unsigned inferred_kinds(const ordered_json& s) {
    unsigned k = 0;
    for (const char* key : {"properties", "required", "additionalProperties"})
        if (s.contains(key)) k |= kObject;
    for (const char* key : {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"})
        if (s.contains(key)) k |= kArray;
    for (const char* key : {"minLength", "maxLength", "pattern", "format"})
        if (s.contains(key)) k |= kString;
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(key)) k |= kInt | kFraction;
    return k;
}

// sanitized hint for a rule name: [a-zA-Z0-9-], short.
std::string rule_hint(std::string_view hint) {
    std::string out;
    for (const char c : hint) {
        if (out.size() >= 24) break;
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        out += ok ? c : '-';
    }
    return out.empty() ? "s" : out;
}

}  // namespace

std::string child(const std::string& ptr, std::string_view key) {
    return ptr + "/" + pointer_token(key);
}

[[noreturn]] void refuse(const std::string& ptr, const std::string& why) {
    throw Refusal{fmt::format("{}: {}", ptr.empty() ? "(root)" : ptr, why)};
}

std::string json_text(const ordered_json& v) {
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string optional_of(const std::string& x) { return "(" + x + ")?"; }

// "a b", dropping empty parts.
std::string seq(std::initializer_list<std::string> parts) {
    std::string out;
    for (const auto& p : parts)
        if (!p.empty()) out += (out.empty() ? "" : " ") + p;
    return out;
}

std::string Converter::run() {
    const std::string top = compile(root_, "", 0);
    std::string out = "root ::= " + top + "\n" + rules_ + schema::shared_rules(limits_.max_indent);
    if (out.size() > limits_.max_grammar_bytes)
        refuse("", fmt::format("the grammar it makes is {} bytes, past the limit "
                               "max_grammar_bytes ({})",
                               out.size(), limits_.max_grammar_bytes));
    return out;
}

std::string Converter::fresh(std::string_view hint) {
    return rule_hint(hint) + "-" + std::to_string(++rules_made_);
}

void Converter::define(const std::string& name, const std::string& body) {
    rules_ += name + " ::= " + body + "\n";
    if (rules_.size() > limits_.max_grammar_bytes)
        refuse("", fmt::format("the grammar it makes passes the limit max_grammar_bytes ({})",
                               limits_.max_grammar_bytes));
}

std::string Converter::rule(std::string_view hint, const std::string& body) {
    std::string name = fresh(hint);
    define(name, body);
    return name;
}

// A count keyword: a non-negative integer within max_repetition.
std::optional<uint32_t> Converter::count(const ordered_json& s, const char* key,
                                         const std::string& ptr) {
    if (!s.contains(key)) return std::nullopt;
    const ordered_json& v = s.at(key);
    const std::string at = child(ptr, key);
    const bool integral = v.is_number_unsigned() ||
                          (v.is_number_integer() && v.get<int64_t>() >= 0) ||
                          (v.is_number_float() && v.get<double>() >= 0 &&
                           std::floor(v.get<double>()) == v.get<double>());
    if (!integral) refuse(at, "must be a non-negative integer");
    const double d = v.get<double>();
    if (d > limits_.max_repetition)
        refuse(at, fmt::format("{} is past the limit max_repetition ({})", json_text(v),
                               limits_.max_repetition));
    return static_cast<uint32_t>(d);
}

// A keyword not enforced, or enforced only alone with annotations.
void Converter::check_keywords(const ordered_json& s, const std::string& ptr) {
    for (auto it = s.begin(); it != s.end(); ++it) {
        if (kAnnotations.count(it.key()) || kEnforced.count(it.key())) continue;
        refuse(child(ptr, it.key()), "not enforced");
    }
    if (s.contains("uniqueItems") && s.at("uniqueItems") != false)
        refuse(child(ptr, "uniqueItems"), "true is not enforced");
    for (const char* key : {"exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(key) && s.at(key).is_boolean())
            refuse(child(ptr, key), "a boolean (draft 4) is not enforced; give the bound");
}

void Converter::only_with(const ordered_json& s, const std::string& ptr, const char* keyword,
                          std::initializer_list<const char*> allowed) {
    for (auto it = s.begin(); it != s.end(); ++it) {
        if (it.key() == keyword || kAnnotations.count(it.key())) continue;
        if (std::any_of(allowed.begin(), allowed.end(),
                        [&](const char* a) { return it.key() == a; }))
            continue;
        refuse(child(ptr, it.key()), fmt::format("not enforced beside {}", keyword));
    }
}

// Returns the name of the rule for `s`.
std::string Converter::compile(const ordered_json& s, const std::string& ptr, uint32_t depth) {
    if (depth > limits_.max_depth)
        refuse(ptr, fmt::format("nested deeper than the limit max_depth ({})", limits_.max_depth));
    if (s.is_boolean()) {
        if (s.get<bool>()) return schema::kJsonValue;
        refuse(ptr, "the schema false admits no value");
    }
    if (!s.is_object()) refuse(ptr, "a schema must be an object or a boolean");
    check_keywords(s, ptr);
    if (s.contains("$ref")) {
        only_with(s, ptr, "$ref", {});
        return reference(s.at("$ref"), child(ptr, "$ref"), depth);
    }
    if (s.contains("allOf")) {
        only_with(s, ptr, "allOf", {});
        const ordered_json& all = s.at("allOf");
        if (!all.is_array() || all.size() != 1)
            refuse(child(ptr, "allOf"), "only an allOf of exactly one subschema is enforced");
        return compile(all[0], child(child(ptr, "allOf"), "0"), depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"})
        if (s.contains(key)) return alternatives(s, key, ptr, depth);
    if (s.contains("enum") || s.contains("const")) return enumeration(s, ptr);
    const unsigned kinds = types(s, ptr);
    if (kinds == kAnyKind && inferred_kinds(s) == 0) return schema::kJsonValue;
    std::vector<std::string> bodies;
    if (kinds & kNull) bodies.push_back("\"null\"");
    if (kinds & kBool) bodies.push_back("(\"true\" | \"false\")");
    if (kinds & kFraction)
        bodies.push_back(number(s, ptr));
    else if (kinds & kInt)
        bodies.push_back(integer(s, ptr));
    if (kinds & kString) bodies.push_back(string(s, ptr));
    if (kinds & kArray) bodies.push_back(array(s, ptr, depth));
    if (kinds & kObject) bodies.push_back(object(s, ptr, depth));
    std::string body = bodies[0];
    for (size_t i = 1; i < bodies.size(); ++i) body += " | " + bodies[i];
    return rule(ptr.substr(ptr.rfind('/') + 1), bodies.size() > 1 ? "(" + body + ")" : body);
}

// The kinds "type" names (every kind when absent: then the keywords
// present choose, see compile).
unsigned Converter::types(const ordered_json& s, const std::string& ptr) {
    if (!s.contains("type")) {
        const unsigned inferred = inferred_kinds(s);
        return inferred ? inferred : kAnyKind;
    }
    const ordered_json& t = s.at("type");
    const std::string at = child(ptr, "type");
    unsigned kinds = 0;
    const auto one = [&](const ordered_json& name) {
        const unsigned k = name.is_string() ? kind_of_type(name.get<std::string>()) : 0;
        if (!k) refuse(at, fmt::format("{} is not a JSON schema type", json_text(name)));
        kinds |= k;
    };
    if (t.is_array()) {
        if (t.empty()) refuse(at, "an empty list of types admits no value");
        for (const auto& name : t) one(name);
    } else {
        one(t);
    }
    return kinds;
}

std::string Converter::reference(const ordered_json& ref, const std::string& ptr, uint32_t depth) {
    if (!ref.is_string()) refuse(ptr, "must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#')
        refuse(ptr, fmt::format("'{}': only references inside the schema (\"#/...\") are resolved",
                                target));
    if (refs_.size() >= limits_.max_refs)
        refuse(ptr, fmt::format("more distinct references than the limit max_refs ({})",
                                limits_.max_refs));
    const std::string pointer = target.substr(1);
    const ordered_json* found = resolve(pointer);
    if (!found) refuse(ptr, fmt::format("'{}' points at nothing in the schema", target));
    const std::string name = fresh("ref-" + pointer.substr(pointer.rfind('/') + 1));
    refs_[target] = name;  // before compiling it: a recursive reference finds it
    define(name, compile(*found, pointer, depth + 1));
    return name;
}

const ordered_json* Converter::resolve(const std::string& pointer) const {
    if (pointer.find('%') != std::string::npos) return nullptr;  // no URI decoding
    try {
        const ordered_json::json_pointer p(pointer);
        if (!root_.contains(p)) return nullptr;
        return &root_.at(p);
    } catch (const nlohmann::json::exception&) {
        return nullptr;
    }
}

// Follows $ref and one-subschema allOf (bounded), for oneOf's checks.
const ordered_json& Converter::unwrap(const ordered_json& s) const {
    const ordered_json* at = &s;
    for (int hops = 0; hops < 32 && at->is_object(); ++hops) {
        if (at->contains("$ref") && at->at("$ref").is_string()) {
            const std::string t = at->at("$ref").get<std::string>();
            const ordered_json* next = t.empty() || t[0] != '#' ? nullptr : resolve(t.substr(1));
            if (!next) break;
            at = next;
        } else if (at->contains("allOf") && at->at("allOf").is_array() &&
                   at->at("allOf").size() == 1) {
            at = &at->at("allOf")[0];
        } else {
            break;
        }
    }
    return *at;
}

// What kinds of value `s`'s grammar can produce (more, never fewer).
unsigned Converter::kinds_of(const ordered_json& raw, int budget) const {
    const ordered_json& s = unwrap(raw);
    if (budget <= 0 || !s.is_object()) return s == false ? 0u : unsigned(kAnyKind);
    unsigned type_kinds = kAnyKind;
    if (s.contains("type")) {
        type_kinds = 0;
        const ordered_json& t = s.at("type");
        if (t.is_string()) type_kinds = kind_of_type(t.get<std::string>());
        if (t.is_array())
            for (const auto& n : t)
                if (n.is_string()) type_kinds |= kind_of_type(n.get<std::string>());
    }
    if (s.contains("const")) return kind_of_value(s.at("const")) & type_kinds;
    if (s.contains("enum") && s.at("enum").is_array()) {
        unsigned k = 0;
        for (const auto& v : s.at("enum")) k |= kind_of_value(v);
        return k & type_kinds;
    }
    for (const char* key : {"anyOf", "oneOf"})
        if (s.contains(key) && s.at(key).is_array()) {
            unsigned k = 0;
            for (const auto& b : s.at(key)) k |= kinds_of(b, budget - 1);
            return k;
        }
    if (!s.contains("type") && inferred_kinds(s)) return inferred_kinds(s);
    return type_kinds;
}

// A required property whose const value tells every branch apart.
bool Converter::discriminated(const ordered_json& branches) const {
    const ordered_json& first = unwrap(branches[0]);
    if (!first.is_object() || !first.contains("properties") || !first.at("properties").is_object())
        return false;
    for (auto p = first.at("properties").begin(); p != first.at("properties").end(); ++p) {
        std::vector<ordered_json> values;
        for (const auto& raw : branches) {
            const ordered_json& b = unwrap(raw);
            if (!b.is_object() || !b.contains("properties") || !b.contains("required")) break;
            const ordered_json& props = b.at("properties");
            const ordered_json& req = b.at("required");
            if (!props.is_object() || !props.contains(p.key()) || !req.is_array() ||
                std::find(req.begin(), req.end(), p.key()) == req.end())
                break;
            const ordered_json& ps = unwrap(props.at(p.key()));
            if (!ps.is_object()) break;
            if (ps.contains("const"))
                values.push_back(ps.at("const"));
            else if (ps.contains("enum") && ps.at("enum").is_array() && ps.at("enum").size() == 1)
                values.push_back(ps.at("enum")[0]);
            else
                break;
        }
        if (values.size() != branches.size()) continue;
        bool distinct = true;
        for (size_t i = 0; i < values.size() && distinct; ++i)
            for (size_t j = i + 1; j < values.size(); ++j)
                if (values[i] == values[j]) distinct = false;
        if (distinct) return true;
    }
    return false;
}

std::string Converter::alternatives(const ordered_json& s, const char* key, const std::string& ptr,
                                    uint32_t depth) {
    only_with(s, ptr, key, {});
    const ordered_json& branches = s.at(key);
    const std::string at = child(ptr, key);
    if (!branches.is_array() || branches.empty()) refuse(at, "must be a non-empty array");
    if (std::string_view(key) == "oneOf" && !discriminated(branches)) {
        // A value two branches both accept fails oneOf; the branches must
        // be told apart by kind, or by a required const property.
        for (size_t i = 0; i < branches.size(); ++i)
            for (size_t j = i + 1; j < branches.size(); ++j)
                if (kinds_of(branches[i], 32) & kinds_of(branches[j], 32))
                    refuse(at,
                           fmt::format("branches {} and {} may both match a value: not enforced "
                                       "(use anyOf, or tell them apart by type or by a required "
                                       "const property)",
                                       i, j));
    }
    std::string body = "(";
    for (size_t i = 0; i < branches.size(); ++i)
        body += (i ? " | " : "") + compile(branches[i], child(at, std::to_string(i)), depth + 1);
    return rule(key, body + ")");
}

std::string Converter::enumeration(const ordered_json& s, const std::string& ptr) {
    const bool is_const = s.contains("const");
    if (is_const && s.contains("enum")) refuse(child(ptr, "enum"), "not enforced beside const");
    only_with(s, ptr, is_const ? "const" : "enum", {"type"});
    const std::string at = child(ptr, is_const ? "const" : "enum");
    std::vector<ordered_json> values;
    if (is_const) {
        values.push_back(s.at("const"));
    } else {
        const ordered_json& e = s.at("enum");
        if (!e.is_array() || e.empty()) refuse(at, "must be a non-empty array");
        if (e.size() > limits_.max_enum)
            refuse(at, fmt::format("has {} values, past the limit max_enum ({})", e.size(),
                                   limits_.max_enum));
        values.assign(e.begin(), e.end());
    }
    const unsigned allowed = s.contains("type") ? types(s, ptr) : unsigned(kAnyKind);
    std::string body;
    for (const auto& v : values) {
        if (!(kind_of_value(v) & allowed)) continue;
        body += (body.empty() ? "" : " | ") + schema::gbnf_literal(json_text(v));
    }
    if (body.empty()) refuse(at, "no value has the schema's type");
    return rule(is_const ? "const" : "enum", "(" + body + ")");
}

}  // namespace schema

GrammarLimits json_schema_grammar_limits(const JsonSchemaLimits& limits) {
    GrammarLimits g;
    g.max_source_bytes = limits.max_grammar_bytes + 64 * 1024;  // the shared rules
    g.max_rules = 1u << 16;  // each count of a bounded repetition is a rule
    g.max_repetition = std::max<uint32_t>(g.max_repetition, limits.max_repetition);
    g.strict_utf8 = true;  // maxLength counts what the client decodes
    return g;
}

Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                          const JsonSchemaLimits& limits) {
    try {
        return schema::Converter(schema, limits).run();
    } catch (const schema::Refusal& r) {
        return make_error("{}", r.message);
    }
}

Expected<std::shared_ptr<const Grammar>> compile_json_schema(const nlohmann::ordered_json& schema,
                                                             const JsonSchemaLimits& limits) {
    auto text = json_schema_to_gbnf(schema, limits);
    if (!text) return text.error();
    auto g = parse_gbnf(*text, json_schema_grammar_limits(limits));
    if (!g) return make_error("the grammar made from the schema: {}", g.error().message());
    return std::move(*g);
}

std::string json_object_gbnf(const JsonSchemaLimits& limits) {
    return fmt::format("root ::= {}\n{}", schema::kJsonObject,
                       schema::shared_rules(limits.max_indent));
}

Expected<std::shared_ptr<const Grammar>> compile_json_object(const JsonSchemaLimits& limits) {
    return parse_gbnf(json_object_gbnf(limits), json_schema_grammar_limits(limits));
}

}  // namespace ferrox::grammar
