// The KV cache's layout over the layers: one slot -- a K and a V buffer of
// `context` rows -- per layer that owns K and V (Hparams::owns_kv), in layer
// order. A recurrent layer has none (its state is in seq_states.h); a shared
// layer (gemma4) attends over its source layer's slot. A context derives it
// once from the layer kinds, so its allocation, stores, attention and state
// files cannot disagree about which buffer is a layer's.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "ferrox/model/hparams.h"

namespace ferrox::model {

class KvSlots {
  public:
    static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

    KvSlots() = default;
    explicit KvSlots(const Hparams& hp) : slot_(hp.n_layer, kNone) {
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            if (hp.owns_kv(il)) {
                slot_[il] = static_cast<uint32_t>(owner_.size());
                owner_.push_back(il);
            }
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            if (hp.attends(il) && slot_[il] == kNone) slot_[il] = slot_[hp.kv_layer(il)];
    }

    // Slots: the layers that own K and V.
    uint32_t size() const { return static_cast<uint32_t>(owner_.size()); }
    // The slot layer `il` stores into (when it owns it) and attends over;
    // kNone for a layer that does not attend (recurrent, FFN-only).
    uint32_t of(uint32_t il) const { return il < slot_.size() ? slot_[il] : kNone; }
    // The layer that owns slot `s`: the slot's rows have that layer's widths.
    uint32_t layer(uint32_t s) const { return owner_[s]; }

  private:
    std::vector<uint32_t> slot_;   // layer -> slot
    std::vector<uint32_t> owner_;  // slot -> layer
};

}  // namespace ferrox::model
