// The host-side face of the resident-decoding kernels of ABI 1.2
// (resident_kernels.cu): device pointers in, launched on `stream` without
// waiting, a cudaError_t out (the launch's own error; a fault while running
// surfaces at the next synchronisation). Included by the g++-compiled backend
// and by nvcc. The callers have validated every extent.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "attention_split.h"
#include "ferrox/backend_abi.h"
#include "kernels.h"

namespace ferrox::cuda {

// Warps of the block that normalises one row of `dim`: one per 32 elements,
// at most 8 (a head-dim row of 128 gets 4, a model-dim row 8, looping).
constexpr uint32_t rms_norm_warps(uint32_t dim) {
    const uint32_t warps = (dim + 31) / 32;
    return warps < 8 ? warps : 8;
}

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * gamma for `rows` rows of `dim`; y may be x.
cudaError_t launch_rms_norm(const float* x, const float* gamma, uint64_t rows, uint32_t dim,
                            float eps, float* y, cudaStream_t stream);

// dst[r][i] += alpha * src[r * src_stride + i], then y[r] = rms_norm(dst[r]) *
// gamma; y must not overlap dst or src.
cudaError_t launch_add_rms_norm(float* dst, const float* src, uint64_t src_stride, float alpha,
                                const float* gamma, uint64_t rows, uint32_t dim, float eps,
                                float* y, cudaStream_t stream);

// x[n_pos][n_heads][head_dim] rotated in place by cos/sin[n_pos][head_dim / 2].
cudaError_t launch_rope(float* x, const float* cos, const float* sin, uint32_t n_pos,
                        uint32_t n_heads, uint32_t head_dim, bool neox, cudaStream_t stream);

// dst[r][i] += alpha * src[r * src_stride + i].
cudaError_t launch_add(float* dst, const float* src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha, cudaStream_t stream);

// gate[i] = act(gate[i]) * up[i]; cudaErrorNotSupported for an unknown kind.
cudaError_t launch_glu(ferrox_glu_kind kind, float* gate, const float* up, uint64_t count,
                       cudaStream_t stream);

// dst[i] = src[i] as dst_kind; cudaErrorNotSupported when the capability
// table lists no CONVERT kernel for dst_kind.
cudaError_t launch_convert(const float* src, void* dst, ferrox_kind dst_kind, uint64_t count,
                           cudaStream_t stream);

// out[i] = scale * row ids[i] of `weight` (ids already checked < rows, and on
// the device); cudaErrorNotSupported without a GET_ROWS kernel for the kind.
cudaError_t launch_get_rows(const DeviceWeightView& weight, const int32_t* ids, uint64_t n,
                            float scale, float* out, cudaStream_t stream);

// Warps of one attention block: they split the row's positions round-robin
// and merge their online-softmax parts at the end.
inline constexpr int kAttentionWarps = 8;

// Largest head_dim_k / head_dim_v the attention kernel takes.
inline constexpr uint32_t kMaxAttentionHeadDim = 512;

// What the attention kernel needs of a ferrox_attention_desc (1.2) or a
// ferrox_attention_cells_desc (1.3), plus device pointers.
struct AttentionLaunch {
    uint32_t n_query, pos0, window, n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale;
    ferrox_kind kv_kind;
    const float* q;
    const void* keys;
    const void* values;
    float* out;
    // 1.3: row r walks cells cell_index[spans[2r]] .. cell_index[spans[2r + 1] - 1]
    // (pos0 and window unused); a cell >= n_cells or a span past n_index is
    // skipped. nullptr (1.2): row r walks cache rows attention_span(pos0, r, window).
    const uint32_t* cell_index = nullptr;
    const uint32_t* spans = nullptr;
    uint32_t n_cells = 0, n_index = 0;
    float softcap = 0.0f;  // 1.4: see soft_cap (resident_ops.cuh); 0: not capped
    // 1.5: n_head sink logits on the device (softmax_merge_factors); nullptr: none.
    const float* sinks = nullptr;
};

// cudaErrorNotSupported when the table lists no ATTENTION kernel for kv_kind.
// splits == 1: one block per (row, head), single pass. splits > 1 (see
// attention_splits): one block per (row, head, chunk) writing its partial
// softmax to `split_scratch` (attention_split_scratch_floats floats, on the
// device, not read by anything else until this stream passes the merge),
// then a merge kernel per (row, head).
cudaError_t launch_attention(const AttentionLaunch& launch, uint32_t splits, float* split_scratch,
                             cudaStream_t stream);

}  // namespace ferrox::cuda
