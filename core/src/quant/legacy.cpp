// The 32-element formats: one f16 scale d per block (Q*_1 add a min m).
// Every formula is gguf's numpy one, in its float32 order: d * q, or (d * q) + m.
#include <cmath>

#include "block_codec.h"

namespace ferrox::quant::detail {
namespace {

constexpr int kBlock = kLegacyBlock;

// Converts a rounded float code to an integer in [lo, hi]; NaN becomes lo.
// (For the in-range values the quantizers produce this equals numpy's cast.)
int clamp_code(float rounded, int lo, int hi) {
    if (!(rounded >= static_cast<float>(lo))) return lo;
    if (rounded >= static_cast<float>(hi)) return hi;
    return static_cast<int>(rounded);
}

}  // namespace

void dequantize_q4_0(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint8_t* qs = block + 2;
    for (int i = 0; i < kBlock; ++i) out[i] = d * static_cast<float>(nibble(qs, i) - 8);
}

void dequantize_q4_1(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const float m = read_f16(block + 2);
    const uint8_t* qs = block + 4;
    for (int i = 0; i < kBlock; ++i) {
        const float scaled = d * static_cast<float>(nibble(qs, i));
        out[i] = scaled + m;
    }
}

// Q5: bit i of the little-endian u32 qh is the fifth bit of element i.
void dequantize_q5_0(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint32_t qh = read_u32(block + 2);
    const uint8_t* qs = block + 6;
    for (int i = 0; i < kBlock; ++i) {
        const int q = nibble(qs, i) | static_cast<int>(((qh >> i) & 1u) << 4);
        out[i] = d * static_cast<float>(q - 16);
    }
}

void dequantize_q5_1(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const float m = read_f16(block + 2);
    const uint32_t qh = read_u32(block + 4);
    const uint8_t* qs = block + 8;
    for (int i = 0; i < kBlock; ++i) {
        const int q = nibble(qs, i) | static_cast<int>(((qh >> i) & 1u) << 4);
        const float scaled = d * static_cast<float>(q);
        out[i] = scaled + m;
    }
}

void dequantize_q8_0(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    for (int i = 0; i < kBlock; ++i)
        out[i] = static_cast<float>(static_cast<int8_t>(block[2 + i])) * d;
}

// ggml's block_q8_1: f16 d, f16 s (= d * sum(qs), only a dot-product aid), int8 qs[32].
void dequantize_q8_1(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    for (int i = 0; i < kBlock; ++i)
        out[i] = d * static_cast<float>(static_cast<int8_t>(block[4 + i]));
}

// gguf's Q4_0 quantizer: the element of largest magnitude (first one on a
// tie) maps to code 0, i.e. d = max / -8, codes trunc(x / d + 8.5) in 0..15.
void quantize_q4_0(const float* in, uint8_t* block) {
    float max = in[0];
    for (int i = 1; i < kBlock; ++i)
        if (std::fabs(in[i]) > std::fabs(max)) max = in[i];
    const float d = max / -8.0f;
    const float inverse = d == 0.0f ? 0.0f : 1.0f / d;
    uint8_t codes[kBlock];
    for (int i = 0; i < kBlock; ++i) {
        const float shifted = in[i] * inverse + 8.5f;
        codes[i] = static_cast<uint8_t>(clamp_code(std::trunc(shifted), 0, 15));
    }
    write_f16(block, d);
    for (int i = 0; i < 16; ++i)
        block[2 + i] = static_cast<uint8_t>(codes[i] | (codes[16 + i] << 4));
}

// gguf's (and ggml's) Q8_0 quantizer: d = amax / 127, codes round(x / d)
// with halves away from zero.
void quantize_q8_0(const float* in, uint8_t* block) {
    float amax = 0.0f;
    for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(in[i]));
    const float d = amax / 127.0f;
    const float inverse = d == 0.0f ? 0.0f : 1.0f / d;
    write_f16(block, d);
    for (int i = 0; i < kBlock; ++i) {
        const int q = clamp_code(std::round(in[i] * inverse), -128, 127);
        block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
}

}  // namespace ferrox::quant::detail
