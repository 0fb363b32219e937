// Device-side decoding of GGUF weight rows, 32 weights ("a granule") at a time.
//
// Every kind is decoded in 32-weight granules so that one kernel template
// serves all of them: a legacy (Q4_0 .. Q8_0), IQ4_NL or MXFP4 granule is one block,
// a K-quant or IQ4_XS granule is one 32-weight slice of a 256-weight
// super-block (sharing its super-scales; for Q2_K/Q3_K, whose sub-blocks are
// 16 weights, two sub-blocks), and a float granule is 32 consecutive values
// (the last one may be short).
// The math follows the `gguf` Python package's dequantizers (quants.py),
// including its order of multiplications, so results match the reference.
// Host-and-device code: tests/cuda runs these very decoders on the CPU and
// checks them bit for bit against ferrox_quant, on hosts without a GPU.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"

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

// a * b rounded on its own. nvcc contracts `a * b + c` into one FMA (one
// rounding) by default, also across statements; the host reference rounds the product first, so a
// decoded weight with a min/offset would differ in its last bit on the GPU
// (GET_ROWS is checked bit for bit against ferrox_quant).
__host__ __device__ __forceinline__ float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

// The IQ4 non-linear values {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13,
// 25, 38, 53, 69, 89, 113} as int8 bytes, codes 0-7 and 8-15 packed into two
// words: constexpr scalars are usable in device code where a namespace-scope
// array is not, and a shift keeps the lookup in registers (no local-memory
// table). test_cuda_decode checks every code against the reference.
inline constexpr uint64_t kIq4ValuesLow = 0xf6eaddcfbfad9881ULL;
inline constexpr uint64_t kIq4ValuesHigh = 0x7159453526190d01ULL;

__host__ __device__ __forceinline__ float iq4_value(int code) {
    const uint64_t word = code < 8 ? kIq4ValuesLow : kIq4ValuesHigh;
    return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (code & 7)))));
}

// Q3_K: signed 6-bit scale of 16-weight sub-block j (0..15), packed in 12
// bytes: low nibbles in bytes 0-7 (j and j - 8 share a byte), high bit pairs
// in bytes 8-11.
__host__ __device__ __forceinline__ int q3_k_scale(const uint8_t* scales, int j) {
    const int low4 = j < 8 ? scales[j] & 0x0F : scales[j - 8] >> 4;
    const int high2 = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low4 | (high2 << 4)) - 32;
}

// MXFP4's e2m1 values doubled, {0, 1, 2, 3, 4, 6, 8, 12} and their negatives
// (code 8 is -0, stored as 0 as the reference does), packed like the IQ4
// values; the doubling is undone by halving the E8M0 scale instead, so every
// value is an integer and the products round exactly as the reference's.
inline constexpr uint64_t kMxfp4ValuesLow = 0x0c08060403020100ULL;
inline constexpr uint64_t kMxfp4ValuesHigh = 0xf4f8fafcfdfeff00ULL;

__host__ __device__ __forceinline__ float mxfp4_value(int code) {
    const uint64_t word = code < 8 ? kMxfp4ValuesLow : kMxfp4ValuesHigh;
    return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (code & 7)))));
}

