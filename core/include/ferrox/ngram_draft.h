// Draftless speculation's proposal: prompt lookup over a sequence's own
// tokens (docs/speculation.md). The last n tokens (n from max_ngram down to
// min_ngram) are looked up among the earlier tokens, the most recent
// occurrence first, and the tokens that followed it are the draft. The
// draft is only a guess: verification keeps exactly the tokens plain
// decoding would have chosen, so a bad guess costs time, never text.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ferrox/api.h"

namespace ferrox {

struct NgramDraftParams {
    uint32_t max_ngram = 3;  // longest suffix looked up
    uint32_t min_ngram = 1;  // shortest suffix that may still propose
    // Tokens before the suffix that are searched, newest first: bounds the
    // work per step whatever the context length.
    uint32_t window = 8192;
};

// Up to `max_draft` tokens that followed the most recent earlier occurrence
// of the longest suffix of `tokens` (max_ngram..min_ngram long) found within
// the window; empty when none is found. Work: O(window x max_ngram).
FERROX_API std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, uint32_t max_draft,
                                            const NgramDraftParams& params = {});

// How many draft tokens to propose next, from how the last draft fared:
// all accepted doubles it (up to `max_draft`), none accepted halves it
// (down to 1), anything between keeps it.
FERROX_API uint32_t adapt_draft_length(uint32_t current, uint32_t max_draft, size_t drafted,
                                       size_t accepted);

}  // namespace ferrox
