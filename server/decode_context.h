// What the scheduler needs of an inference context, and no more: decode a
// batch into logits, drop and share a sequence's cells, and the sizes. The
// server runs it over a model::Context (context_over); the scheduler's tests
// run it over a fake that needs no model (tests/server/fake_context.h), as
// vLLM tests its scheduler without a model runner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ferrox/model/context.h"

namespace ferrox::server {

class DecodeContext {
  public:
    virtual ~DecodeContext() = default;

    virtual uint32_t context() const = 0;    // KV cells, for all sequences together
    virtual uint32_t sequences() const = 0;  // sequence ids 0..sequences-1
    virtual uint32_t cells_used() const = 0;
    uint32_t cells_free() const { return context() - cells_used(); }

    // One forward pass over `batch` (model::Batch's rules). Anything but Ok
    // leaves the cells as they were; NoRoom when fewer cells are free than
    // the batch has tokens.
    virtual model::DecodeStatus decode(const model::Batch& batch) = 0;
    // Row `index` of the last decode (vocabulary floats), or empty when that
    // row asked for none. Valid until the next decode.
    virtual std::span<const float> logits(uint32_t index) const = 0;

    // Positions [p0, p1) of `seq` (p1 < 0: to the end) are dropped; false on
    // a bad sequence id.
    virtual bool seq_remove(int32_t seq, int32_t p0, int32_t p1) = 0;
    // `dst` shares `src`'s cells of positions [p0, p1).
    virtual bool seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) = 0;
    // False for a recurrent model (qwen35): its sequences' tails cannot be
    // removed, so no draft tokens are verified on it (a rejected draft could
    // not be taken back), and a prefix is shared only whole (seq_remove and
    // seq_copy refuse the rest) or from a state checkpoint (rewind).
    virtual bool can_roll_back() const { return true; }
    // A recurrent model's state checkpoints (server/state_checkpoints.h):
    // one checkpoint's bytes (0: none, the model's cells roll back), one of
    // `seq` as of its last position (empty on failure), and `seq` rewound
    // to one -- its positions from the checkpoint's on dropped, its state
    // the checkpoint's (false, nothing changed, when refused).
    virtual uint64_t checkpoint_bytes() const { return 0; }
    virtual std::vector<std::byte> checkpoint(int32_t) { return {}; }
    virtual bool rewind(int32_t, std::span<const std::byte>) { return false; }
};

// The scheduler's view of a model context (which it then owns).
std::unique_ptr<DecodeContext> context_over(std::unique_ptr<model::Context> context);

}  // namespace ferrox::server
