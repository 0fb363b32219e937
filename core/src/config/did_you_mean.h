// "did you mean 'X'?" for misspelt keys and values.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ferrox::config_detail {

// Edit distance counting insertions, deletions, substitutions and swaps of two
// neighbours (a typed "thraeds" is one slip, not two), compared case-insensitively.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `typed`, if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view typed,
                                         std::span<const std::string> candidates);

}  // namespace ferrox::config_detail
