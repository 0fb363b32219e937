// ModelDraftSource: a draft model's greedy guesses, its cells kept in step
// with the verified history (docs/speculation.md, "A draft model").
#include <algorithm>

#include "ferrox/draft_source.h"

namespace ferrox {
namespace {

// Rows whose products equal the single-row ones bit for bit (docs/models.md,
// "Batch invariance").
constexpr size_t kFewRows = 16;

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

}  // namespace

bool ModelDraftSource::decode(std::span<const int32_t> tokens) {
    const size_t batch = std::max<uint32_t>(decoder_.batch(), 1);
    for (size_t start = 0; start < tokens.size(); start += batch) {
        const size_t n = std::min(batch, tokens.size() - start);
        ++decodes_;
        logits_ = decoder_.decode(seq_, tokens.subspan(start, n), int32_t(cached_.size()));
        if (logits_.empty()) {
            error_ = "the draft model: " + decoder_.error();
            return false;
        }
        cached_.insert(cached_.end(), tokens.begin() + long(start),
                       tokens.begin() + long(start + n));
    }
    return true;
}

bool ModelDraftSource::cut(size_t keep) {
    if (cached_.size() <= keep) return true;
    if (!decoder_.remove(seq_, int32_t(keep))) {
        error_ = "the draft model: " + decoder_.error();
        return false;
    }
    cached_.resize(keep);
    return true;
}

std::vector<int32_t> ModelDraftSource::propose(std::span<const int32_t> tokens,
                                               uint32_t max_draft) {
    error_.clear();
    if (max_draft == 0 || tokens.empty()) return {};
    // The cells already hold a prefix of the history (the prompt, the
    // emitted tokens, what accept() kept); the rest -- at least the last
    // token, whose logits the first guess reads -- is decoded now.
    const size_t keep = std::min(common_prefix(cached_, tokens), tokens.size() - 1);
    if (!cut(keep)) return {};
    // In the shapes the target computed them: a long catch-up (the prompt)
    // in chunks of the batch, and the token after it alone -- the target
    // decoded it among at most 16 rows, whose products equal one row's. A
    // batch of more rows may round differently, and the draft's guesses
    // would then drift from what the target itself would guess.
    const size_t last = tokens.size() - 1;
    if (last - keep >= kFewRows && !decode(tokens.subspan(keep, last - keep))) return {};
    if (!decode(tokens.subspan(cached_.size()))) return {};
    proposed_from_ = tokens.size();
    std::vector<int32_t> draft;
    for (uint32_t j = 0; j < max_draft; ++j) {
        // Greedy: the first of the largest logits.
        const auto best = std::max_element(logits_.begin(), logits_.end());
        draft.push_back(int32_t(best - logits_.begin()));
        if (j + 1 == max_draft) break;  // the last guess needs no logits of its own
        const int32_t one[] = {draft.back()};
        if (!decode(one)) return {};
    }
    return draft;
}

void ModelDraftSource::accept(size_t accepted) {
    // The cells past the emitted draft tokens hold rejected guesses.
    (void)cut(proposed_from_ + accepted);
}

void ModelDraftSource::forget() {
    (void)cut(0);
    proposed_from_ = 0;
}

}  // namespace ferrox
