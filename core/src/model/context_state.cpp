// A sequence's saved state (seq_save / seq_restore: its cells' K and V rows and
// its recurrent state, versioned) and recurrent checkpoints (seq_checkpoint /
// seq_rewind).
#include <atomic>
#include <cstring>

#include "context_impl.h"

namespace ferrox::model {

namespace {
// Saved sequence state: a header, the positions, then each cached layer's K
// rows and V rows in position order, then the recurrent layers' state.
struct StateHeader {
    char magic[4];  // "FXSQ"
    uint32_t version;
    uint32_t n_layer, k_kind;  // n_layer: the layers whose rows follow
    uint64_t k_row, v_row;     // bytes per cell row of the first of them (the others' follow)
    // v_kind: the V rows' kind since version 2 (mixed K/V kinds); version 1
    // wrote 0 here and its V rows are of k_kind.
    uint32_t n_cells, v_kind;
};
// Version 3 holds rows for the layers that own K and V (KvSlots) only;
// versions 1 and 2 held them for every unshared layer, a recurrent layer's
// included (rows it never wrote), which restore reads past.
constexpr uint32_t kStateVersion = 3;

// The layers whose rows a state of `version` holds, in order: v3 the
// slots' owners, v1 and v2 every unshared layer.
std::vector<uint32_t> saved_layers(const Hparams& hp, const KvSlots& slots, uint32_t version) {
    std::vector<uint32_t> layers;
    if (version >= 3) {
        for (uint32_t s = 0; s < slots.size(); ++s) layers.push_back(slots.layer(s));
    } else {
        for (uint32_t il = 0; il < hp.unshared_layers(); ++il) layers.push_back(il);
    }
    return layers;
}
}  // namespace

Expected<std::vector<std::byte>> Context::seq_save(int32_t seq) const {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r.error();
    const Impl& c = *impl_;
    if (c.steps->resident())
        return make_error("seq_save: the cache of a resident context lives on the device");
    std::vector<uint32_t> list;
    c.cells.cells_of(static_cast<uint32_t>(seq), 0, std::numeric_limits<int32_t>::max(), list);
    const std::vector<uint32_t> layers = saved_layers(c.hp, c.slots, kStateVersion);
    StateHeader h{};
    std::memcpy(h.magic, "FXSQ", 4);
    h.version = kStateVersion;
    h.n_layer = static_cast<uint32_t>(layers.size());
    h.k_kind = static_cast<uint32_t>(c.kv_kinds.key);
    h.v_kind = static_cast<uint32_t>(c.kv_kinds.value);
    h.k_row = layers.empty() ? 0 : c.k_row_bytes(layers[0]);
    h.v_row = layers.empty() ? 0 : c.v_row_bytes(layers[0]);
    h.n_cells = static_cast<uint32_t>(list.size());
    // Then the recurrent layers' state (qwen35), which the model's shape sizes.
    const std::span<const float> rec =
        c.states.empty() ? std::span<const float>{} : c.states.current(static_cast<uint32_t>(seq));
    const uint64_t size =
        sizeof h + list.size() * sizeof(int32_t) + list.size() * c.cell_bytes() + rec.size_bytes();
    std::vector<std::byte> out(size);
    std::byte* p = out.data();
    std::memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (uint32_t cell : list) {
        const int32_t pos = c.cells.pos(cell);
        std::memcpy(p, &pos, sizeof pos);
        p += sizeof pos;
    }
    for (uint32_t il : layers) {
        const uint64_t k_row = c.k_row_bytes(il), v_row = c.v_row_bytes(il);
        const Act& k_slot = c.k_cache[c.slots.of(il)];
        const Act& v_slot = c.v_cache[c.slots.of(il)];
        for (uint32_t cell : list) {
            std::memcpy(p, k_slot.host + cell * k_row, k_row);
            p += k_row;
        }
        for (uint32_t cell : list) {
            std::memcpy(p, v_slot.host + cell * v_row, v_row);
            p += v_row;
        }
    }
    if (!rec.empty()) std::memcpy(p, rec.data(), rec.size_bytes());
    return out;
}

Expected<void> Context::seq_restore(int32_t seq, std::span<const std::byte> bytes) {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r;
    Impl& c = *impl_;
    if (c.steps->resident())
        return make_error("seq_restore: the cache of a resident context lives on the device");
    StateHeader h{};
    if (bytes.size() < sizeof h)
        return make_error("seq_restore: {} bytes is shorter than the {}-byte header", bytes.size(),
                          sizeof h);
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, "FXSQ", 4) != 0)
        return make_error("seq_restore: not a ferrox sequence state (no FXSQ magic)");
    if (h.version < 1 || h.version > kStateVersion)
        return make_error(
            "seq_restore: a ferrox sequence state of version {}; this build reads versions 1 to {}",
            h.version, kStateVersion);
    if (h.version == 1) h.v_kind = h.k_kind;  // one kind for K and V then
    const std::vector<uint32_t> layers = saved_layers(c.hp, c.slots, h.version);
    const uint64_t k_row = layers.empty() ? 0 : c.k_row_bytes(layers[0]);
    const uint64_t v_row = layers.empty() ? 0 : c.v_row_bytes(layers[0]);
    // The kinds are named (a q8_0 state into an f16 context is refused as such).
    const KvKinds saved{static_cast<ferrox_kind>(h.k_kind), static_cast<ferrox_kind>(h.v_kind)};
    if (saved != c.kv_kinds)
        return make_error(
            "seq_restore: the state holds a {} KV cache; this context's cache is {} (its "
            "-ctk / -ctv must match the ones that saved it)",
            kv_kinds_name(saved), kv_kinds_name(c.kv_kinds));
    if (h.n_layer != layers.size() || h.k_row != k_row || h.v_row != v_row)
        return make_error(
            "seq_restore: the state (version {}) is for {} layers, KV kind {}, rows of {}/{} "
            "bytes; this context has {} layers, {}, {}/{}",
            h.version, h.n_layer, kv_kinds_name(saved), h.k_row, h.v_row, layers.size(),
            kv_kinds_name(c.kv_kinds), k_row, v_row);
    // Every size the buffer controls is checked against the buffer before use.
    uint64_t row_bytes = 0;
    for (uint32_t il : layers) row_bytes += c.k_row_bytes(il) + c.v_row_bytes(il);
    const uint64_t rec_bytes = SeqStates::seq_floats(c.hp) * sizeof(float);
    const uint64_t need = sizeof h + uint64_t{h.n_cells} * sizeof(int32_t) +
                          uint64_t{h.n_cells} * row_bytes + rec_bytes;
    if (h.n_cells > c.cells.size() || bytes.size() != need)
        return make_error(
            "seq_restore: {} cells need {} bytes; the buffer holds {} (context of {})", h.n_cells,
            need, bytes.size(), c.cells.size());
    std::vector<int32_t> positions(h.n_cells);
    std::memcpy(positions.data(), bytes.data() + sizeof h, h.n_cells * sizeof(int32_t));
    for (uint32_t i = 0; i < h.n_cells; ++i)
        if (positions[i] < 0 || (i && positions[i] <= positions[i - 1]))
            return make_error("seq_restore: position {} at index {} is not after the previous one",
                              positions[i], i);
    // The sequence's own cells are given up first; count them as free.
    std::vector<uint32_t> own;
    c.cells.cells_of(static_cast<uint32_t>(seq), 0, std::numeric_limits<int32_t>::max(), own);
    uint32_t reclaim = 0;
    for (uint32_t cell : own) reclaim += c.cells.seqs(cell) == (uint64_t{1} << seq) ? 1 : 0;
    if (h.n_cells > c.cells.free() + reclaim)
        return make_error("seq_restore: {} cells needed, {} free", h.n_cells,
                          c.cells.free() + reclaim);
    c.cells.remove(static_cast<uint32_t>(seq), 0, -1);
    const auto cells = c.cells.find_free(h.n_cells);
    const std::byte* p = bytes.data() + sizeof h + h.n_cells * sizeof(int32_t);
    for (uint32_t il : layers) {
        const uint64_t k_layer = c.k_row_bytes(il), v_layer = c.v_row_bytes(il);
        // An older state's rows of a recurrent layer: never written, skipped.
        if (!c.hp.owns_kv(il)) {
            p += uint64_t{h.n_cells} * (k_layer + v_layer);
            continue;
        }
        const Act& k_slot = c.k_cache[c.slots.of(il)];
        const Act& v_slot = c.v_cache[c.slots.of(il)];
        for (uint32_t cell : cells) {
            std::memcpy(k_slot.host + cell * k_layer, p, k_layer);
            p += k_layer;
        }
        for (uint32_t cell : cells) {
            std::memcpy(v_slot.host + cell * v_layer, p, v_layer);
            p += v_layer;
        }
    }
    for (uint32_t i = 0; i < h.n_cells; ++i)
        c.cells.occupy(cells[i], positions[i], uint64_t{1} << seq);
    if (rec_bytes) std::memcpy(c.states.current(static_cast<uint32_t>(seq)).data(), p, rec_bytes);
    return {};
}

