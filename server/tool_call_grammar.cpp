#include "tool_call_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferrox/grammar/json_schema.h"
#include "request_fields.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

constexpr int kMoreCalls = 15;  // a forced answer holds at most 16 calls

// A GBNF string literal of `text` (UTF-8 kept; quotes, backslashes and
// control bytes escaped).
std::string literal(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\')
            out += fmt::format("\\{}", char(c));
        else if (c == '\n')
            out += "\\n";
        else if (c < 0x20)
            out += fmt::format("\\x{:02x}", c);
        else
            out += char(c);
    }
    return out + "\"";
}

std::string code_point_escape(uint32_t cp) {
    if (cp < 0x100) return fmt::format("\\x{:02x}", cp);
    if (cp < 0x10000) return fmt::format("\\u{:04x}", cp);
    return fmt::format("\\U{:08x}", cp);
}

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// The GBNF text of a forced-call grammar, assembled from rules of its own
// (named "tc-...") and the schema converter's grammars for JSON values, each
// renamed under a prefix of its own ("v3-...") so that several coexist;
// the converter's shared rules (whitespace, strings, any value) are kept
// once under their own names.
class RuleSet {
  public:
    // `escaped_lt`: a JSON string spells '<' as \u003c, never bare -- for
    // the families whose parser finds a call's end by searching its text for
    // a closing marker (all of which begin with '<'), so that no string
    // argument can end the call early.
    RuleSet(const grammar::JsonSchemaLimits& limits, bool escaped_lt) : limits_(limits) {
        // json_object_gbnf is "root ::= json-object" and then exactly the
        // shared rules that end every grammar the converter writes.
        const std::string object = grammar::json_object_gbnf(limits);
        converter_shared_ = object.substr(object.find('\n') + 1);
        shared_ = converter_shared_;
        if (escaped_lt) escape_lt_in_strings();
        for (size_t at = 0; at < shared_.size();) {
            const size_t end = shared_.find('\n', at);
            const std::string_view line = std::string_view(shared_).substr(at, end - at);
            shared_names_.insert(std::string(line.substr(0, line.find(' '))));
            at = end == std::string::npos ? shared_.size() : end + 1;
        }
    }

    // A rule for the JSON texts valid against `schema`; `where` names the
    // schema in a refusal.
    std::string json(const ordered_json& schema, const std::string& where) {
        auto text = grammar::json_schema_to_gbnf(schema, limits_);
        if (!text)
            throw ApiError{
                400,
                fmt::format("'tools': {} cannot be enforced: {}", where, text.error().message()),
                "tools"};
        std::string body = std::move(*text);
        if (!body.ends_with(converter_shared_) || !body.starts_with("root ::= "))
            throw ApiError{500, "the tool-call grammar could not be composed", "tools"};
        body.resize(body.size() - converter_shared_.size());
        const std::string prefix = fmt::format("v{}-", ++values_);
        rules_ += renamed(body, prefix);
        return prefix + "root";
    }

    std::string define(std::string_view hint, const std::string& body) {
        std::string name = fmt::format("tc-{}-{}", hint, ++made_);
        rules_ += name + " ::= " + body + "\n";
        return name;
    }

    // A rule for text holding none of `words` (ASCII; none inside another):
    // one rule per state of an automaton over the words' proper prefixes,
    // the state being the longest prefix the text ends in. Characters are
    // Unicode scalars (no surrogates) and the blanks \t \n \r, never other
    // control characters.
    std::string text_without(std::span<const std::string_view> words) {
        std::string key;  // one set of rules per set of words, however many values use it
        for (const std::string_view w : words) key.append(w).push_back('\0');
        if (const auto it = texts_.find(key); it != texts_.end()) return it->second;
        std::vector<std::string> states{""};
        std::set<char> alphabet;
        for (const std::string_view w : words) {
            for (size_t k = 1; k < w.size(); ++k)
                if (std::find(states.begin(), states.end(), w.substr(0, k)) == states.end())
                    states.emplace_back(w.substr(0, k));
            alphabet.insert(w.begin(), w.end());
        }
        const auto dead = [&](const std::string& t) {
            for (const std::string_view w : words)
                if (t.ends_with(w)) return true;
            return false;
        };
        const auto state_of = [&](const std::string& t) {
            for (size_t k = 0; k < t.size(); ++k) {
                const auto it = std::find(states.begin(), states.end(), t.substr(k));
                if (it != states.end()) return static_cast<size_t>(it - states.begin());
            }
            return size_t{0};
        };
        std::string others = "[\\t\\n\\r";
        uint32_t from = 0x20;
        for (const char c : alphabet) {
            const auto cp = static_cast<uint32_t>(static_cast<unsigned char>(c));
            if (cp > from) others += code_point_escape(from) + "-" + code_point_escape(cp - 1);
            from = cp + 1;
        }
        others += code_point_escape(from) + "-" + code_point_escape(0xD7FF) +
                  code_point_escape(0xE000) + "-" + code_point_escape(0x10FFFF) + "]";
        const std::string base = fmt::format("tc-text-{}", ++made_);
        const auto name = [&](size_t state) { return fmt::format("{}-{}", base, state); };
        for (size_t i = 0; i < states.size(); ++i) {
            std::string body = "(" + others + " " + name(0);
            for (const char c : alphabet) {
                const std::string t = states[i] + c;
                if (!dead(t)) body += " | " + literal(std::string(1, c)) + " " + name(state_of(t));
            }
            rules_ += name(i) + " ::= " + body + ")?\n";
        }
        return texts_[key] = name(0);
    }

