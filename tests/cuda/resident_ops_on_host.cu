#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "resident_kernels.h"
#include "resident_ops.cuh"
#include "resident_ops_on_host.h"
#include "row_tile.cuh"

namespace ferrox::cuda::test {
namespace {

// __shfl_xor_sync's butterfly over 32 lanes: every lane ends with the same sum.
float butterfly_sum(float (&lanes)[kWarpSize]) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        float next[kWarpSize];
        for (int l = 0; l < kWarpSize; ++l) next[l] = lanes[l] + lanes[l ^ offset];
        for (int l = 0; l < kWarpSize; ++l) lanes[l] = next[l];
    }
    return lanes[0];
}

float load(ferrox_kind kind, const void* base, uint64_t index) {
    if (kind == FERROX_KIND_F16) return f16_bits_to_f32(static_cast<const uint16_t*>(base)[index]);
    return static_cast<const float*>(base)[index];
}

}  // namespace

void rms_norm_on_host(const float* x, const float* gamma, uint64_t rows, uint32_t dim, float eps,
                      float* y) {
    const uint32_t warps = rms_norm_warps(dim);
    const uint32_t threads = warps * kWarpSize;
    for (uint64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        std::vector<float> warp_sums(warps);
        for (uint32_t w = 0; w < warps; ++w) {
            float lanes[kWarpSize];
            for (uint32_t l = 0; l < kWarpSize; ++l) {
                float sum = 0.0f;
                for (uint32_t i = w * kWarpSize + l; i < dim; i += threads) sum += xr[i] * xr[i];
                lanes[l] = sum;
            }
            warp_sums[w] = butterfly_sum(lanes);
        }
        float total = 0.0f;
        for (uint32_t w = 0; w < warps; ++w) total += warp_sums[w];
        const float scale = rms_scale(total, dim, eps);
        for (uint32_t i = 0; i < dim; ++i) yr[i] = rms_apply(xr[i], scale, gamma[i]);
    }
}

void rope_on_host(float* x, const float* cos, const float* sin, uint32_t n_pos, uint32_t n_heads,
                  uint32_t head_dim, bool neox) {
    const uint32_t half = head_dim / 2;
    for (uint32_t p = 0; p < n_pos; ++p)
        for (uint32_t h = 0; h < n_heads; ++h)
            for (uint32_t i = 0; i < half; ++i) {
                float* head = x + (uint64_t{p} * n_heads + h) * head_dim;
                uint32_t a = 0;
                uint32_t b = 0;
                rope_pair(i, head_dim, neox, a, b);
                rope_rotate_pair(head[a], head[b], cos[p * half + i], sin[p * half + i]);
            }
}

float glu_on_host(ferrox_glu_kind kind, float gate, float up) {
    return kind == FERROX_GLU_SWIGLU  ? swiglu(gate, up)
           : kind == FERROX_GLU_GEGLU ? geglu(gate, up)
                                      : swiglu_oai(gate, up);
}

float gelu_tanh_f16_on_host(float x) { return gelu_tanh_f16(x); }

uint16_t f32_to_f16_on_host(float x) { return f32_to_f16_bits(x); }

