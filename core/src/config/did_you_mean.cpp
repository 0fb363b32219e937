#include "config/did_you_mean.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace ferrox::config_detail {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // Optimal string alignment over three rolling rows (the swap looks two rows back).
    const std::size_t width = b.size() + 1;
    std::vector<std::size_t> before_previous(width), previous(width), current(width);
    for (std::size_t j = 0; j < width; ++j) previous[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        current[0] = i;
        for (std::size_t j = 1; j < width; ++j) {
            const bool same = lower(a[i - 1]) == lower(b[j - 1]);
            current[j] =
                std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (same ? 0 : 1)});
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1])) {
                current[j] = std::min(current[j], before_previous[j - 2] + 1);
            }
        }
        std::swap(before_previous, previous);
        std::swap(previous, current);
    }
    return previous[b.size()];
}

std::optional<std::string> closest_match(std::string_view typed,
                                         std::span<const std::string> candidates) {
    // Beyond about a third of the word, a "suggestion" is a guess that misleads more
    // than it helps; two edits are always allowed so short keys ("cpu") still match.
    const std::size_t limit = std::max<std::size_t>(2, (typed.size() + 2) / 3);
    std::optional<std::string> best;
    std::size_t best_distance = limit + 1;
    for (const std::string& candidate : candidates) {
        const std::size_t distance = edit_distance(typed, candidate);
        if (distance < best_distance) {
            best_distance = distance;
            best = candidate;
        }
    }
    return best;
}

}  // namespace ferrox::config_detail