    std::string text(const std::string& root) const {
        return "root ::= " + root + "\n" + rules_ + shared_;
    }
    const grammar::JsonSchemaLimits& limits() const { return limits_; }

  private:
    // The shared rule for one character of a JSON string, its class of bare
    // characters rewritten without '<' (the escapes after it kept as they are).
    void escape_lt_in_strings() {
        constexpr std::string_view kHead = "json-char ::= [";
        const size_t at = shared_.find(kHead);
        size_t end = at == std::string::npos ? at : at + kHead.size();
        while (end < shared_.size() && shared_[end] != ']') end += shared_[end] == '\\' ? 2 : 1;
        if (at == std::string::npos || end >= shared_.size())
            throw ApiError{500, "the tool-call grammar could not be composed", "tools"};
        // Unicode scalars but the controls, '"', '\\' and '<'.
        const std::string bare = "[\\x20-\\x21\\x23-\\x3b\\x3d-\\x5b\\x5d-" +
                                 code_point_escape(0xD7FF) + code_point_escape(0xE000) + "-" +
                                 code_point_escape(0x10FFFF) + "]";
        shared_.replace(at + kHead.size() - 1, end + 1 - (at + kHead.size() - 1), bare);
    }

    // `gbnf` with every rule name not among the shared ones prefixed; string
    // literals, classes, repetition counts and comments are copied as they are.
    std::string renamed(std::string_view gbnf, std::string_view prefix) const {
        std::string out;
        for (size_t i = 0; i < gbnf.size();) {
            const char c = gbnf[i];
            size_t j = i + 1;
            if (c == '"' || c == '[') {
                const char close = c == '"' ? '"' : ']';
                while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
                j = std::min(j + 1, gbnf.size());
            } else if (c == '{' || c == '#') {
                const char close = c == '{' ? '}' : '\n';
                while (j < gbnf.size() && gbnf[j] != close) ++j;
                j = std::min(j + 1, gbnf.size());
            } else if (is_name_char(c)) {
                while (j < gbnf.size() && is_name_char(gbnf[j])) ++j;
                const std::string name(gbnf.substr(i, j - i));
                out += shared_names_.count(name) ? name : std::string(prefix) + name;
                i = j;
                continue;
            }
            out.append(gbnf.substr(i, j - i));
            i = j;
        }
        return out;
    }

    grammar::JsonSchemaLimits limits_;
    std::string converter_shared_;  // as the converter writes them
    std::string shared_;            // as this grammar holds them
    std::string rules_;
    std::set<std::string> shared_names_;
    std::map<std::string, std::string> texts_;  // text_without's rules, by their words
    size_t values_ = 0, made_ = 0;
};

// A tool the answer may call, with where it sits in the request.
struct Tool {
    size_t index;
    std::string name;
    ordered_json parameters;
};

std::vector<Tool> callable(const ChatToolFields& tools) {
    std::vector<Tool> out;
    for (size_t i = 0; i < tools.tools.size(); ++i) {
        const auto& fn = tools.tools[i].at("function");
        const std::string name = fn.at("name").get<std::string>();
        if (tools.choice.mode == ToolChoice::Mode::Named && name != tools.choice.name) continue;
        out.push_back(
            {i, name,
             fn.contains("parameters")
                 ? fn.at("parameters")
                 : ordered_json{{"type", "object"}, {"properties", ordered_json::object()}}});
    }
    if (out.empty()) throw ApiError{400, "'tool_choice': no tool to call", "tool_choice"};
    return out;
}

