// The server's side of a draft model (docs/speculation.md, "A draft
// model"): ModelDraftSource's decoder over the draft's own DecodeContext,
// one sequence per scheduler slot, so that each slot's draft cells live
// beside the others' as the target's do.
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
    // the draft computes a prompt in the target's shapes).
    ContextDrafter(std::unique_ptr<DecodeContext> context, uint32_t batch)
        : ctx_(std::move(context)), batch_(batch) {}

    std::span<const float> decode(int32_t seq, std::span<const int32_t> tokens,
                                  int32_t pos) override;
    bool remove(int32_t seq, int32_t pos) override;
    uint32_t batch() const override { return batch_; }
    std::string error() const override { return error_; }

    DecodeContext& context() { return *ctx_; }

  private:
    std::unique_ptr<DecodeContext> ctx_;
    uint32_t batch_ = 1;
    std::string error_;
};

}  // namespace ferrox::server
