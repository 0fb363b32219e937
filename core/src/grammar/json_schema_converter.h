// The JSON-schema-to-GBNF converter's class, shared by the files that
// implement it: json_schema.cpp (keywords, $ref, anyOf/oneOf, enum/const),
// json_schema_scalars.cpp (strings, formats, integers, numbers) and
// json_schema_containers.cpp (arrays, objects).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/grammar/json_schema.h"
#include "json_schema_parts.h"

namespace ferrox::grammar::schema {

using nlohmann::ordered_json;

// Bounded numbers: every value parses to a double within 2^53, so a bound
// compares exactly (json_schema_parts.h: integers keep 18 digits).
constexpr int64_t kNumberMagnitude = 999'999'999'999'999;  // 15 digits

// "/ptr/key", the key escaped as a JSON pointer token.
std::string child(const std::string& ptr, std::string_view key);
// Throws the Refusal that names `ptr` (the root when empty).
[[noreturn]] void refuse(const std::string& ptr, const std::string& why);
// A JSON value as compact text (invalid UTF-8 replaced).
std::string json_text(const ordered_json& v);
// "(x)?".
std::string optional_of(const std::string& x);
// "a b", dropping empty parts.
std::string seq(std::initializer_list<std::string> parts);

// One conversion: rules are appended as subschemas are compiled; refusals
// are thrown (Refusal) and caught at the public functions.
class Converter {
  public:
    Converter(const ordered_json& root, const JsonSchemaLimits& limits)
        : root_(root), limits_(limits) {}
    std::string run();

  private:
    std::string fresh(std::string_view hint);

    void define(const std::string& name, const std::string& body);

    std::string rule(std::string_view hint, const std::string& body);

    // A count keyword: a non-negative integer within max_repetition.
    std::optional<uint32_t> count(const ordered_json& s, const char* key, const std::string& ptr);

    // A keyword not enforced, or enforced only alone with annotations.
    void check_keywords(const ordered_json& s, const std::string& ptr);

    void only_with(const ordered_json& s, const std::string& ptr, const char* keyword,
                   std::initializer_list<const char*> allowed);

    // Returns the name of the rule for `s`.
    std::string compile(const ordered_json& s, const std::string& ptr, uint32_t depth);

    // The kinds "type" names (every kind when absent: then the keywords
    // present choose, see compile).
    unsigned types(const ordered_json& s, const std::string& ptr);

    std::string reference(const ordered_json& ref, const std::string& ptr, uint32_t depth);

    const ordered_json* resolve(const std::string& pointer) const;

    // Follows $ref and one-subschema allOf (bounded), for oneOf's checks.
    const ordered_json& unwrap(const ordered_json& s) const;

    // What kinds of value `s`'s grammar can produce (more, never fewer).
    unsigned kinds_of(const ordered_json& raw, int budget) const;

    // A required property whose const value tells every branch apart.
    bool discriminated(const ordered_json& branches) const;

    std::string alternatives(const ordered_json& s, const char* key, const std::string& ptr,
                             uint32_t depth);

    std::string enumeration(const ordered_json& s, const std::string& ptr);

    std::string format_rule(const std::string& format, const std::string& at);

    std::string string(const ordered_json& s, const std::string& ptr);

    struct IntBounds {
        int64_t lo, hi;
    };

    // The integers the bounds admit, within +-magnitude.
    IntBounds integer_bounds(const ordered_json& s, const std::string& ptr, int64_t magnitude);

    static bool has_bounds(const ordered_json& s);

    std::string integer(const ordered_json& s, const std::string& ptr);

    // Bounded numbers: integers within the bounds, and k.ddd for the k whose
    // whole unit interval lies within them (k.ddd rounds into [k, k+1]), so
    // no digits after the point can cross a bound. No exponent.
    std::string number(const ordered_json& s, const std::string& ptr);

    std::string array(const ordered_json& s, const std::string& ptr, uint32_t depth);

    struct Property {
        std::string key;    // decoded
        std::string value;  // its value's rule
        bool required;
    };

    // A key that is none of `keys`, closing quote included: a rule per node
    // of the keys' trie. Extra keys take no escapes, so a listed key cannot
    // come back spelled another way ("\u0061" for "a").
    std::string other_key(const std::vector<std::string>& keys);

    std::string object(const ordered_json& s, const std::string& ptr, uint32_t depth);

    const ordered_json& root_;
    const JsonSchemaLimits& limits_;
    std::string rules_;
    size_t rules_made_ = 0;
    std::map<std::string, std::string> refs_;     // $ref -> its rule
    std::map<std::string, std::string> formats_;  // format -> its rule
    bool plain_char_defined_ = false;
};

}  // namespace ferrox::grammar::schema