std::string parameters_pointer(const Tool& t) {
    return fmt::format("tools[{}].function.parameters", t.index);
}

std::string alternatives(const std::vector<std::string>& rules) {
    std::string out;
    for (const auto& r : rules) out += (out.empty() ? "" : " | ") + r;
    return out;
}

// `one` call, and up to kMoreCalls more after `between` when `several`.
std::string calls(const std::string& one, std::string_view between, bool several) {
    if (!several) return one;
    const std::string next = between.empty() ? one : literal(between) + " " + one;
    return fmt::format("{} ({}){{0,{}}}", one, next, kMoreCalls);
}

// --- JSON between fixed markers (Hermes, SmolLM3, Llama 3, Mistral, Granite,
// Functools): one converter schema for the whole call object (or list).

struct JsonSpelling {
    std::string_view before, after, between;  // between: two calls, when several are allowed
    bool json_list = false;                   // the calls are one JSON array
    std::string_view arguments_key = "arguments";
};

std::optional<JsonSpelling> json_spelling(ChatFamily family) {
    switch (family) {
        case ChatFamily::Hermes:
        case ChatFamily::SmolLM3:
            return JsonSpelling{"<tool_call>\n", "\n</tool_call>", "\n", false, "arguments"};
        case ChatFamily::Llama3:
            return JsonSpelling{"", "", "", false, "parameters"};  // one call per answer
        case ChatFamily::Mistral:
            return JsonSpelling{"[TOOL_CALLS]", "", "", true, "arguments"};
        case ChatFamily::Granite:
            return JsonSpelling{"<|tool_call|>", "", "", true, "arguments"};
        case ChatFamily::Functools:
            return JsonSpelling{"functools", "", "", true, "arguments"};
        default:
            return std::nullopt;
    }
}

std::string json_object_calls(RuleSet& rules, const JsonSpelling& how,
                              const std::vector<Tool>& tools, bool several) {
    ordered_json one_of = ordered_json::array();
    const std::string key(how.arguments_key);
    for (const Tool& t : tools)
        one_of.push_back({{"type", "object"},
                          {"properties", {{"name", {{"const", t.name}}}, {key, t.parameters}}},
                          {"required", {"name", key}},
                          {"additionalProperties", false}});
    ordered_json schema = one_of.size() == 1 ? one_of[0] : ordered_json{{"anyOf", one_of}};
    if (how.json_list) {
        schema = {{"type", "array"}, {"items", schema}, {"minItems", 1}};
        if (!several) schema["maxItems"] = 1;
    }
    // A refusal's pointer is into this schema: /anyOf/N/properties/arguments/...
    // stands for the N-th callable tool's function.parameters/...
    std::string one = rules.json(schema, "a parameter schema");
    if (!how.before.empty()) one = literal(how.before) + " " + one;
    if (!how.after.empty()) one += " " + literal(how.after);
    if (how.json_list) return one;
    return calls(rules.define("call", one), how.between, several);
}

// --- JSON arguments after a header naming the tool (DeepSeek, harmony).

std::string arguments_rule(RuleSet& rules, const Tool& t) {
    return rules.json(t.parameters, parameters_pointer(t));
}

std::string deepseek_calls(RuleSet& rules, const std::vector<Tool>& tools, bool fenced,
                           bool several) {
    std::vector<std::string> each;
    for (const Tool& t : tools) {
        const std::string args = arguments_rule(rules, t);
        each.push_back(rules.define(
            "call", fenced ? literal("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + t.name +
                                     "\n```json\n") +
                                 " " + args + " " + literal("\n```<｜tool▁call▁end｜>")
                           : literal("<｜tool▁call▁begin｜>" + t.name + "<｜tool▁sep｜>") + " " +
                                 args + " " + literal("<｜tool▁call▁end｜>")));
    }
    return literal("<｜tool▁calls▁begin｜>") + " " +
           calls(rules.define("call", alternatives(each)), "", several) + " " +
           literal("<｜tool▁calls▁end｜>");
}

// The generation prompt ends "<|start|>assistant"; the call is a commentary
// message to the function, ended by <|call|> (an end-of-generation token of
// gpt-oss's vocabulary, so the grammar ends before it). One call per
// answer: the template renders one per assistant message.
std::string harmony_call(RuleSet& rules, const std::vector<Tool>& tools) {
    std::vector<std::string> each;
    for (const Tool& t : tools)
        each.push_back(rules.define("call", literal("<|channel|>commentary to=functions." + t.name +
                                                    " <|constrain|>json<|message|>") +
                                                " " + arguments_rule(rules, t)));
    return rules.define("call", alternatives(each));
}

