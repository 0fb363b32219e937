// Device-side decoding of GGUF weight rows, 32 weights ("a granule") at a time.
//
// Every kind is decoded in 32-weight granules so that one kernel template
// serves all of them: a Q8_0/Q4_0 granule is one block, a K-quant granule is
// one 32-weight sub-block of a 256-weight super-block (sharing its scales),
// and a float granule is 32 consecutive values (the last one may be short).
// The math follows the `gguf` Python package's dequantizers (quants.py),
// including its order of multiplications, so results match the reference.
// Host-and-device code: tests/cuda runs these very decoders on the CPU and
// checks them bit for bit against ferrox_quant, on hosts without a GPU.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "ferrox/backend_abi.h"

// `#pragma unroll` for the device pass only; the host compiler would warn.
#ifdef __CUDA_ARCH__
#define FERROX_UNROLL _Pragma("unroll")
#else
#define FERROX_UNROLL
#endif

namespace ferrox::cuda {

inline constexpr int kGranule = 32;

__host__ __device__ __forceinline__ float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(bits);
#else
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
#endif
}

__host__ __device__ __forceinline__ float load_f16(const uint8_t* p) {
    // Byte loads: quant blocks sit at 2-byte (Q8_0: 34 B) or odd offsets.
    const auto bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(bits));
}

// Q4_K/Q5_K: 6-bit scale and min of sub-block j, packed in 12 bytes.
__host__ __device__ __forceinline__ void k_scale_min(const uint8_t* scales, int j, float& scale,
                                                     float& min) {
    if (j < 4) {
        scale = static_cast<float>(scales[j] & 63);
        min = static_cast<float>(scales[j + 4] & 63);
    } else {
        scale = static_cast<float>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
        min = static_cast<float>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

template <ferrox_kind>
inline constexpr bool kUnsupportedKind = false;

// Decodes granule `g` of `row` (a row of `cols` weights) into w[0..31] and
// returns how many of them are real weights (32 except for a float row's tail,
// whose missing weights are set to 0).
template <ferrox_kind Kind>
__host__ __device__ __forceinline__ int decode_granule(const uint8_t* row, uint64_t g,
                                                       uint64_t cols, float (&w)[kGranule]) {
    if constexpr (Kind == FERROX_KIND_F32 || Kind == FERROX_KIND_F16 || Kind == FERROX_KIND_BF16) {
        const uint64_t first = g * kGranule;
        const int valid = cols - first < kGranule ? static_cast<int>(cols - first) : kGranule;
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l) {
            float value = 0.0f;
            if (l < valid) {
                if constexpr (Kind == FERROX_KIND_F32) {
                    value = reinterpret_cast<const float*>(row)[first + l];
                } else if constexpr (Kind == FERROX_KIND_F16) {
                    value = __half2float(reinterpret_cast<const __half*>(row)[first + l]);
                } else {
                    const unsigned bits = reinterpret_cast<const unsigned short*>(row)[first + l];
                    value = float_from_bits(bits << 16);
                }
            }
            w[l] = value;
        }
        return valid;
    } else if constexpr (Kind == FERROX_KIND_Q8_0) {
        // 34 bytes: f16 d, int8 q[32]; w = d * q.
        const uint8_t* block = row + g * 34;
        const float d = load_f16(block);
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l)
            w[l] = d * static_cast<float>(static_cast<int8_t>(block[2 + l]));
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q4_0) {
        // 18 bytes: f16 d, 16 bytes of nibbles (low = weight l, high = l + 16);
        // w = d * (nibble - 8).
        const uint8_t* block = row + g * 18;
        const float d = load_f16(block);
        const uint8_t* qs = block + 2;
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            w[l] = d * static_cast<float>((qs[l] & 0x0F) - 8);
            w[l + 16] = d * static_cast<float>((qs[l] >> 4) - 8);
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q4_K || Kind == FERROX_KIND_Q5_K) {
        // Q4_K, 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins,
        // 128 bytes of nibbles. Q5_K, 176 bytes: the same plus 32 bytes `qh`
        // (before the nibbles) giving each weight a fifth bit.
        // Sub-block s (0..7) takes the low (even s) or high (odd s) nibbles of
        // qs[32*(s/2) ..]; w = (d * scale) * q - (dmin * min).
        constexpr bool kFiveBit = Kind == FERROX_KIND_Q5_K;
        constexpr uint64_t kBlockBytes = kFiveBit ? 176 : 144;
        const uint8_t* block = row + (g / 8) * kBlockBytes;
        const int s = static_cast<int>(g % 8);
        const float d = load_f16(block);
        const float dmin = load_f16(block + 2);
        float scale = 0.0f;
        float min = 0.0f;
        k_scale_min(block + 4, s, scale, min);
        const float d_scale = d * scale;
        const float d_min = dmin * min;
        const uint8_t* qh = block + 16;
        const uint8_t* qs = block + (kFiveBit ? 48 : 16) + 32 * (s / 2);
        const int shift = (s & 1) * 4;
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l) {
            int q = (qs[l] >> shift) & 0x0F;
            if constexpr (kFiveBit) q |= ((qh[l] >> s) & 1) << 4;
            w[l] = d_scale * static_cast<float>(q) - d_min;
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q6_K) {
        // 210 bytes: ql[128] low nibbles, qh[64] 2-bit highs, int8 scales[16]
        // (signed: reading them unsigned was a real bug in the seed), f16 d.
        // Weight e = 128h + 32k + l: nibble of ql[64h + 32(k&1) + l] (high for
        // k >= 2), high bits (qh[32h + l] >> 2k) & 3, scale scales[e / 16];
        // w = (d * scale) * (q - 32).
        const uint8_t* block = row + (g / 8) * 210;
        const int s = static_cast<int>(g % 8);
        const int h = s / 4;
        const int k = s % 4;
        const uint8_t* ql = block + 64 * h + 32 * (k & 1);
        const uint8_t* qh = block + 128 + 32 * h;
        const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
        const float d = load_f16(block + 208);
        const float d_lo = d * static_cast<float>(scales[8 * h + 2 * k]);
        const float d_hi = d * static_cast<float>(scales[8 * h + 2 * k + 1]);
        const int nibble_shift = k >= 2 ? 4 : 0;
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l) {
            const int q = (((ql[l] >> nibble_shift) & 0x0F) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
            w[l] = (l < 16 ? d_lo : d_hi) * static_cast<float>(q);
        }
        return kGranule;
    } else {
        static_assert(kUnsupportedKind<Kind>, "no device decoder for this kind");
        return 0;
    }
}

}  // namespace ferrox::cuda
