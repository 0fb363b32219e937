#include "context_drafter.h"

#include <fmt/format.h>

namespace ferrox::server {

std::span<const float> ContextDrafter::decode(int32_t seq, std::span<const int32_t> tokens,
                                              int32_t pos) {
    if (tokens.empty()) return {};
    model::Batch batch;
    for (size_t i = 0; i < tokens.size(); ++i)
        batch.add(tokens[i], pos + int32_t(i), {seq}, i + 1 == tokens.size());
    const auto status = ctx_->decode(batch);
    if (!status) {
        error_ = status.message;
        return {};
    }
    return ctx_->logits(uint32_t(tokens.size() - 1));
}

bool ContextDrafter::remove(int32_t seq, int32_t pos) {
    if (ctx_->seq_remove(seq, pos, -1)) return true;
    error_ = fmt::format("sequence {} refused the removal of its positions from {} on", seq, pos);
    return false;
}

}  // namespace ferrox::server
