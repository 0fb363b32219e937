// Typed readings of YAML scalar text: integers, booleans, byte sizes. Each returns
// nullopt or a reason; the caller adds the key and file position to the message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace ferrox::config_detail {

enum class NumberProblem {
    NotANumber,  // "two", "2.5", "8GB"
    TooLarge,    // does not fit the type at all
};

// A whole decimal integer, optionally signed ("-3", "+4", "12").
std::variant<std::int64_t, NumberProblem> parse_integer(std::string_view text);

// YAML 1.2's booleans only: true/True/TRUE/false/False/FALSE. ("yes"/"on" are not
// booleans in YAML 1.2; accepting them would make "no" mean false in one place and
// a string in another.)
std::variant<bool, std::monostate> parse_bool(std::string_view text);

// A byte count: a plain integer, or an integer followed by an IEC unit
// (B, KiB, MiB, GiB, TiB; optional space; unit case-insensitive): "512MiB", "8 GiB".
// Decimal units ("8GB") are refused as ambiguous; `suggestion` then holds "8GiB".
struct ByteSizeResult {
    std::uint64_t bytes = 0;
    bool ok = false;
    bool negative = false;   // "-1": a number, but out of range
    bool overflow = false;   // a number, but more than 2^64-1 bytes
    std::string suggestion;  // a spelling that would have been accepted, if any
};
ByteSizeResult parse_byte_size(std::string_view text);

}  // namespace ferrox::config_detail