// Half the E8M0 scale 2^(e - 127), built from its bits: e - 1 as a float
// exponent, or for e < 2 (2^-128 and 2^-127 halved) the subnormals 2^-129
// and 2^-128. Built exactly so no exp2f rounding or flush-to-zero can differ
// from the reference.
__host__ __device__ __forceinline__ float e8m0_half(uint8_t e) {
    return float_from_bits(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

// N bytes read from `p` (any alignment) into registers as little-endian
// words. byte(i) must be called with a constant i (after unrolling): a
// run-time index into `words` would put the span in local memory. On the
// device the span is read with aligned 4-byte (16-byte where the address and
// N allow) loads and funnel shifts instead of N byte loads: the byte loads
// were most of a MATVEC's time on an H200.
template <int N>
struct ByteSpan {
    static constexpr int kWords = (N + 3) / 4;
    uint32_t words[kWords];

    __host__ __device__ __forceinline__ uint32_t byte(int i) const {
        return (words[i / 4] >> (8 * (i % 4))) & 0xFFu;
    }
    __host__ __device__ __forceinline__ uint32_t u16(int i) const {
        return byte(i) | (byte(i + 1) << 8);
    }
    __host__ __device__ __forceinline__ float f16(int i) const {
        return __half2float(__ushort_as_half(static_cast<unsigned short>(u16(i))));
    }
    __host__ __device__ __forceinline__ uint32_t u32(int i) const {
        return byte(i) | (byte(i + 1) << 8) | (byte(i + 2) << 16) | (byte(i + 3) << 24);
    }
};

// One 4-byte word at a 4-byte aligned address.
__host__ __device__ __forceinline__ uint32_t load_aligned_word(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t*>(p);
#else
    uint32_t word;
    std::memcpy(&word, p, sizeof(word));
    return word;
#endif
}

// The low 32 bits of (hi:lo) >> shift, shift < 32.
__host__ __device__ __forceinline__ uint32_t funnel_right(uint32_t lo, uint32_t hi,
                                                          unsigned shift) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, shift);
#else
    return shift == 0 ? lo : (lo >> shift) | (hi << (32 - shift));
#endif
}

// The device's general way to read a span: the aligned words that cover
// [p, p + N), joined by funnel shifts. Every word it loads holds at least one
// byte of the span, so it reads nothing outside the 4-byte words the span
// touches. Host-and-device: test_cuda_decode runs it at every alignment,
// spans ending at the end of a buffer included.
template <int N>
__host__ __device__ __forceinline__ ByteSpan<N> load_span_by_words(const uint8_t* p) {
    constexpr int kWords = ByteSpan<N>::kWords;
    const auto address = reinterpret_cast<uintptr_t>(p);
    const int offset = static_cast<int>(address & 3u);
    const uint8_t* aligned = p - offset;
    uint32_t raw[kWords + 1];
    FERROX_UNROLL
    for (int i = 0; i < kWords; ++i) raw[i] = load_aligned_word(aligned + 4 * i);
    raw[kWords] = offset + N > 4 * kWords ? load_aligned_word(aligned + 4 * kWords) : 0u;
    const auto shift = static_cast<unsigned>(8 * offset);
    ByteSpan<N> span;
    FERROX_UNROLL
    for (int i = 0; i < kWords; ++i) span.words[i] = funnel_right(raw[i], raw[i + 1], shift);
    return span;
}