// --- Tagged parameters (Qwen3-Coder, GLM): each parameter between tags, in
// schema order, required ones always; a plain-string value bare, others JSON.

struct TagSpelling {
    std::string_view call_open, after_name;
    std::string_view key_open, key_close;  // key_close also opens the value
    std::string_view value_close, call_close, between;
    // What a bare value cannot hold: the parser ends the value, or the whole
    // call, at the first of them.
    std::array<std::string_view, 2> value_ends;
};

constexpr TagSpelling kQwen3CoderTags{"<tool_call>\n<function=",
                                      ">\n",
                                      "<parameter=",
                                      ">\n",
                                      "\n</parameter>\n",
                                      "</function>\n</tool_call>",
                                      "\n",
                                      {"</parameter>", "</tool_call>"}};
constexpr TagSpelling kGlmTags{
    "<tool_call>",    "\n",           "<arg_key>", "</arg_key>\n<arg_value>",
    "</arg_value>\n", "</tool_call>", "\n",        {"</arg_value>", "</tool_call>"}};

const TagSpelling* tag_spelling(ChatFamily family) {
    if (family == ChatFamily::Qwen3Coder) return &kQwen3CoderTags;
    if (family == ChatFamily::Glm) return &kGlmTags;
    return nullptr;
}

// A bare value: any text (`values` empty) or one of `values`.
struct BareValue {
    std::vector<std::string> values;
};

bool holds_any(std::string_view text, std::span<const std::string_view> words) {
    for (const std::string_view w : words)
        if (text.find(w) != std::string_view::npos) return true;
    return false;
}

// Whether a parameter is written bare: its schema is a plain string (only
// annotations beside "type": "string"), or an enum / const of strings none of
// which holds a value end. Anything else is JSON, enforced by the converter.
std::optional<BareValue> bare_value(const ordered_json& schema, const TagSpelling& how,
                                    const grammar::JsonSchemaLimits& limits) {
    static const std::set<std::string, std::less<>> kBareKeys{
        "type",    "enum",     "const",      "title",    "description", "examples",
        "default", "$comment", "deprecated", "readOnly", "writeOnly"};
    if (!schema.is_object()) return std::nullopt;
    for (auto it = schema.begin(); it != schema.end(); ++it)
        if (!kBareKeys.count(it.key())) return std::nullopt;
    if (schema.contains("type")) {
        const ordered_json& t = schema.at("type");
        if (!(t == "string" || (t.is_array() && t.size() == 1 && t[0] == "string")))
            return std::nullopt;
    }
    if (schema.contains("enum") && schema.contains("const")) return std::nullopt;
    BareValue out;
    if (schema.contains("enum") || schema.contains("const")) {
        const ordered_json values = schema.contains("const")
                                        ? ordered_json::array({schema.at("const")})
                                        : schema.at("enum");
        if (!values.is_array() || values.empty() || values.size() > limits.max_enum)
            return std::nullopt;
        for (const auto& v : values) {
            if (!v.is_string() || holds_any(v.get_ref<const std::string&>(), how.value_ends))
                return std::nullopt;
            out.values.push_back(v.get<std::string>());
        }
        return out;
    }
    if (!schema.contains("type")) return std::nullopt;  // any JSON value
    return out;
}

// The object schema of a tool's parameters, checked for what the tags can
// write: listed properties only (so additionalProperties never matters).
struct TagParameters {
    std::vector<std::pair<std::string, const ordered_json*>> properties;
    std::set<std::string> required;
};

