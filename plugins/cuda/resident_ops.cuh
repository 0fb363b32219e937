// The per-element and per-row math of the resident-decoding kernels (ABI
// 1.2), as host-and-device code like block_decode.cuh: resident_kernels.cu
// wraps it in launches, and tests/cuda runs the very same functions on the
// CPU against the core's host ops (ferrox::model::ops) on hosts without a GPU.
// Only the parallel reductions (warp/block sums, the split of positions over
// warps) and the device's own libm stay GPU-only.
#pragma once

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ferrox::cuda {

// ---- f16 rounding ---------------------------------------------------------

// f32 -> f16 bits, round to nearest even, overflow to Inf, as
// ferrox::quant::fp32_to_fp16 rounds; a NaN stays a (quiet) NaN, its payload
// not kept bit for bit. The device converts in hardware (cvt.rn.f16.f32);
// the host spells it out so a test can hold it to the reference.
__host__ __device__ inline uint16_t f32_to_f16_bits(float value) {
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(value));
#else
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) {  // Inf or NaN
        if (magnitude == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
        return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    }
    if (magnitude >= 0x477ff000u)
        return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
    if (magnitude >= 0x38800000u) {  // f16 normal range: drop 13 bits, nearest even
        const uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((rounded >> 13) - (112u << 10)));
    }
    if (magnitude < 0x33000000u) return sign;  // below half the smallest subnormal: 0
    // f16 subnormal: the mantissa with its hidden bit, shifted to units of 2^-24.
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14..24 for exponents 102..112
    const uint32_t kept = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    const uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | rounded);
#endif
}

__host__ __device__ inline float f16_bits_to_f32(uint16_t bits) {
    return __half2float(__ushort_as_half(bits));
}

__host__ __device__ inline float round_to_f16(float value) {
    return f16_bits_to_f32(f32_to_f16_bits(value));
}

// ---- RMSNorm --------------------------------------------------------------

// The factor 1 / sqrt(mean(x^2) + eps) of a row whose squares sum to `sum_sq`.
__host__ __device__ inline float rms_scale(float sum_sq, uint32_t dim, float eps) {
    return 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
}

// One output element, multiplied in the core's order: x * scale * gamma.
__host__ __device__ inline float rms_apply(float x, float scale, float gamma) {
    return x * scale * gamma;
}

// ---- RoPE -----------------------------------------------------------------

// The two elements of a head that pair `i` (< head_dim / 2) rotates: adjacent
// (2i, 2i + 1) in the normal style, (i, i + head_dim / 2) in the neox one.
__host__ __device__ inline void rope_pair(uint32_t i, uint32_t head_dim, bool neox, uint32_t& a,
                                          uint32_t& b) {
    a = neox ? i : 2 * i;
    b = neox ? i + head_dim / 2 : 2 * i + 1;
}

// (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos).
__host__ __device__ inline void rope_rotate_pair(float& x0, float& x1, float cos, float sin) {
    const float a = x0;
    const float b = x1;
    x0 = a * cos - b * sin;
    x1 = a * sin + b * cos;
}

// ---- GLU activations ------------------------------------------------------

__host__ __device__ inline float silu(float x) { return x / (1.0f + expf(-x)); }

// llama.cpp's CPU GeGLU: 0 at or below -10, x at or above 10, else the tanh
// GELU of x rounded to f16, rounded to f16 again. The CPU backend reads a
// 65536-entry table of that; computing the entry directly (same float
// expression as the table's) gives the same bits on the host and, up to the
// device tanhf's last-ulp differences surviving the f16 rounding, on the GPU.
__host__ __device__ inline float gelu_tanh_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    const float h = round_to_f16(x);
    const float g = 0.5f * h * (1.0f + tanhf(kSqrt2OverPi * h * (1.0f + 0.044715f * h * h)));
    return round_to_f16(g);
}

__host__ __device__ inline float swiglu(float gate, float up) { return silu(gate) * up; }
// gpt-oss (ABI 1.5): the gate clamped above at 7, up to [-7, 7], in the
// core's (and llama.cpp's) order of operations.
__host__ __device__ inline float swiglu_oai(float gate, float up) {
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    const float g = fminf(gate, kLimit);
    const float u = fminf(fmaxf(up, -kLimit), kLimit);
    return g / (1.0f + expf(kAlpha * -g)) * (u + 1.0f);
}
__host__ __device__ inline float geglu(float gate, float up) { return gelu_tanh_f16(gate) * up; }

// ---- attention: the online softmax ------------------------------------------

// A scaled score soft-capped (ABI 1.4, gemma2) in the core's order: x (1 /
// cap), tanh, x cap; cap 0 leaves it as it is.
__host__ __device__ inline float soft_cap(float score, float cap) {
    return cap != 0.0f ? tanhf(score * (1.0f / cap)) * cap : score;
}

