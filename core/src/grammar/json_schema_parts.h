// The pieces json_schema.cpp assembles a grammar from: GBNF literals and
// classes, the shared JSON rules, decimal integer ranges, and the regex
// subset of `pattern` (json_schema_pattern.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferrox::grammar::schema {

// Why a schema is refused; the converter catches it at its boundary and
// returns it as an Error (its message already names the JSON pointer).
struct Refusal {
    std::string message;
};

// Names of the shared rules every schema grammar carries (shared_rules()).
inline constexpr const char* kWs = "ws";
inline constexpr const char* kJsonChar = "json-char";  // one character inside a JSON string
inline constexpr const char* kJsonValue = "json-value";
inline constexpr const char* kJsonObject = "json-object";
inline constexpr const char* kJsonString = "json-string";
inline constexpr const char* kJsonNumber = "json-number";
inline constexpr const char* kJsonInteger = "json-integer";

// The shared rules: whitespace (bounded: at most one space, or one newline
// and `max_indent` spaces/tabs, between two tokens), a JSON string's
// characters, and any JSON value.
std::string shared_rules(uint32_t max_indent);

// `bytes` as a GBNF literal "...", escaped so parse_gbnf reads them back.
std::string gbnf_literal(std::string_view bytes);
// Inclusive code-point ranges as a GBNF class "[...]" ("[^...]" when negated).
std::string gbnf_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges,
                       bool negated = false);

// The Unicode scalar values (U+0000..U+10FFFF, no surrogates) outside
// `ranges`, as sorted ranges: GBNF refuses code points past U+10FFFF, so a
// class that must exclude them is written positively.
std::vector<std::pair<uint32_t, uint32_t>> scalars_outside(
    std::vector<std::pair<uint32_t, uint32_t>> ranges);

// A class of the characters a JSON string holds unescaped: Unicode scalars
// but '"', '\\' and the controls.
std::string json_plain_class();

// The decimal integers lo..hi (canonical: no leading zero, no "-0") as a
// GBNF expression; |lo|, |hi| < 10^18.
std::string integer_range(int64_t lo, int64_t hi);
inline constexpr int64_t kIntegerMagnitude = 999'999'999'999'999'999;  // 18 digits

// A `pattern` (ECMA-262 regex, the subset in docs/structured-output.md) as a
// GBNF expression over the *encoded* content of a JSON string (a '"' in the
// regex is '\"' in the text). Unanchored ends match any characters, as a
// regex search does. Refusal messages name the offset in the pattern.
std::string pattern_to_gbnf(std::string_view pattern, uint32_t max_repetition);

// Decodes UTF-8 (already validated by the JSON parser) to code points.
std::vector<uint32_t> code_points(std::string_view utf8);

}  // namespace ferrox::grammar::schema
