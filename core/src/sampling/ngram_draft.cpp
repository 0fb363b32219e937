#include "ferrox/ngram_draft.h"

#include <algorithm>

namespace ferrox {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, uint32_t max_draft,
                                 const NgramDraftParams& params) {
    const size_t len = tokens.size();
    const size_t longest = std::min<size_t>(params.max_ngram, len);
    const size_t shortest = std::max<size_t>(params.min_ngram, 1);
    if (max_draft == 0 || longest < shortest || len < 2) return {};
    // Candidate ends e: the suffix's copy ends at e < len - 1, so that at
    // least one token follows it. Newest first, so the first full-length
    // match is the most recent one and ends the scan.
    const size_t oldest = len - 1 > params.window ? len - 1 - params.window : 0;
    size_t best_len = 0, best_end = 0;
    for (size_t e = len - 1; e-- > oldest;) {
        size_t m = 0;
        while (m < longest && m <= e && tokens[e - m] == tokens[len - 1 - m]) ++m;
        if (m > best_len) {
            best_len = m, best_end = e;
            if (m == longest) break;
        }
    }
    if (best_len < shortest) return {};
    const size_t from = best_end + 1;
    const size_t n = std::min<size_t>(max_draft, len - from);
    return {tokens.begin() + long(from), tokens.begin() + long(from + n)};
}

uint32_t adapt_draft_length(uint32_t current, uint32_t max_draft, size_t drafted, size_t accepted) {
    if (drafted == 0) return std::clamp<uint32_t>(current, 1, std::max<uint32_t>(max_draft, 1));
    if (accepted == drafted)
        current = current * 2;
    else if (accepted == 0)
        current = current / 2;
    return std::clamp<uint32_t>(current, 1, std::max<uint32_t>(max_draft, 1));
}

}  // namespace ferrox
