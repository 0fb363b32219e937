// Each sequence's state beyond its KV cells: for every recurrent (Gated
// DeltaNet) layer, the convolution's last kernel - 1 inputs and the delta
// rule's per-head state. Two copies per sequence: a decode reads the
// current one and writes the other, and only a decode that succeeded makes
// the written copy current, so a failed decode leaves every state as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

// One layer's state of one sequence: read before the batch (in), written by it (out).
struct RecurrentState {
    std::span<const float> conv_in, state_in;
    std::span<float> conv_out, state_out;
};

class SeqStates {
  public:
    // Floats of one sequence's state over every recurrent layer (one copy).
    static uint64_t seq_floats(const Hparams& hp);
    // Bytes the states of `n_seq` sequences take (both copies).
    static uint64_t bytes(const Hparams& hp, uint32_t n_seq) {
        return 2 * seq_floats(hp) * n_seq * sizeof(float);
    }

    // Zeroed states for n_seq sequences; none when the model has no recurrent layer.
    void allocate(const Hparams& hp, uint32_t n_seq);
    bool empty() const { return per_seq_ == 0; }

    RecurrentState layer(uint32_t il, uint32_t seq);
    // The copy the last decode wrote becomes the sequence's state.
    void commit(uint32_t seq) { cur_[seq] ^= 1u; }
    void zero(uint32_t seq);
    void copy(uint32_t src, uint32_t dst);
    // The current copy, every layer's conv window then state, in layer order.
    std::span<float> current(uint32_t seq);
    std::span<const float> current(uint32_t seq) const;

  private:
    float* copy_at(uint32_t seq, uint32_t which) {
        return data_.data() + (seq * 2 + which) * per_seq_;
    }

    uint64_t per_seq_ = 0, conv_ = 0, state_ = 0;
    std::vector<uint32_t> slot_;  // layer -> its index among the recurrent layers
    std::vector<float> data_;     // [seq][2 copies][recurrent layer][conv | state]
    std::vector<uint8_t> cur_;
};

}  // namespace ferrox::model

namespace ferrox::model {

// What removing positions [p0, p1) (p1 < 0: to the end) does to a sequence
// holding [min_pos, max_pos] when it has a recurrent state, which cannot be
// rolled back: nothing (false), the whole sequence, whose state is then
// cleared (true), or anything between, which is refused.
Expected<bool> recurrent_removal(uint32_t seq, int32_t min_pos, int32_t max_pos, int32_t p0,
                                 int32_t p1);

}  // namespace ferrox::model

namespace ferrox::model {

// A checkpoint of one sequence's recurrent state (Context::seq_checkpoint):
// a header naming the loaded model and the positions the state has taken
// in, then SeqStates::current()'s floats.
uint64_t checkpoint_bytes(uint64_t state_floats);
std::vector<std::byte> write_checkpoint(uint64_t model, int32_t positions,
                                        std::span<const float> state);
// The positions of a checkpoint for `model` holding `state_floats` floats
// (at checkpoint_state(bytes)); anything else is refused, saying why.
Expected<int32_t> read_checkpoint(std::span<const std::byte> bytes, uint64_t model,
                                  uint64_t state_floats);
std::span<const std::byte> checkpoint_state(std::span<const std::byte> bytes);

}  // namespace ferrox::model
