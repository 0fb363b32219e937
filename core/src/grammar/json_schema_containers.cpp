// The converter's arrays (items, prefixItems, counts) and objects
// (properties in order, required, additionalProperties): json_schema_converter.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "json_schema_converter.h"

namespace ferrox::grammar::schema {

std::string Converter::array(const ordered_json& s, const std::string& ptr, uint32_t depth) {
    std::vector<std::string> prefix;
    const ordered_json* items = s.contains("items") ? &s.at("items") : nullptr;
    const ordered_json* tuple = s.contains("prefixItems") ? &s.at("prefixItems") : nullptr;
    std::string tuple_at = child(ptr, "prefixItems");
    if (items && items->is_array()) {  // draft 7's tuple form
        if (tuple) refuse(child(ptr, "items"), "an array beside prefixItems is not enforced");
        tuple = items;
        tuple_at = child(ptr, "items");
        items = nullptr;
    }
    if (tuple && !tuple->is_array()) refuse(tuple_at, "must be an array");
    const uint32_t min = count(s, "minItems", ptr).value_or(0);
    const auto max = count(s, "maxItems", ptr);
    if (max && *max < min) refuse(child(ptr, "maxItems"), "is below minItems");
    const size_t n_tuple = tuple ? tuple->size() : 0;
    if (n_tuple > limits_.max_repetition)
        refuse(tuple_at, fmt::format("has {} schemas, past the limit max_repetition ({})", n_tuple,
                                     limits_.max_repetition));
    const size_t n_prefix = max ? std::min<size_t>(n_tuple, *max) : n_tuple;
    for (size_t i = 0; i < n_prefix; ++i)
        prefix.push_back(compile((*tuple)[i], child(tuple_at, std::to_string(i)), depth + 1));
    // Items after the tuple: only as many as minItems needs when "items"
    // is absent (any value may follow; the grammar makes none).
    const uint32_t extra_min = min > n_prefix ? static_cast<uint32_t>(min - n_prefix) : 0;
    std::optional<uint32_t> extra_max;
    if (max) extra_max = static_cast<uint32_t>(*max - n_prefix);
    std::string item;
    if (items && *items == false) {
        if (extra_min > 0)
            refuse(child(ptr, "minItems"), "needs more items than prefixItems allows");
        extra_max = 0;
    } else if (items) {
        item = compile(*items, child(ptr, "items"), depth + 1);
    } else {
        item = schema::kJsonValue;
        if (n_tuple > 0) extra_max = extra_min;
    }
    const auto repeat = [](const std::string& x, uint32_t lo, std::optional<uint32_t> hi) {
        if (hi && *hi == 0) return std::string();
        if (!hi) return lo == 0 ? "(" + x + ")*" : fmt::format("({}){{{},}}", x, lo);
        if (lo == *hi) return fmt::format("({}){{{}}}", x, lo);
        return fmt::format("({}){{{},{}}}", x, lo, *hi);
    };
    const std::string open = "\"[\" " + std::string(schema::kWs), close = "\"]\"";
    const std::string next_item = seq({"\",\"", schema::kWs, item, schema::kWs});
    if (prefix.empty()) {
        if (extra_max && *extra_max == 0) return seq({open, close});
        const std::optional<uint32_t> more_max =
            extra_max ? std::optional<uint32_t>(*extra_max - 1) : std::nullopt;
        const std::string inner = seq(
            {item, schema::kWs, repeat(next_item, extra_min > 0 ? extra_min - 1 : 0, more_max)});
        return seq({open, extra_min == 0 ? optional_of(inner) : inner, close});
    }
    std::string body = seq({open, prefix[0], schema::kWs});
    for (size_t i = 1; i < prefix.size(); ++i)
        body = seq({body, "\",\"", schema::kWs, prefix[i], schema::kWs});
    return seq({body, repeat(next_item, extra_min, extra_max), close});
}

// A key that is none of `keys`, closing quote included: a rule per node
// of the keys' trie. Extra keys take no escapes, so a listed key cannot
// come back spelled another way ("\u0061" for "a").
std::string Converter::other_key(const std::vector<std::string>& keys) {
    struct Node {
        std::map<uint32_t, size_t> children;
        bool end = false;
    };
    std::vector<Node> trie(1);
    for (const auto& key : keys) {
        const auto cps = schema::code_points(key);
        if (std::any_of(cps.begin(), cps.end(),
                        [](uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }))
            continue;  // an extra key cannot spell it
        size_t at = 0;
        for (const uint32_t c : cps) {
            auto it = trie[at].children.find(c);
            if (it == trie[at].children.end()) {
                trie.push_back({});
                it = trie[at].children.emplace(c, trie.size() - 1).first;
            }
            at = it->second;
        }
        trie[at].end = true;
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < trie.size(); ++i) names.push_back(fresh("other-key"));
    const std::string close = "\"\\\"\"";
    for (size_t i = 0; i < trie.size(); ++i) {
        std::vector<std::pair<uint32_t, uint32_t>> excluded{{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}};
        std::string body;
        for (const auto& [c, next] : trie[i].children) {
            excluded.emplace_back(c, c);
            body += (body.empty() ? "" : " | ") + schema::gbnf_class({{c, c}}) + " " + names[next];
        }
        body += (body.empty() ? "" : " | ") +
                schema::gbnf_class(schema::scalars_outside(excluded)) + " " + schema::kJsonChar +
                "-plain* " + close;
        if (!trie[i].end) body += " | " + close;
        define(names[i], body);
    }
    if (!plain_char_defined_) {
        define(std::string(schema::kJsonChar) + "-plain", schema::json_plain_class());
        plain_char_defined_ = true;
    }
    return seq({"\"\\\"\"", names[0]});
}

std::string Converter::object(const ordered_json& s, const std::string& ptr, uint32_t depth) {
    std::vector<Property> props;
    const std::string props_at = child(ptr, "properties");
    if (s.contains("properties")) {
        const ordered_json& p = s.at("properties");
        if (!p.is_object()) refuse(props_at, "must be an object");
        if (p.size() > limits_.max_properties)
            refuse(props_at, fmt::format("has {} properties, past the limit max_properties ({})",
                                         p.size(), limits_.max_properties));
        for (auto it = p.begin(); it != p.end(); ++it)
            props.push_back(
                {it.key(), compile(it.value(), child(props_at, it.key()), depth + 1), false});
    }
    // additionalProperties: absent lets any other key through; the grammar
    // makes none when properties are listed (as llama.cpp), any otherwise.
    std::optional<std::string> extra;
    const std::string add_at = child(ptr, "additionalProperties");
    const bool add_given = s.contains("additionalProperties");
    if (add_given && s.at("additionalProperties") != false)
        extra = compile(s.at("additionalProperties"), add_at, depth + 1);
    else if (!add_given && props.empty())
        extra = schema::kJsonValue;
    if (s.contains("required")) {
        const ordered_json& req = s.at("required");
        const std::string req_at = child(ptr, "required");
        if (!req.is_array()) refuse(req_at, "must be an array of property names");
        for (size_t i = 0; i < req.size(); ++i) {
            if (!req[i].is_string()) refuse(child(req_at, std::to_string(i)), "must be a string");
            const std::string name = req[i].get<std::string>();
            auto it = std::find_if(props.begin(), props.end(),
                                   [&](const Property& p) { return p.key == name; });
            if (it != props.end()) {
                it->required = true;
                continue;
            }
            // Required but not listed: it must come, with additionalProperties' schema.
            if (add_given && s.at("additionalProperties") == false)
                refuse(child(req_at, std::to_string(i)),
                       fmt::format("'{}' is not in properties and additionalProperties is false",
                                   name));
            if (props.size() >= limits_.max_properties)
                refuse(req_at,
                       fmt::format("past the limit max_properties ({})", limits_.max_properties));
            props.push_back({name, add_given ? *extra : std::string(schema::kJsonValue), true});
        }
    }
    // T_i: the members from property i on; "first" when none came yet,
    // "after" when a comma must come first. One rule each: linear size.
    std::string first, after;  // "" = nothing more
    if (extra) {
        std::vector<std::string> keys;
        for (const auto& p : props) keys.push_back(p.key);
        const std::string key = props.empty() ? std::string(schema::kJsonString) : other_key(keys);
        const std::string kv =
            rule("extra-kv", seq({key, schema::kWs, "\":\"", schema::kWs, *extra}));
        after = rule("more",
                     "(\",\" " + std::string(schema::kWs) + " " + kv + " " + schema::kWs + ")*");
        first = rule("more", optional_of(seq({kv, schema::kWs, after})));
    }
    for (size_t i = props.size(); i-- > 0;) {
        const Property& p = props[i];
        const std::string kv =
            rule("kv-" + p.key, seq({schema::gbnf_literal(json_text(p.key)), schema::kWs, "\":\"",
                                     schema::kWs, p.value}));
        const std::string with_comma = seq({"\",\"", schema::kWs, kv, schema::kWs, after});
        const std::string without = seq({kv, schema::kWs, after});
        std::string new_after, new_first;
        if (p.required) {
            new_after = with_comma;
            new_first = without;
        } else {
            new_after =
                after.empty() ? optional_of(with_comma) : "(" + with_comma + " | " + after + ")";
            new_first = first.empty() ? optional_of(without) : "(" + without + " | " + first + ")";
        }
        after = rule("after", new_after);
        first = rule("first", new_first);
    }
    return seq({"\"{\"", schema::kWs, first, "\"}\""});
}

}  // namespace ferrox::grammar::schema
