// Where speculative decoding's drafts come from (docs/speculation.md). The
// verifier asks a source for at most k tokens to follow a sequence, verifies
// them in one decode, and tells the source how many of them were emitted; it
// does not know whether the guess came from prompt lookup (NgramDraftSource)
// or from a smaller model of the same vocabulary (the CLI's DraftModel). A
// source serves one sequence. Its drafts are only guesses: verification keeps
// exactly the tokens plain decoding chooses, so a bad source costs time,
// never text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/ngram_draft.h"

namespace ferrox {

class FERROX_API DraftSource {
  public:
    virtual ~DraftSource() = default;

    // Up to `max_draft` tokens to follow `tokens`: the sequence's whole
    // history, prompt and output, whose last token the target has not yet
    // decoded. Empty: no guess (or a failure, which error() then names).
    virtual std::vector<int32_t> propose(std::span<const int32_t> tokens, uint32_t max_draft) = 0;
    // Of the last proposal, the first `accepted` tokens were emitted; the
    // token emitted after them (the target's correction, or its free extra
    // token) reaches the source as the end of the next propose's `tokens`.
    virtual void accept(size_t accepted) = 0;
    // Why the last call failed; empty when it did not.
    virtual const std::string& error() const = 0;
    // For reports: "ngram" or "model".
    virtual const char* kind() const = 0;
};

// Prompt lookup (ngram_draft) as a source: no state, nothing to take back.
class FERROX_API NgramDraftSource final : public DraftSource {
  public:
    explicit NgramDraftSource(NgramDraftParams params = {}) : params_(params) {}
    std::vector<int32_t> propose(std::span<const int32_t> tokens, uint32_t max_draft) override {
        return ngram_draft(tokens, max_draft, params_);
    }
    void accept(size_t) override {}
    const std::string& error() const override { return error_; }
    const char* kind() const override { return "ngram"; }

  private:
    NgramDraftParams params_;
    std::string error_;  // always empty: a lookup cannot fail
};

}  // namespace ferrox