// A running softmax over scores seen so far: their max and the sum of
// exp(score - max). The weighted sum of values that goes with it is kept by
// the caller and rescaled whenever the max grows.
struct SoftmaxState {
    float max;
    float sum;
};

__host__ __device__ inline SoftmaxState softmax_start() { return {-INFINITY, 0.0f}; }

// Folds `score` in. Returns the factor the accumulated output must be
// multiplied by before `weight` times the new value is added to it.
__host__ __device__ inline float softmax_push(SoftmaxState& state, float score, float& weight) {
    const float max = fmaxf(state.max, score);
    const float rescale = expf(state.max - max);  // exp(-inf) = 0 on the first score
    weight = expf(score - max);
    state.sum = state.sum * rescale + weight;
    state.max = max;
    return rescale;
}

// Merging partial states (disjoint position sets): each part's output and sum
// are multiplied by its factor against the overall max. A part that saw no
// position (max -inf, sum 0) contributes nothing.
__host__ __device__ inline float softmax_part_factor(float part_max, float total_max) {
    return part_max == -INFINITY ? 0.0f : expf(part_max - total_max);
}

// Merges `parts` partial states (stored at part_max[i * stride], part_sum[i *
// stride]): fills factor[i] with each part's weight against the overall max
// and returns the softmax denominator. The same order for the warps of one
// block and for the chunks of a split. `sink` (ABI 1.5, gpt-oss; -inf: none)
// is one more logit with no value: it joins the max and the denominator only,
// so it is passed to the final merge alone, never to a split's chunks.
__host__ __device__ inline float softmax_merge_factors(const float* part_max, const float* part_sum,
                                                       uint32_t parts, uint32_t stride,
                                                       float* factor, float sink = -INFINITY) {
    float total_max = sink;
    for (uint32_t i = 0; i < parts; ++i) total_max = fmaxf(total_max, part_max[i * stride]);
    float denominator = softmax_part_factor(sink, total_max);
    for (uint32_t i = 0; i < parts; ++i) {
        factor[i] = softmax_part_factor(part_max[i * stride], total_max);
        denominator += part_sum[i * stride] * factor[i];
    }
    return denominator;
}

// One merged output element: the parts' unnormalised outputs (part_out[i *
// stride]) weighted by their factors, over the denominator.
__host__ __device__ inline float softmax_merge_output(const float* part_out, uint64_t stride,
                                                      const float* factor, uint32_t parts,
                                                      float denominator) {
    float sum = 0.0f;
    for (uint32_t i = 0; i < parts; ++i) sum += part_out[i * stride] * factor[i];
    return sum / denominator;
}

// Cache positions query row `row` (at pos0 + row) sees: [first, last].
__host__ __device__ inline void attention_span(uint32_t pos0, uint32_t row, uint32_t window,
                                               uint32_t& first, uint32_t& last) {
    last = pos0 + row;
    first = window > 0 && last + 1 > window ? last + 1 - window : 0;
}

// attention_cells' row `row`: its span [first, last] of the cell list, the
// end clamped to the list's n_index entries; an empty or inverted span
// comes out as first > last (nothing walked).
__host__ __device__ inline void attention_cells_span(const uint32_t* spans, uint32_t n_index,
                                                     uint32_t row, uint32_t& first,
                                                     uint32_t& last) {
    const uint32_t begin = spans[2 * static_cast<uint64_t>(row)];
    uint32_t end = spans[2 * static_cast<uint64_t>(row) + 1];
    if (end > n_index) end = n_index;
    if (begin >= end) {
        first = 1;
        last = 0;
        return;
    }
    first = begin;
    last = end - 1;
}

// Chunk `split` of `splits` (contiguous, equal but the last) of [first,
// last]: [chunk_first, chunk_last]. A row shorter than the longest one
// can leave late chunks empty: then false, with chunk_first > chunk_last.
__host__ __device__ inline bool attention_chunk(uint32_t first, uint32_t last, uint32_t splits,
                                                uint32_t split, uint32_t& chunk_first,
                                                uint32_t& chunk_last) {
    const uint64_t length = uint64_t{last} - first + 1;
    const uint64_t chunk = (length + splits - 1) / splits;
    const uint64_t begin = first + split * chunk;
    if (begin > last) {
        chunk_first = 1;
        chunk_last = 0;
        return false;
    }
    const uint64_t end = begin + chunk - 1;
    chunk_first = static_cast<uint32_t>(begin);
    chunk_last = end < last ? static_cast<uint32_t>(end) : last;
    return true;
}

}  // namespace ferrox::cuda
