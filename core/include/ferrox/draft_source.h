// Where speculative decoding's drafts come from (docs/speculation.md). The
// verifier asks a source for at most k tokens to follow a sequence, verifies
// them in one decode, and tells the source how many of them were emitted; it
// does not know whether the guess came from prompt lookup (NgramDraftSource)
// or from a smaller model of the same vocabulary (ModelDraftSource). A
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
    // The sequence is gone: whatever the source keeps of it may go.
    virtual void forget() {}
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

// What a draft model's source needs of the context it runs in (the CLI's:
// the C API's; the server's: its DecodeContext), and no more.
class FERROX_API DraftDecoder {
  public:
    virtual ~DraftDecoder() = default;
    // Decodes `tokens` into sequence `seq` at positions pos, pos + 1, ... in
    // one forward pass, only the last one's logits wanted, and returns them
    // (vocabulary floats, valid until the next call); empty on failure, with
    // error() saying why and the cells as they were.
    virtual std::span<const float> decode(int32_t seq, std::span<const int32_t> tokens,
                                          int32_t pos) = 0;
    // Drops `seq`'s positions from `pos` on; false (error()) on failure.
    virtual bool remove(int32_t seq, int32_t pos) = 0;
    // Rows one decode may hold.
    virtual uint32_t batch() const = 0;
    virtual std::string error() const = 0;
};

// A draft model as a source (docs/speculation.md): sequence `seq` of the
// decoder's context holds a prefix of the history; propose brings it up to
// the history and takes the model's greedy continuation; accept drops the
// rejected guesses' cells. The decoder must outlive the source.
//
// A proposal runs in steps, each one forward pass of this sequence's
// pending rows (the rest of the catch-up, then the last guess): propose()
// makes the passes itself, one sequence a call; a driver that decodes
// several sources' rows together (the server's ContextDrafter, one call per
// step for all its slots) runs the same steps with begin(), pending() and
// decoded() instead.
class FERROX_API ModelDraftSource final : public DraftSource {
  public:
    ModelDraftSource(DraftDecoder& decoder, int32_t seq) : decoder_(decoder), seq_(seq) {}
    std::vector<int32_t> propose(std::span<const int32_t> tokens, uint32_t max_draft) override;
    void accept(size_t accepted) override;
    const std::string& error() const override { return error_; }
    const char* kind() const override { return "model"; }
    void forget() override;

    // Starts a proposal of up to `max_draft` tokens after `tokens`, as
    // propose() does: the cells cut back to the history's longest common
    // prefix and a long catch-up (a prompt) decoded in calls of its own.
    // False when there is nothing to decode: no guess wanted, or a failure
    // (error() says which).
    bool begin(std::span<const int32_t> tokens, uint32_t max_draft);
    // The rows this sequence's next pass carries, at positions pos() on,
    // only the last one's logits wanted; empty once the proposal is done.
    // At most the decoder's batch() and 16 rows.
    std::span<const int32_t> pending() const;
    int32_t pos() const { return int32_t(cached_.size()); }
    int32_t seq() const { return seq_; }
    // The pending rows were decoded, `logits` their last one's: they join
    // the cells, and once the catch-up is in, the logits give a guess.
    void decoded(std::span<const float> logits);
    // The pass of the pending rows failed (`why`), leaving the cells as
    // they were: the proposal ends without a guess.
    void failed(const std::string& why);
    // The proposal's guesses so far: all of them once pending() is empty.
    const std::vector<int32_t>& draft() const { return draft_; }

    // The draft's forward passes so far (its prompt's chunks included), or
    // the shared passes this sequence had rows in.
    uint64_t decodes() const { return decodes_; }
    // The tokens in the draft's cells, position 0 on.
    const std::vector<int32_t>& cached() const { return cached_; }

  private:
    // Decodes `tokens` after the cached ones (in chunks of the batch);
    // false (error_ set) on failure.
    bool decode(std::span<const int32_t> tokens);
    bool cut(size_t keep);  // drops the cells from position `keep` on

    DraftDecoder& decoder_;
    int32_t seq_ = 0;
    std::vector<int32_t> cached_;
    size_t proposed_from_ = 0;  // where the last proposal began
    // The proposal under way: the guesses wanted, those taken, and the
    // tokens still to decode (the catch-up's rest, or the last guess).
    uint32_t want_ = 0;
    std::vector<int32_t> draft_;
    std::vector<int32_t> rest_;
    uint64_t decodes_ = 0;
    std::string error_;
};

}  // namespace ferrox
