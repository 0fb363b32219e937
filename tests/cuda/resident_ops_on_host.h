// Test hooks: the resident-decoding kernels' own math (plugins/cuda/
// resident_ops.cuh, host-and-device) compiled for the CPU, each walked in the
// kernel's own order (its thread partition, warp butterflies and the split of
// attention positions over warps), so it can be checked against the core's
// host ops on hosts without a GPU. Only the launch and the device's libm and
// FMA contraction are left to the GPU tests.
#pragma once

#include <cstdint>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda::test {

// rms_norm_kernel on `rows` rows of `dim`: the per-thread squares, the warp
// butterflies and the in-order sum of the warps, then x * scale * gamma.
void rms_norm_on_host(const float* x, const float* gamma, uint64_t rows, uint32_t dim, float eps,
                      float* y);

// rope_kernel on x[n_pos][n_heads][head_dim], in place.
void rope_on_host(float* x, const float* cos, const float* sin, uint32_t n_pos, uint32_t n_heads,
                  uint32_t head_dim, bool neox);

// glu_kernel's element: gate = act(gate) * up.
float glu_on_host(ferrox_glu_kind kind, float gate, float up);

// The kernel's GeGLU activation alone, and its f32 -> f16 rounding (bits).
float gelu_tanh_f16_on_host(float x);
uint16_t f32_to_f16_on_host(float x);

// attention_kernel for every (query row, head): kv_kind F32 (keys/values are
// floats) or F16 (uint16 bits). Same shape rules as ferrox_attention_desc.
// splits == 1: the single-pass kernel; splits > 1 (<= kMaxAttentionSplits):
// the split kernel per (row, head, chunk) into a scratch, then the merge
// kernel, each in its own order. `softcap`: the scores capped (ABI 1.4);
// `sinks`: n_head sink logits (ABI 1.5), or nullptr.
void attention_on_host(uint32_t n_query, uint32_t pos0, uint32_t window, uint32_t n_head,
                       uint32_t n_head_kv, uint32_t head_dim_k, uint32_t head_dim_v, float scale,
                       ferrox_kind kv_kind, const float* q, const void* keys, const void* values,
                       float* out, uint32_t splits = 1, float softcap = 0.0f,
                       const float* sinks = nullptr);

// The same kernels as attention_cells (ABI 1.3) runs them: row r walks cells
// cell_index[spans[2r]] .. cell_index[spans[2r + 1] - 1] of a cache of
// n_cells rows, splits as above.
void attention_cells_on_host(uint32_t n_query, uint32_t n_head, uint32_t n_head_kv,
                             uint32_t head_dim_k, uint32_t head_dim_v, float scale,
                             ferrox_kind kv_kind, const float* q, const void* keys,
                             const void* values, uint32_t n_cells, const uint32_t* cell_index,
                             uint32_t n_index, const uint32_t* spans, float* out,
                             uint32_t splits = 1);

}  // namespace ferrox::cuda::test
