// The server's side of a draft model (docs/speculation.md, "A draft
// model"): ModelDraftSource's decoder over the draft's own DecodeContext,
// one sequence per scheduler slot, so that each slot's draft cells live
// beside the others' as the target's do; and the slots' proposals of one
// scheduler step run together, each step of theirs one shared call.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "decode_context.h"
#include "ferrox/draft_source.h"

namespace ferrox::server {

class ContextDrafter final : public DraftDecoder {
  public:
    // `batch`: rows per catch-up decode (the target's prefill chunk, so that
    // the draft computes a prompt in the target's shapes). `rows_per_call`:
    // the most rows a shared call of propose() holds (the target's decode
    // calls' 16, whose products equal one row's).
    ContextDrafter(std::unique_ptr<DecodeContext> context, uint32_t batch, uint32_t rows_per_call)
        : ctx_(std::move(context)), batch_(batch), rows_per_call_(rows_per_call) {}

    std::span<const float> decode(int32_t seq, std::span<const int32_t> tokens,
                                  int32_t pos) override;
    bool remove(int32_t seq, int32_t pos) override;
    uint32_t batch() const override { return batch_; }
    std::string error() const override { return error_; }

    // One slot's proposal: `source` (over this drafter, a sequence of its
    // own) guesses up to `max_draft` tokens after `tokens`.
    struct Proposal {
        ModelDraftSource* source = nullptr;
        std::span<const int32_t> tokens;
        uint32_t max_draft = 0;
    };
    // Runs the proposals together: their long catch-ups (prompts) alone, as
    // ModelDraftSource::begin decodes them, then step by step, each step's
    // pending rows of every source in one call (packed in order into calls
    // of at most rows_per_call rows when they do not fit one). Afterwards a
    // source's draft() holds its guesses, or its error() says why none (a
    // shared call that fails fails every source in it, their cells as they
    // were).
    void propose(std::span<const Proposal> proposals);

    DecodeContext& context() { return *ctx_; }

  private:
    std::unique_ptr<DecodeContext> ctx_;
    uint32_t batch_ = 1, rows_per_call_ = 1;
    std::string error_;
};

}  // namespace ferrox::server