namespace {

struct AttentionShapeOnHost {
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale;
    ferrox_kind kv_kind;
    const float* q;
    const void* keys;
    const void* values;
    // attention_cells: the list positions index, and its bound; nullptr: identity.
    const uint32_t* cell_index = nullptr;
    uint32_t n_cells = 0;
    float softcap = 0.0f;          // ABI 1.4
    const float* sinks = nullptr;  // ABI 1.5: n_head logits
};

// One attention block over positions [first, last] of (row, head): its warps'
// online softmaxes merged as the kernel merges them. Returns the denominator
// and fills out[head_dim_v] with the unnormalised sum; `block_max` gets the
// max over the warps.
float attention_block(const AttentionShapeOnHost& a, uint32_t row, uint32_t head, uint32_t first,
                      uint32_t last, float& block_max, float* out, float sink) {
    const uint64_t k_row = uint64_t{a.n_head_kv} * a.head_dim_k;
    const uint64_t v_row = uint64_t{a.n_head_kv} * a.head_dim_v;
    const uint32_t kv_head = head / (a.n_head / a.n_head_kv);
    const float* qh = a.q + (uint64_t{row} * a.n_head + head) * a.head_dim_k;
    float part_max[kAttentionWarps];
    float part_sum[kAttentionWarps];
    std::vector<float> part_out(size_t{kAttentionWarps} * kMaxAttentionHeadDim, 0.0f);
    for (int warp = 0; warp < kAttentionWarps; ++warp) {
        SoftmaxState state = softmax_start();
        float* acc = &part_out[size_t(warp) * kMaxAttentionHeadDim];
        for (uint32_t p = first + static_cast<uint32_t>(warp); p <= last; p += kAttentionWarps) {
            const uint64_t cell = a.cell_index != nullptr ? a.cell_index[p] : p;
            if (a.cell_index != nullptr && cell >= a.n_cells) continue;
            const uint64_t k_base = cell * k_row + uint64_t{kv_head} * a.head_dim_k;
            float lanes[kWarpSize];
            for (uint32_t lane = 0; lane < kWarpSize; ++lane) {
                float partial = 0.0f;
                for (uint32_t i = lane; i < a.head_dim_k; i += kWarpSize)
                    partial += qh[i] * load(a.kv_kind, a.keys, k_base + i);
                lanes[lane] = partial;
            }
            const float score = soft_cap(butterfly_sum(lanes) * a.scale, a.softcap);
            float weight = 0.0f;
            const float rescale = softmax_push(state, score, weight);
            const uint64_t v_base = cell * v_row + uint64_t{kv_head} * a.head_dim_v;
            for (uint32_t d = 0; d < a.head_dim_v; ++d)
                acc[d] = acc[d] * rescale + weight * load(a.kv_kind, a.values, v_base + d);
        }
        part_max[warp] = state.max;
        part_sum[warp] = state.sum;
    }
    float factor[kAttentionWarps];
    const float denominator =
        softmax_merge_factors(part_max, part_sum, kAttentionWarps, 1, factor, sink);
    block_max = -INFINITY;
    for (int w = 0; w < kAttentionWarps; ++w) block_max = fmaxf(block_max, part_max[w]);
    for (uint32_t d = 0; d < a.head_dim_v; ++d)
        out[d] =
            softmax_merge_output(&part_out[d], kMaxAttentionHeadDim, factor, kAttentionWarps, 1.0f);
    return denominator;
}

// Both entries' walk: row spans from pos0/window (1.2) or from `spans` (1.3).
void attention_walk(const AttentionShapeOnHost& a, uint32_t n_query, uint32_t pos0, uint32_t window,
                    const uint32_t* spans, uint32_t n_index, float* out, uint32_t splits) {
    const uint32_t n_head = a.n_head, head_dim_v = a.head_dim_v;
    std::vector<float> block_out(head_dim_v);
    // The split scratch, laid out as the kernels lay it out (a block per part).
    const uint64_t parts = uint64_t{n_query} * n_head * splits;
    std::vector<float> scratch(splits > 1 ? parts * (2 + uint64_t{head_dim_v}) : 0);
    for (uint32_t row = 0; row < n_query; ++row) {
        for (uint32_t head = 0; head < n_head; ++head) {
            uint32_t first = 0;
            uint32_t last = 0;
            if (spans != nullptr)
                attention_cells_span(spans, n_index, row, first, last);
            else
                attention_span(pos0, row, window, first, last);
            float* oh = out + (uint64_t{row} * n_head + head) * head_dim_v;
            // The sink joins the single pass's merge, or the split's final merge.
            const float sink = a.sinks != nullptr ? a.sinks[head] : -INFINITY;
            if (splits == 1) {
                float block_max = 0.0f;
                const float denominator =
                    attention_block(a, row, head, first, last, block_max, block_out.data(), sink);
                // The single-pass kernel divides each merged sum in place.
                for (uint32_t d = 0; d < head_dim_v; ++d) oh[d] = block_out[d] / denominator;
                continue;
            }
            const uint64_t first_part = (uint64_t{row} * n_head + head) * splits;
            for (uint32_t chunk = 0; chunk < splits; ++chunk) {
                uint32_t chunk_first = 0;
                uint32_t chunk_last = 0;
                attention_chunk(first, last, splits, chunk, chunk_first, chunk_last);
                const uint64_t part = first_part + chunk;
                scratch[parts + part] = attention_block(a, row, head, chunk_first, chunk_last,
                                                        scratch[part], block_out.data(), -INFINITY);
                std::copy(block_out.begin(), block_out.end(),
                          scratch.begin() + static_cast<ptrdiff_t>(2 * parts + part * head_dim_v));
            }
            float factor[kMaxAttentionSplits];
            const float denominator = softmax_merge_factors(
                &scratch[first_part], &scratch[parts + first_part], splits, 1, factor, sink);
            for (uint32_t d = 0; d < head_dim_v; ++d)
                oh[d] = softmax_merge_output(&scratch[2 * parts + first_part * head_dim_v + d],
                                             head_dim_v, factor, splits, denominator);
        }
    }
}

}  // namespace

void attention_on_host(uint32_t n_query, uint32_t pos0, uint32_t window, uint32_t n_head,
                       uint32_t n_head_kv, uint32_t head_dim_k, uint32_t head_dim_v, float scale,
                       ferrox_kind kv_kind, const float* q, const void* keys, const void* values,
                       float* out, uint32_t splits, float softcap, const float* sinks) {
    AttentionShapeOnHost a{n_head,  n_head_kv, head_dim_k, head_dim_v, scale,
                           kv_kind, q,         keys,       values};
    a.softcap = softcap;
    a.sinks = sinks;
    attention_walk(a, n_query, pos0, window, nullptr, 0, out, splits);
}

void attention_cells_on_host(uint32_t n_query, uint32_t n_head, uint32_t n_head_kv,
                             uint32_t head_dim_k, uint32_t head_dim_v, float scale,
                             ferrox_kind kv_kind, const float* q, const void* keys,
                             const void* values, uint32_t n_cells, const uint32_t* cell_index,
                             uint32_t n_index, const uint32_t* spans, float* out, uint32_t splits) {
    const AttentionShapeOnHost a{n_head, n_head_kv, head_dim_k, head_dim_v, scale,  kv_kind,
                                 q,      keys,      values,     cell_index, n_cells};
    attention_walk(a, n_query, 0, 0, spans, n_index, out, splits);
}

}  // namespace ferrox::cuda::test
