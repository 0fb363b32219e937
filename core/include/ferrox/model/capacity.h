// The capacity plan: does the model fit before anything is loaded? Weights
// (the mapped file), the KV cache and the scratch arena against the memory
// the host has available. A refusal states the arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/kv_kinds.h"

namespace ferrox::model {

struct CapacityInputs {
    uint64_t weight_bytes = 0;  // the mapped GGUF file
    // n_layer: the layers whose K and V the cache holds (Hparams::kv_cache_layers:
    // not the recurrent ones, nor gemma4's shared ones).
    uint32_t n_layer = 0, context = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
    // K and V elements of one position over the cached layers, apart
    // (Hparams::kv_cell_elements_k / _v, for layers of different geometry);
    // 0: n_layer x n_head_kv x head_dim_k (or head_dim_v).
    uint64_t cell_elements_k = 0, cell_elements_v = 0;
    // Each cache's kind's block, keys' and values' (they may differ): bytes
    // per elements (f32 4/1, f16 2/1, q8_0 34/32, q4_0 18/32); head dims are
    // whole blocks. Bytes 0: no such cache in this memory.
    uint32_t k_block_bytes = 4, k_block_elements = 1;
    uint32_t v_block_bytes = 4, v_block_elements = 1;
    uint64_t scratch_bytes = 0;
    // Recurrent layers' per-sequence states (qwen35: convolution windows and
    // delta-rule states, two copies each), held beside the KV cells.
    uint64_t state_bytes = 0;
    uint64_t available_bytes = 0;  // MemAvailable
    // What available_bytes is, for the refusal: "MemAvailable", or a device's free memory.
    std::string available_what = "MemAvailable";
    // What is planned, for the refusal: "model", or a context made after the
    // model (whose weights are already in place: weight_bytes 0).
    std::string subject = "model";
};

struct CapacityPlan {
    uint64_t weight_bytes = 0, kv_bytes = 0, scratch_bytes = 0, state_bytes = 0, total_bytes = 0;
    uint64_t available_bytes = 0;
    FERROX_API std::string summary() const;  // "weights W + KV K + scratch S = T of A available"
};

// K then V, each context x its cell elements (n_layer x n_head_kv x
// head_dim_k or _v unless cell_elements_k / _v say) x its block bytes /
// block elements.
FERROX_API uint64_t kv_cache_bytes(const CapacityInputs& in);

// The KV terms of a model's cache of `cells` cells in `kinds`: the layers that
// own K and V (Hparams::owns_kv) and their widths, each kind's block. The one
// place the plan, Model::kv_cache_bytes and `ferrox inspect` take them from.
FERROX_API CapacityInputs kv_capacity_inputs(const Hparams& hp, KvKinds kinds, uint32_t cells);

// The plan, or an Error spelling out the sum that does not fit.
FERROX_API Expected<CapacityPlan> plan_capacity(const CapacityInputs& in);

// MemAvailable from /proc/meminfo, in bytes; nullopt when it cannot be read.
FERROX_API std::optional<uint64_t> mem_available_bytes();

}  // namespace ferrox::model
