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
        if (decoder_.decode(seq_, tokens.subspan(start, n), int32_t(cached_.size())).empty()) {
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

bool ModelDraftSource::begin(std::span<const int32_t> tokens, uint32_t max_draft) {
    error_.clear();
    draft_.clear();
    rest_.clear();
    want_ = 0;
    if (max_draft == 0 || tokens.empty()) return false;
    // The cells already hold a prefix of the history (the prompt, the
    // emitted tokens, what accept() kept); the rest -- at least the last
    // token, whose logits the first guess reads -- is decoded now.
    const size_t keep = std::min(common_prefix(cached_, tokens), tokens.size() - 1);
    if (!cut(keep)) return false;
    // In the shapes the target computed them: a long catch-up (the prompt)
    // in chunks of the batch, and the token after it apart -- the target
    // decoded it among at most 16 rows, whose products equal one row's. A
    // batch of more rows may round differently, and the draft's guesses
    // would then drift from what the target itself would guess.
    const size_t last = tokens.size() - 1;
    if (last - keep >= kFewRows && !decode(tokens.subspan(keep, last - keep))) return false;
    rest_.assign(tokens.begin() + long(cached_.size()), tokens.end());
    proposed_from_ = tokens.size();
    want_ = max_draft;
    return true;
}

std::span<const int32_t> ModelDraftSource::pending() const {
    const size_t most = std::min<size_t>(std::max<uint32_t>(decoder_.batch(), 1), kFewRows);
    return std::span<const int32_t>(rest_).first(std::min(rest_.size(), most));
}

void ModelDraftSource::decoded(std::span<const float> logits) {
    const size_t n = pending().size();
    if (n == 0) return;
    if (logits.empty()) {
        failed("a pass gave no logits");
        return;
    }
    ++decodes_;
    cached_.insert(cached_.end(), rest_.begin(), rest_.begin() + long(n));
    rest_.erase(rest_.begin(), rest_.begin() + long(n));
    if (!rest_.empty()) return;  // more of the catch-up first
    // Greedy: the first of the largest logits.
    const auto best = std::max_element(logits.begin(), logits.end());
    draft_.push_back(int32_t(best - logits.begin()));
    // The last guess needs no logits of its own.
    if (draft_.size() < want_) rest_.push_back(draft_.back());
}

void ModelDraftSource::failed(const std::string& why) {
    error_ = "the draft model: " + why;
    draft_.clear();
    rest_.clear();
}

std::vector<int32_t> ModelDraftSource::propose(std::span<const int32_t> tokens,
                                               uint32_t max_draft) {
    if (!begin(tokens, max_draft)) return {};
    for (auto rows = pending(); !rows.empty(); rows = pending()) {
        const auto logits = decoder_.decode(seq_, rows, pos());
        if (logits.empty()) {
            failed(decoder_.error());
            return {};
        }
        decoded(logits);
    }
    return draft_;
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