TagParameters tag_parameters(const Tool& t, ChatFamily family,
                             const grammar::JsonSchemaLimits& limits) {
    static const std::set<std::string, std::less<>> kObjectKeys{
        "type",     "properties",  "required", "additionalProperties",
        "$defs",    "definitions", "title",    "description",
        "examples", "default",     "$schema",  "$id",
        "$comment", "deprecated",  "readOnly", "writeOnly"};
    const std::string at = parameters_pointer(t);
    const auto refuse = [&](const std::string& where, const std::string& why) {
        throw ApiError{400,
                       fmt::format("'tools': {}{}: {} (a forced call of the {} family writes "
                                   "each parameter between tags)",
                                   at, where, why, family_info(family).name),
                       "tools"};
    };
    const ordered_json& p = t.parameters;
    if (!p.is_object()) refuse("", "must be an object schema");
    for (auto it = p.begin(); it != p.end(); ++it)
        if (!kObjectKeys.count(it.key())) refuse("/" + it.key(), "not enforced");
    if (p.contains("type") && p.at("type") != "object") refuse("/type", "must be \"object\"");
    TagParameters out;
    if (p.contains("properties")) {
        const ordered_json& props = p.at("properties");
        if (!props.is_object()) refuse("/properties", "must be an object");
        if (props.size() > limits.max_properties)
            refuse("/properties", fmt::format("has {} members, past the limit max_properties ({})",
                                              props.size(), limits.max_properties));
        for (auto it = props.begin(); it != props.end(); ++it) {
            if (it.key().empty() || holds_any(it.key(), std::array<std::string_view, 2>{"<", ">"}))
                refuse("/properties", fmt::format("the name '{}' cannot be written as a tag "
                                                  "(empty, or holds '<' or '>')",
                                                  it.key()));
            out.properties.emplace_back(it.key(), &it.value());
        }
    }
    if (p.contains("required")) {
        const ordered_json& req = p.at("required");
        if (!req.is_array()) refuse("/required", "must be an array of property names");
        for (const auto& name : req) {
            if (!name.is_string()) refuse("/required", "must be an array of property names");
            const auto n = name.get<std::string>();
            if (!p.contains("properties") || !p.at("properties").contains(n))
                refuse("/required", fmt::format("'{}' is not in properties", n));
            out.required.insert(n);
        }
    }
    return out;
}

std::string bare_value_rule(RuleSet& rules, const BareValue& bare, const TagSpelling& how) {
    if (bare.values.empty()) return rules.text_without(how.value_ends);
    std::vector<std::string> each;
    for (const auto& v : bare.values) each.push_back(literal(v));
    return "(" + alternatives(each) + ")";
}

std::string tagged_calls(RuleSet& rules, const std::vector<Tool>& tools, const TagSpelling& how,
                         ChatFamily family, bool several) {
    std::vector<std::string> each;
    for (const Tool& t : tools) {
        const TagParameters params = tag_parameters(t, family, rules.limits());
        std::string body =
            literal(std::string(how.call_open) + t.name + std::string(how.after_name));
        for (const auto& [key, schema] : params.properties) {
            std::string value;
            if (auto bare = bare_value(*schema, how, rules.limits())) {
                value = bare_value_rule(rules, *bare, how);
            } else {
                // $ref into the parameters' $defs / definitions resolves
                // against a copy of the value's schema that carries them.
                ordered_json doc = *schema;
                if (doc.is_object())
                    for (const char* defs : {"$defs", "definitions"})
                        if (t.parameters.contains(defs) && !doc.contains(defs))
                            doc[defs] = t.parameters.at(defs);
                value = rules.json(doc, parameters_pointer(t) + "/properties/" + key);
            }
            const std::string one = rules.define(
                "param", literal(std::string(how.key_open) + key + std::string(how.key_close)) +
                             " " + value + " " + literal(how.value_close));
            body += " " + (params.required.count(key) ? one : "(" + one + ")?");
        }
        body += " " + literal(how.call_close);
        each.push_back(rules.define("call", body));
    }
    return calls(rules.define("call", alternatives(each)), how.between, several);
}

// Whether the family's parser ends a call at the first closing marker in
// its text (stream_parser.cpp's tagged calls), rather than where its JSON
// ends (Mistral, Granite, Functools, Llama 3).
bool ends_at_closer(ChatFamily family) {
    switch (family) {
        case ChatFamily::Hermes:
        case ChatFamily::SmolLM3:
        case ChatFamily::Qwen3Coder:
        case ChatFamily::Glm:
        case ChatFamily::DeepSeek:
        case ChatFamily::Harmony:
            return true;
        default:
            return false;
    }
}

}  // namespace

