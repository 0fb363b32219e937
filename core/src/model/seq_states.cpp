#include "seq_states.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ferrox::model {
namespace {
uint64_t conv_floats(const Hparams& hp) {
    return uint64_t{hp.ssm_conv_kernel - 1} * hp.ssm_conv_dim();
}
uint64_t state_floats(const Hparams& hp) { return hp.ssm_state_floats(); }
uint32_t recurrent_layers(const Hparams& hp) {
    uint32_t n = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) n += hp.is_recurrent(il) ? 1 : 0;
    return n;
}
}  // namespace

uint64_t SeqStates::seq_floats(const Hparams& hp) {
    return uint64_t{recurrent_layers(hp)} * (conv_floats(hp) + state_floats(hp));
}

void SeqStates::allocate(const Hparams& hp, uint32_t n_seq) {
    conv_ = conv_floats(hp);
    state_ = state_floats(hp);
    per_seq_ = seq_floats(hp);
    slot_.assign(hp.n_layer, 0);
    uint32_t r = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il)
        if (hp.is_recurrent(il)) slot_[il] = r++;
    data_.assign(per_seq_ * 2 * n_seq, 0.0f);
    cur_.assign(n_seq, 0);
}

RecurrentState SeqStates::layer(uint32_t il, uint32_t seq) {
    const uint64_t at = slot_[il] * (conv_ + state_);
    const float* in = copy_at(seq, cur_[seq]) + at;
    float* out = copy_at(seq, cur_[seq] ^ 1u) + at;
    return {{in, conv_}, {in + conv_, state_}, {out, conv_}, {out + conv_, state_}};
}

void SeqStates::zero(uint32_t seq) { std::fill_n(copy_at(seq, 0), 2 * per_seq_, 0.0f); }

void SeqStates::copy(uint32_t src, uint32_t dst) {
    if (src == dst) return;
    std::copy_n(copy_at(src, cur_[src]), per_seq_, copy_at(dst, cur_[dst]));
}

std::span<float> SeqStates::current(uint32_t seq) { return {copy_at(seq, cur_[seq]), per_seq_}; }

std::span<const float> SeqStates::current(uint32_t seq) const {
    return {data_.data() + (seq * 2 + cur_[seq]) * per_seq_, per_seq_};
}

}  // namespace ferrox::model

namespace ferrox::model {

Expected<bool> recurrent_removal(uint32_t seq, int32_t min_pos, int32_t max_pos, int32_t p0,
                                 int32_t p1) {
    p0 = std::max(p0, 0);
    const bool to_end = p1 < 0 || p1 > max_pos;
    if (max_pos < 0 || p0 > max_pos || (p1 >= 0 && (p1 <= min_pos || p1 <= p0))) return false;
    if (p0 <= min_pos && to_end) return true;
    return make_error(
        "sequence {} holds a recurrent state at position {}; removing positions [{}, {}) would "
        "need it rolled back, which a recurrent model cannot do: clear the sequence (remove all "
        "its positions) and process its tokens again",
        seq, max_pos, p0, p1 < 0 ? std::string("end") : std::to_string(p1));
}

namespace {
struct CheckpointHeader {
    char magic[4];  // "FXCK"
    uint32_t version;
    uint64_t model;   // Model::Impl::instance
    uint64_t floats;  // of the state that follows
    int32_t positions, reserved;
};
constexpr uint32_t kCheckpointVersion = 1;
}  // namespace

uint64_t checkpoint_bytes(uint64_t state_floats) {
    return sizeof(CheckpointHeader) + state_floats * sizeof(float);
}

std::vector<std::byte> write_checkpoint(uint64_t model, int32_t positions,
                                        std::span<const float> state) {
    CheckpointHeader h{};
    std::memcpy(h.magic, "FXCK", 4);
    h.version = kCheckpointVersion;
    h.model = model;
    h.floats = state.size();
    h.positions = positions;
    std::vector<std::byte> out(checkpoint_bytes(state.size()));
    std::memcpy(out.data(), &h, sizeof h);
    std::memcpy(out.data() + sizeof h, state.data(), state.size_bytes());
    return out;
}

Expected<int32_t> read_checkpoint(std::span<const std::byte> bytes, uint64_t model,
                                  uint64_t state_floats) {
    CheckpointHeader h{};
    if (bytes.size() < sizeof h)
        return make_error("{} bytes is shorter than a checkpoint's {}-byte header", bytes.size(),
                          sizeof h);
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, "FXCK", 4) != 0 || h.version != kCheckpointVersion)
        return make_error("not a ferrox state checkpoint (version {})", kCheckpointVersion);
    if (h.model != model) return make_error("the checkpoint was taken on another loaded model");
    if (h.floats != state_floats || bytes.size() != checkpoint_bytes(state_floats))
        return make_error("the checkpoint holds {} bytes; this model's state needs {}",
                          bytes.size(), checkpoint_bytes(state_floats));
    if (h.positions < 1)
        return make_error("the checkpoint's position {} is not positive", h.positions);
    return h.positions;
}

std::span<const std::byte> checkpoint_state(std::span<const std::byte> bytes) {
    return bytes.subspan(sizeof(CheckpointHeader));
}

}  // namespace ferrox::model
