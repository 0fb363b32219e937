#include "decode_context.h"

#include <utility>

namespace ferrox::server {

namespace {

class ModelContext final : public DecodeContext {
  public:
    explicit ModelContext(std::unique_ptr<model::Context> context) : ctx_(std::move(context)) {}

    uint32_t context() const override { return ctx_->context(); }
    uint32_t sequences() const override { return ctx_->sequences(); }
    uint32_t cells_used() const override { return ctx_->cells().used(); }
    model::DecodeStatus decode(const model::Batch& batch) override { return ctx_->decode(batch); }
    std::span<const float> logits(uint32_t index) const override { return ctx_->logits(index); }
    bool seq_remove(int32_t seq, int32_t p0, int32_t p1) override {
        return bool(ctx_->seq_remove(seq, p0, p1));
    }
    bool seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) override {
        return bool(ctx_->seq_copy(src, dst, p0, p1));
    }
    bool can_roll_back() const override { return !ctx_->recurrent(); }
    uint64_t checkpoint_bytes() const override { return ctx_->checkpoint_bytes(); }
    std::vector<std::byte> checkpoint(int32_t seq) override {
        auto bytes = ctx_->seq_checkpoint(seq);
        return bytes ? std::move(*bytes) : std::vector<std::byte>{};
    }
    bool rewind(int32_t seq, std::span<const std::byte> checkpoint) override {
        return bool(ctx_->seq_rewind(seq, checkpoint));
    }

  private:
    std::unique_ptr<model::Context> ctx_;
};

}  // namespace

std::unique_ptr<DecodeContext> context_over(std::unique_ptr<model::Context> context) {
    return std::make_unique<ModelContext>(std::move(context));
}

}  // namespace ferrox::server