std::shared_ptr<const grammar::Grammar> tool_call_grammar(const DetectedChatFamily& detected,
                                                          const ChatToolFields& tools,
                                                          bool starts_in_reasoning,
                                                          CallGrammarMode mode) {
    const ChatFamily family = detected.family;
    const bool lazy = mode == CallGrammarMode::Lazy;
    // Lazy grammars begin at the trigger: the families whose forced answer
    // starts with their trigger text -- the JSON ones and the tagged ones
    // (`<tool_call>`). Not harmony (its trigger is mid-header) nor DeepSeek
    // (its markers are control tokens, which the watch sees by id but the
    // grammar cannot spell).
    if (lazy && !json_spelling(family) && !tag_spelling(family))
        return nullptr;  // auto stays parse-only
    const grammar::JsonSchemaLimits limits;
    RuleSet rules(limits, ends_at_closer(family));
    const std::vector<Tool> callable_tools = callable(tools);
    const bool several = tools.parallel && family != ChatFamily::Llama3;
    std::string answer;
    if (const auto spelling = json_spelling(family)) {
        answer = json_object_calls(rules, *spelling, callable_tools, several);
    } else if (const TagSpelling* tags = tag_spelling(family)) {
        answer = tagged_calls(rules, callable_tools, *tags, family, several);
    } else if (family == ChatFamily::DeepSeek) {
        answer = deepseek_calls(rules, callable_tools, detected.fenced_call_arguments, several);
    } else if (family == ChatFamily::Harmony) {
        answer = harmony_call(rules, callable_tools);
    } else {
        throw ApiError{400,
                       fmt::format("'tool_choice': the {} family writes no tool calls to force",
                                   family_info(family).name),
                       "tool_choice"};
    }
    std::string root;
    // Lazy: armed at the trigger, after any reasoning; Llama 3 may open a
    // call with <|python_tag|> (a trigger) before the bare JSON.
    if (lazy && family == ChatFamily::Llama3) root += "\"<|python_tag|>\"? ";
    if (!lazy && starts_in_reasoning && !family_info(family).reasoning_close.empty())
        root += literal(std::string(family_info(family).reasoning_close) + "\n\n") + " ";
    root += answer;
    auto g = grammar::parse_gbnf(rules.text(root), grammar::json_schema_grammar_limits(limits));
    if (!g)
        throw ApiError{
            400, fmt::format("'tools': the forced-call grammar: {}", g.error().message()), "tools"};
    return std::move(*g);
}

LazyGrammarParams lazy_tool_call_grammar(const DetectedChatFamily& family,
                                         const ChatToolFields& tools, bool starts_in_reasoning,
                                         const Tokenizer& tokenizer,
                                         const grammar::TokenTrie& vocab) {
    LazyGrammarParams lazy;
    try {
        lazy.grammar = tool_call_grammar(family, tools, false, CallGrammarMode::Lazy);
    } catch (const ApiError& e) {
        // A parameter schema the converter cannot enforce: under auto the
        // calls are still read, as before lazy grammars (only a forced call
        // must be enforced, so only there is it a 400).
        if (e.status != 400) throw;
        return {};
    }
    if (!lazy.grammar) return lazy;
    const ChatFamilyInfo& info = family_info(family.family);
    lazy.reasoning_start = std::string(info.reasoning_start);
    lazy.reasoning_end = std::string(info.reasoning_end);
    lazy.starts_in_reasoning = starts_in_reasoning;
    for (std::string_view trigger : info.tool_triggers) {
        if (trigger.empty()) continue;
        // Llama 3's bare JSON call is a call only as the whole answer.
        const bool at_start = trigger.front() == '{';
        lazy.triggers.push_back({std::string(trigger), at_start});
        // A control token has no text in the trie: it is watched by its id.
        const auto ids = tokenizer.encode(trigger, false, true);
        if (!at_start && ids.size() == 1 && ids[0] >= 0 &&
            static_cast<size_t>(ids[0]) < vocab.vocab_size() && vocab.piece(ids[0]) != trigger)
            lazy.trigger_tokens.push_back({ids[0], std::string(trigger)});
    }
    return lazy;
}

ChatTextParameters text_parameters(ChatFamily family, const ChatToolFields& tools) {
    ChatTextParameters out;
    const TagSpelling* how = tag_spelling(family);
    if (!how || !tools.tools.is_array()) return out;
    const grammar::JsonSchemaLimits limits;
    for (const auto& tool : tools.tools) {
        const auto& fn = tool.at("function");
        if (!fn.contains("parameters") || !fn.at("parameters").is_object() ||
            !fn.at("parameters").contains("properties") ||
            !fn.at("parameters").at("properties").is_object())
            continue;
        const auto& props = fn.at("parameters").at("properties");
        for (auto it = props.begin(); it != props.end(); ++it)
            if (bare_value(it.value(), *how, limits))
                out[fn.at("name").get<std::string>()].insert(it.key());
    }
    return out;
}

}  // namespace ferrox::server