namespace {
std::atomic<CheckpointFault> checkpoint_fault{CheckpointFault::None};
}  // namespace

void set_checkpoint_fault(CheckpointFault fault) { checkpoint_fault = fault; }

uint64_t Context::checkpoint_bytes() const {
    return impl_->states.empty() ? 0 : model::checkpoint_bytes(SeqStates::seq_floats(impl_->hp));
}

Expected<std::vector<std::byte>> Context::seq_checkpoint(int32_t seq) const {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r.error();
    const Impl& c = *impl_;
    if (c.states.empty())
        return make_error(
            "seq_checkpoint: the model has no recurrent layer (its KV cells roll "
            "back with seq_remove)");
    const auto s = static_cast<uint32_t>(seq);
    int32_t positions = c.cells.max_pos(s) + 1;
    if (positions == 0) return make_error("seq_checkpoint: sequence {} holds no position", seq);
    if (checkpoint_fault == CheckpointFault::OneTokenLate) --positions;
    return write_checkpoint(c.model.instance, positions, c.states.current(s));
}

Expected<void> Context::seq_rewind(int32_t seq, std::span<const std::byte> checkpoint) {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r;
    Impl& c = *impl_;
    if (c.states.empty()) return make_error("seq_rewind: the model has no recurrent layer");
    const uint64_t floats = SeqStates::seq_floats(c.hp);
    auto positions = read_checkpoint(checkpoint, c.model.instance, floats);
    if (!positions) return make_error("seq_rewind: {}", positions.error().message());
    const auto s = static_cast<uint32_t>(seq);
    const int32_t p = *positions;
    // Positions are unique within a sequence: p cells at 0..p-1 are all of them.
    std::vector<uint32_t> held;
    c.cells.cells_of(s, 0, p - 1, held);
    if (held.size() != static_cast<size_t>(p))
        return make_error(
            "seq_rewind: the checkpoint goes with positions 0..{}; sequence {} holds {} of them",
            p - 1, seq, held.size());
    c.cells.remove(s, p, -1);
    if (checkpoint_fault != CheckpointFault::StateNotRestored)
        std::memcpy(c.states.current(s).data(), checkpoint_state(checkpoint).data(),
                    floats * sizeof(float));
    return {};
}

}  // namespace ferrox::model
