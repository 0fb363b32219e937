// K-quants: 256-element super-blocks whose sub-block scales (and mins) are
// themselves quantized against f16 super-scales. Formulas and float32 order
// follow gguf's numpy: sub_scale = d * sc; out = sub_scale * q (- dmin * m).
#include "block_codec.h"

namespace ferrox::quant::detail {
namespace {

// Q2_K/Q3_K/Q6_K pack 2-bit fields: element e lives in byte 32*(e/128) + e%32,
// at bit pair (e%128)/32.
int two_bits(const uint8_t* bytes, int e) {
    const int shift = 2 * ((e % 128) / 32);
    return (bytes[32 * (e / 128) + e % 32] >> shift) & 3;
}

// Q4_K/Q5_K: sub-block j (32 elements) takes the low nibbles of
// qs[32*(j/2) ..] when j is even, the high nibbles when j is odd.
int k_nibble(const uint8_t* qs, int e) {
    const int sub = e / 32;
    const uint8_t byte = qs[32 * (sub / 2) + e % 32];
    return sub % 2 == 0 ? byte & 0x0f : byte >> 4;
}

// Q4_K/Q5_K's 12 scale bytes hold eight 6-bit scales and eight 6-bit mins:
// bytes 0-3 and 4-7 carry the low 6 bits of scales/mins 0-3 and their top two
// bits hold the high bits of scales/mins 4-7, whose low nibbles are in 8-11.
void k_scale_min(const uint8_t* s, int j, int& scale, int& min) {
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

}  // namespace

// Layout: scales[16] (low nibble scale, high nibble min), qs[64], f16 d, f16 dmin.
void dequantize_q2_k(const uint8_t* block, float* out) {
    const uint8_t* scales = block;
    const uint8_t* qs = block + 16;
    const float d = read_f16(block + 80);
    const float dmin = read_f16(block + 82);
    for (int e = 0; e < kSuper; ++e) {
        const uint8_t sc = scales[e / 16];
        const float sub_scale = d * static_cast<float>(sc & 0x0f);
        const float sub_min = dmin * static_cast<float>(sc >> 4);
        const float scaled = sub_scale * static_cast<float>(two_bits(qs, e));
        out[e] = scaled - sub_min;
    }
}

// Layout: hmask[32], qs[64], scales[12] (sixteen 6-bit values), f16 d.
// The high bit *clear* subtracts 4 from the 2-bit value.
void dequantize_q3_k(const uint8_t* block, float* out) {
    const uint8_t* hmask = block;
    const uint8_t* qs = block + 32;
    const uint8_t* scales = block + 96;
    const float d = read_f16(block + 108);
    for (int e = 0; e < kSuper; ++e) {
        const int j = e / 16;
        const int low4 = j < 8 ? scales[j] & 0x0f : scales[j - 8] >> 4;
        const int high2 = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        const int sc = (low4 | (high2 << 4)) - 32;
        const int high_bit = (hmask[e % 32] >> (e / 32)) & 1;
        const int q = two_bits(qs, e) - (high_bit ? 0 : 4);
        const float sub_scale = d * static_cast<float>(sc);
        out[e] = sub_scale * static_cast<float>(q);
    }
}

// Layout: f16 d, f16 dmin, scales[12], qs[128].
void dequantize_q4_k(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const float dmin = read_f16(block + 2);
    const uint8_t* qs = block + 16;
    for (int e = 0; e < kSuper; ++e) {
        int sc = 0, m = 0;
        k_scale_min(block + 4, e / 32, sc, m);
        const float sub_scale = d * static_cast<float>(sc);
        const float sub_min = dmin * static_cast<float>(m);
        const float scaled = sub_scale * static_cast<float>(k_nibble(qs, e));
        out[e] = scaled - sub_min;
    }
}

// Layout: f16 d, f16 dmin, scales[12], qh[32] (bit j = fifth bit of sub-block j), qs[128].
void dequantize_q5_k(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const float dmin = read_f16(block + 2);
    const uint8_t* qh = block + 16;
    const uint8_t* qs = block + 48;
    for (int e = 0; e < kSuper; ++e) {
        int sc = 0, m = 0;
        k_scale_min(block + 4, e / 32, sc, m);
        const int q = k_nibble(qs, e) | (((qh[e % 32] >> (e / 32)) & 1) << 4);
        const float sub_scale = d * static_cast<float>(sc);
        const float sub_min = dmin * static_cast<float>(m);
        const float scaled = sub_scale * static_cast<float>(q);
        out[e] = scaled - sub_min;
    }
}

// Layout: ql[128] (low nibbles), qh[64] (2-bit highs), int8 scales[16], f16 d.
// Element e's low nibble: byte 64*(e/128) + e%64, high half when (e%128) >= 64.
void dequantize_q6_k(const uint8_t* block, float* out) {
    const uint8_t* ql = block;
    const uint8_t* qh = block + 128;
    const uint8_t* scales = block + 192;
    const float d = read_f16(block + 208);
    for (int e = 0; e < kSuper; ++e) {
        const uint8_t low_byte = ql[64 * (e / 128) + e % 64];
        const int low = (e % 128) < 64 ? low_byte & 0x0f : low_byte >> 4;
        const int q = (low | (two_bits(qh, e) << 4)) - 32;
        const float sub_scale = d * static_cast<float>(static_cast<int8_t>(scales[e / 16]));
        out[e] = sub_scale * static_cast<float>(q);
    }
}

// ggml's block_q8_K: float32 d, int8 qs[256], int16 bsums[16] (sums of 16 qs,
// a dot-product aid that dequantization ignores).
void dequantize_q8_k(const uint8_t* block, float* out) {
    const float d = read_f32(block);
    for (int e = 0; e < kSuper; ++e)
        out[e] = d * static_cast<float>(static_cast<int8_t>(block[4 + e]));
}

}  // namespace ferrox::quant::detail