template <int N>
__host__ __device__ __forceinline__ ByteSpan<N> load_span(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    if constexpr (N % 16 == 0) {
        if ((reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
            ByteSpan<N> span;
            const auto* quads = reinterpret_cast<const uint4*>(p);
            FERROX_UNROLL
            for (int i = 0; i < N / 16; ++i) {
                const uint4 quad = quads[i];
                span.words[4 * i] = quad.x;
                span.words[4 * i + 1] = quad.y;
                span.words[4 * i + 2] = quad.z;
                span.words[4 * i + 3] = quad.w;
            }
            return span;
        }
    }
    return load_span_by_words<N>(p);
#else
    ByteSpan<N> span;
    span.words[ByteSpan<N>::kWords - 1] = 0;
    std::memcpy(span.words, p, N);
    return span;
#endif
}

template <ferrox_kind>
inline constexpr bool kUnsupportedKind = false;

// Decodes granule `g` of `row` (a row of `cols` weights) into w[0..31] and
// returns how many of them are real weights (32 except for a float row's tail,
// whose missing weights are set to 0).
template <ferrox_kind Kind>
__host__ __device__ __forceinline__ int decode_granule(const uint8_t* row, uint64_t g,
                                                       uint64_t cols, float (&w)[kGranule]) {
    // The block shape is the kind table's (a super-block of 8 granules for the
    // K-quants and IQ4_XS, one granule for the other quants, one value for the
    // floats); the layouts below are the kind's own.
    [[maybe_unused]] constexpr int kBlockBytes = KindBlock<Kind>::kBytes;
    [[maybe_unused]] constexpr int kGranulesPerBlock = KindBlock<Kind>::kElements / kGranule;
    if constexpr (Kind == FERROX_KIND_F32 || Kind == FERROX_KIND_F16 || Kind == FERROX_KIND_BF16) {
        const uint64_t first = g * kGranule;
        const int valid = cols - first < kGranule ? static_cast<int>(cols - first) : kGranule;
        if (valid == kGranule) {
            const auto span = load_span<kBlockBytes * kGranule>(row + kBlockBytes * first);
            FERROX_UNROLL
            for (int l = 0; l < kGranule; ++l) {
                if constexpr (Kind == FERROX_KIND_F32)
                    w[l] = float_from_bits(span.words[l]);
                else if constexpr (Kind == FERROX_KIND_F16)
                    w[l] = span.f16(2 * l);
                else
                    w[l] = float_from_bits(span.u16(2 * l) << 16);
            }
            return kGranule;
        }
        // The short tail of a row: element by element, nothing past its end.
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
        const auto block = load_span<kBlockBytes>(row + g * kBlockBytes);
        const float d = block.f16(0);
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l)
            w[l] = d * static_cast<float>(static_cast<int8_t>(block.byte(2 + l)));
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q4_0) {
        // 18 bytes: f16 d, 16 bytes of nibbles (low = weight l, high = l + 16);
        // w = d * (nibble - 8).
        const auto block = load_span<kBlockBytes>(row + g * kBlockBytes);
        const float d = block.f16(0);
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            const int q = static_cast<int>(block.byte(2 + l));
            w[l] = d * static_cast<float>((q & 0x0F) - 8);
            w[l + 16] = d * static_cast<float>((q >> 4) - 8);
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q4_1) {
        // 20 bytes: f16 d, f16 m, 16 bytes of nibbles as Q4_0; w = (d * q) + m.
        const auto block = load_span<kBlockBytes>(row + g * kBlockBytes);
        const float d = block.f16(0);
        const float m = block.f16(2);
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            const uint32_t q = block.byte(4 + l);
            w[l] = mul_rn(d, static_cast<float>(q & 0x0F)) + m;
            w[l + 16] = mul_rn(d, static_cast<float>(q >> 4)) + m;
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q5_0 || Kind == FERROX_KIND_Q5_1) {
        // Q5_0, 22 bytes: f16 d, u32 qh, 16 bytes of nibbles; w = d * (q - 16).
        // Q5_1, 24 bytes: f16 d, f16 m, u32 qh, nibbles; w = (d * q) + m.
        // Bit l of qh is the fifth bit of weight l.
        constexpr bool kHasMin = Kind == FERROX_KIND_Q5_1;
        constexpr int kQs = kHasMin ? 8 : 6;
        const auto block = load_span<kBlockBytes>(row + g * kBlockBytes);
        const float d = block.f16(0);
        [[maybe_unused]] const float m = kHasMin ? block.f16(2) : 0.0f;
        const uint32_t qh = block.u32(kHasMin ? 4 : 2);
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            const int q = static_cast<int>(block.byte(kQs + l));
            const int lo = (q & 0x0F) | static_cast<int>(((qh >> l) & 1u) << 4);
            const int hi = (q >> 4) | static_cast<int>(((qh >> (l + 16)) & 1u) << 4);
            if constexpr (kHasMin) {
                w[l] = mul_rn(d, static_cast<float>(lo)) + m;
                w[l + 16] = mul_rn(d, static_cast<float>(hi)) + m;
            } else {
                w[l] = d * static_cast<float>(lo - 16);
                w[l + 16] = d * static_cast<float>(hi - 16);
            }
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_IQ4_NL) {
        // 18 bytes: f16 d, 16 bytes of nibbles (as Q4_0) indexing the IQ4
        // values; w = d * value.
        const auto block = load_span<kBlockBytes>(row + g * kBlockBytes);
        const float d = block.f16(0);
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            const int q = static_cast<int>(block.byte(2 + l));
            w[l] = d * iq4_value(q & 0x0F);
            w[l + 16] = d * iq4_value(q >> 4);
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_MXFP4) {
        // 17 bytes: E8M0 exponent e, 16 bytes of e2m1 codes (nibbles as
        // Q4_0); w = (2^(e - 127) / 2) * (2 * e2m1 value).
        const auto block = load_span<kBlockBytes>(row + g * kBlockBytes);
        const float d = e8m0_half(static_cast<uint8_t>(block.byte(0)));
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            const int q = static_cast<int>(block.byte(1 + l));
            w[l] = d * mxfp4_value(q & 0x0F);
            w[l + 16] = d * mxfp4_value(q >> 4);
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_IQ4_XS) {
        // 136 bytes: f16 d, u16 scales_h (2 high bits per sub-block), 4 bytes
        // scales_l (a low nibble per sub-block), then 16 bytes of nibbles per
        // 32-weight sub-block (as IQ4_NL). The 6-bit scale is stored + 32;
        // w = (d * (scale - 32)) * value.
        const uint8_t* block = row + (g / kGranulesPerBlock) * kBlockBytes;
        const int s = static_cast<int>(g % 8);
        const float d = load_f16(block);
        const int scales_h = block[2] | (block[3] << 8);
        const int low = (block[4 + s / 2] >> (4 * (s % 2))) & 0x0F;
        const int high = (scales_h >> (2 * s)) & 3;
        const float d_scale = d * static_cast<float>((low | (high << 4)) - 32);
        const auto qs = load_span<16>(block + 8 + 16 * s);
        FERROX_UNROLL
        for (int l = 0; l < 16; ++l) {
            const int q = static_cast<int>(qs.byte(l));
            w[l] = d_scale * iq4_value(q & 0x0F);
            w[l + 16] = d_scale * iq4_value(q >> 4);
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q2_K || Kind == FERROX_KIND_Q3_K) {
        // Both hold 2-bit codes in qs[64]: weight e = 32s + l of granule s
        // (0..7) is bits 2(s%4).. of qs[32(s/4) + l]. Their 16-weight
        // sub-blocks 2s (l < 16) and 2s + 1 (l >= 16) have their own scales.
        // Q2_K, 84 bytes: scales[16] (low nibble scale, high nibble min),
        // qs[64], f16 d, f16 dmin; w = ((d * scale) * q) - (dmin * min).
        // Q3_K, 110 bytes: hmask[32], qs[64], scales[12] (signed 6-bit),
        // f16 d; bit s of hmask[l] *clear* subtracts 4 from the code;
        // w = (d * scale) * q.
        constexpr bool kThreeBit = Kind == FERROX_KIND_Q3_K;
        const uint8_t* block = row + (g / kGranulesPerBlock) * kBlockBytes;
        const int s = static_cast<int>(g % 8);
        const auto qs = load_span<32>(block + (kThreeBit ? 32 : 16) + 32 * (s / 4));
        const int shift = 2 * (s % 4);
        float d_lo = 0.0f;
        float d_hi = 0.0f;
        float m_lo = 0.0f;
        float m_hi = 0.0f;
        if constexpr (kThreeBit) {
            const float d = load_f16(block + 108);
            d_lo = d * static_cast<float>(q3_k_scale(block + 96, 2 * s));
            d_hi = d * static_cast<float>(q3_k_scale(block + 96, 2 * s + 1));
        } else {
            const float d = load_f16(block + 80);
            const float dmin = load_f16(block + 82);
            const uint8_t sc_lo = block[2 * s];
            const uint8_t sc_hi = block[2 * s + 1];
            d_lo = d * static_cast<float>(sc_lo & 0x0F);
            d_hi = d * static_cast<float>(sc_hi & 0x0F);
            // mul_rn: a plain product here could fuse into the subtraction below.
            m_lo = mul_rn(dmin, static_cast<float>(sc_lo >> 4));
            m_hi = mul_rn(dmin, static_cast<float>(sc_hi >> 4));
        }
        [[maybe_unused]] ByteSpan<32> hmask{};
        if constexpr (kThreeBit) hmask = load_span<32>(block);
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l) {
            int q = static_cast<int>((qs.byte(l) >> shift) & 3);
            if constexpr (kThreeBit) {
                q -= ((hmask.byte(l) >> s) & 1) ? 0 : 4;
                w[l] = (l < 16 ? d_lo : d_hi) * static_cast<float>(q);
            } else {
                w[l] = mul_rn(l < 16 ? d_lo : d_hi, static_cast<float>(q)) - (l < 16 ? m_lo : m_hi);
            }
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q4_K || Kind == FERROX_KIND_Q5_K) {
        // Q4_K, 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins,
        // 128 bytes of nibbles. Q5_K, 176 bytes: the same plus 32 bytes `qh`
        // (before the nibbles) giving each weight a fifth bit.
        // Sub-block s (0..7) takes the low (even s) or high (odd s) nibbles of
        // qs[32*(s/2) ..]; w = (d * scale) * q - (dmin * min).
        constexpr bool kFiveBit = Kind == FERROX_KIND_Q5_K;
        const uint8_t* block = row + (g / kGranulesPerBlock) * kBlockBytes;
        const int s = static_cast<int>(g % 8);
        // The first 16 bytes (d, dmin, 12 bytes of scales/mins) in one span;
        // sub-block s's 6-bit scale and min sit at byte s & 3 of its words.
        const auto head = load_span<16>(block);
        const float d = head.f16(0);
        const float dmin = head.f16(2);
        const unsigned at = 8u * static_cast<unsigned>(s & 3);
        const uint32_t w1 = head.words[1] >> at;
        const uint32_t w2 = head.words[2] >> at;
        const uint32_t w3 = head.words[3] >> at;
        const float scale =
            static_cast<float>(s < 4 ? (w1 & 63u) : ((w3 & 0x0Fu) | (((w1 >> 6) & 3u) << 4)));
        const float min = static_cast<float>(
            s < 4 ? (w2 & 63u) : (((w3 >> 4) & 0x0Fu) | (((w2 >> 6) & 3u) << 4)));
        const float d_scale = d * scale;
        const float d_min = mul_rn(dmin, min);  // not fused into the subtraction below
        const auto qs = load_span<32>(block + (kFiveBit ? 48 : 16) + 32 * (s / 2));
        [[maybe_unused]] ByteSpan<32> qh{};
        if constexpr (kFiveBit) qh = load_span<32>(block + 16);
        const int shift = (s & 1) * 4;
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l) {
            int q = static_cast<int>((qs.byte(l) >> shift) & 0x0F);
            if constexpr (kFiveBit) q |= static_cast<int>((qh.byte(l) >> s) & 1) << 4;
            w[l] = mul_rn(d_scale, static_cast<float>(q)) - d_min;
        }
        return kGranule;
    } else if constexpr (Kind == FERROX_KIND_Q6_K) {
        // 210 bytes: ql[128] low nibbles, qh[64] 2-bit highs, int8 scales[16]
        // (signed: reading them unsigned was a real bug in the seed), f16 d.
        // Weight e = 128h + 32k + l: nibble of ql[64h + 32(k&1) + l] (high for
        // k >= 2), high bits (qh[32h + l] >> 2k) & 3, scale scales[e / 16];
        // w = (d * scale) * (q - 32).
        const uint8_t* block = row + (g / kGranulesPerBlock) * kBlockBytes;
        const int s = static_cast<int>(g % 8);
        const int h = s / 4;
        const int k = s % 4;
        const auto ql = load_span<32>(block + 64 * h + 32 * (k & 1));
        const auto qh = load_span<32>(block + 128 + 32 * h);
        const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
        const float d = load_f16(block + 208);
        const float d_lo = d * static_cast<float>(scales[8 * h + 2 * k]);
        const float d_hi = d * static_cast<float>(scales[8 * h + 2 * k + 1]);
        const int nibble_shift = k >= 2 ? 4 : 0;
        FERROX_UNROLL
        for (int l = 0; l < kGranule; ++l) {
            const int q = static_cast<int>(((ql.byte(l) >> nibble_shift) & 0x0F) |
                                           (((qh.byte(l) >> (2 * k)) & 3) << 4)) -
                          32;
            w[l] = (l < 16 ? d_lo : d_hi) * static_cast<float>(q);
        }
        return kGranule;
    } else {
        static_assert(kUnsupportedKind<Kind>, "no device decoder for this kind");
        return 0;
    }
}

}  // namespace ferrox::cuda
