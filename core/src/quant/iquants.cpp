// I-quants (codebook grids and non-linear 4-bit values), MXFP4 and NVFP4.
// Grid formats: out = (sub_scale * grid_value) * sign, or for IQ1_*
// out = sub_scale * (grid_value + delta) -- gguf's numpy order, in float32.
#include <bit>
#include <cmath>

#include "block_codec.h"
#include "iq_grids.h"

namespace ferrox::quant::detail {
namespace {

using grids::grid_byte;

// 7 stored sign bits expand to 8: the eighth makes the count of minus signs
// even (the format only encodes sign patterns of even parity).
uint8_t expand_signs(uint32_t seven_bits) {
    const auto parity = static_cast<uint32_t>(std::popcount(seven_bits) & 1);
    return static_cast<uint8_t>(seven_bits | (parity << 7));
}

float sign_of_bit(uint8_t signs, int bit) { return (signs >> bit) & 1 ? -1.0f : 1.0f; }

// The IQ4 non-linear 4-bit values.
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4: e2m1 values, doubled (the scale is halved to match).
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

constexpr float kIq1Delta = 0.125f;

// Half an E8M0 scale (2^(e-127) / 2) as float32 bits; e < 2 lands in subnormals.
float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    return std::bit_cast<float>(bits);
}

// Half an unsigned E4M3 scale (bias 7, no sign bit: bit 7 is ignored), as
// ggml's ue4m3 reads it: 0x00 and 0x7F (E4M3's NaN) are 0, exponent 0 is
// subnormal (m * 2^-9). Every value is exact in float32.
float ue4m3_half(uint8_t x) {
    if (x == 0x00 || x == 0x7F) return 0.0f;
    const int exponent = (x >> 3) & 0x0f, mantissa = x & 0x07;
    // (8 + m) * 2^(e - 10) is (1 + m/8) * 2^(e - 7); halved: 2^(e - 11).
    return exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -10)
                         : std::ldexp(static_cast<float>(8 + mantissa), exponent - 11);
}

// One 4-bit scale nibble of an 8-byte scale array, t in 0..15.
int scale_nibble(const uint8_t* scales, int t) { return (scales[t / 2] >> (4 * (t % 2))) & 0x0f; }

}  // namespace

// Layout: f16 d, then per 32 elements two u32: four grid indices (bytes), and
// four 7-bit sign indices (bits 0-27) with a 4-bit scale (bits 28-31).
void dequantize_iq2_xxs(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    for (int g = 0; g < 8; ++g) {
        const uint8_t* indices = block + 2 + 8 * g;
        const uint32_t aux = read_u32(indices + 4);
        const float scaled = d * (0.5f + static_cast<float>(aux >> 28));
        const float sub_scale = scaled * 0.25f;
        for (int k = 0; k < 4; ++k) {
            const uint64_t row = grids::kIq2xxsGrid[indices[k]];
            const uint8_t signs = expand_signs((aux >> (7 * k)) & 0x7f);
            for (int j = 0; j < 8; ++j) {
                const float value = sub_scale * static_cast<float>(grid_byte(row, j));
                out[32 * g + 8 * k + j] = value * sign_of_bit(signs, j);
            }
        }
    }
}

// Layout: f16 d, u16 qs[32] (9-bit grid index, 7-bit sign index), scales[8]
// (one 4-bit scale per 16 elements).
void dequantize_iq2_xs(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint8_t* scales = block + 66;
    for (int i = 0; i < 32; ++i) {
        const uint16_t q = read_u16(block + 2 + 2 * i);
        const float scaled = d * (0.5f + static_cast<float>(scale_nibble(scales, i / 2)));
        const float sub_scale = scaled * 0.25f;
        const uint64_t row = grids::kIq2xsGrid[q & 511];
        const uint8_t signs = expand_signs(q >> 9);
        for (int j = 0; j < 8; ++j) {
            const float value = sub_scale * static_cast<float>(grid_byte(row, j));
            out[8 * i + j] = value * sign_of_bit(signs, j);
        }
    }
}

// Layout: f16 d, qs[32] (low 8 index bits), signs[32] (one bit per element),
// qh[8] (2 high index bits per entry), scales[8].
void dequantize_iq2_s(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint8_t* qs = block + 2;
    const uint8_t* signs = block + 34;
    const uint8_t* qh = block + 66;
    const uint8_t* scales = block + 74;
    for (int i = 0; i < 32; ++i) {
        const int index = qs[i] | (((qh[i / 4] >> (2 * (i % 4))) & 3) << 8);
        const float scaled = d * (0.5f + static_cast<float>(scale_nibble(scales, i / 2)));
        const float sub_scale = scaled * 0.25f;
        const uint64_t row = grids::kIq2sGrid[static_cast<size_t>(index)];
        for (int j = 0; j < 8; ++j) {
            const float value = sub_scale * static_cast<float>(grid_byte(row, j));
            out[8 * i + j] = value * sign_of_bit(signs[i], j);
        }
    }
}

// Layout: f16 d, qs[64] (grid indices, 4 elements each), u32 aux[8] (per 32
// elements: four 7-bit sign indices and a 4-bit scale).
void dequantize_iq3_xxs(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint8_t* qs = block + 2;
    for (int g = 0; g < 8; ++g) {
        const uint32_t aux = read_u32(block + 66 + 4 * g);
        const float scaled = d * (0.5f + static_cast<float>(aux >> 28));
        const float sub_scale = scaled * 0.5f;
        for (int e = 0; e < 32; ++e) {
            const uint32_t row = grids::kIq3xxsGrid[qs[8 * g + e / 4]];
            const uint8_t signs = expand_signs((aux >> (7 * (e / 8))) & 0x7f);
            const float value = sub_scale * static_cast<float>(grid_byte(row, e % 4));
            out[32 * g + e] = value * sign_of_bit(signs, e % 8);
        }
    }
}

// Layout: f16 d, qs[64] (low index bits), qh[8] (ninth index bit), signs[32],
// scales[4] (4-bit, per 32 elements: sub_scale = d * (1 + 2 * s)).
void dequantize_iq3_s(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint8_t* qs = block + 2;
    const uint8_t* qh = block + 66;
    const uint8_t* signs = block + 74;
    const uint8_t* scales = block + 106;
    for (int e = 0; e < 256; ++e) {
        const int i = e / 4;
        const int index = qs[i] | (((qh[i / 8] >> (i % 8)) & 1) << 8);
        const float sub_scale = d * static_cast<float>(1 + 2 * scale_nibble(scales, e / 32));
        const uint32_t row = grids::kIq3sGrid[static_cast<size_t>(index)];
        const float value = sub_scale * static_cast<float>(grid_byte(row, e % 4));
        out[e] = value * sign_of_bit(signs[e / 8], e % 8);
    }
}

// Layout: f16 d, qs[32] (low index bits), u16 qh[8]: per 32 elements four
// 3-bit high index parts (bits 0-11), a 3-bit scale (12-14), delta sign (15).
void dequantize_iq1_s(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint8_t* qs = block + 2;
    for (int g = 0; g < 8; ++g) {
        const uint16_t qh = read_u16(block + 34 + 2 * g);
        const float sub_scale = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
        const float delta = (qh & 0x8000) ? -kIq1Delta : kIq1Delta;
        for (int k = 0; k < 4; ++k) {
            const int i = 4 * g + k;
            const int index = qs[i] | (((qh >> (3 * k)) & 7) << 8);
            const uint64_t row = grids::kIq1sGrid[static_cast<size_t>(index)];
            for (int j = 0; j < 8; ++j) {
                const auto grid_value = static_cast<float>(static_cast<int8_t>(grid_byte(row, j)));
                out[8 * i + j] = sub_scale * (grid_value + delta);
            }
        }
    }
}

// Layout: qs[32], qh[16] (per entry a nibble: 3 high index bits + delta sign),
// u16 scales[4]: twelve low bits hold four 3-bit sub-scales, and the four top
// nibbles together are the f16 super-scale d.
void dequantize_iq1_m(const uint8_t* block, float* out) {
    const uint8_t* qs = block;
    const uint8_t* qh = block + 32;
    uint16_t scales[4];
    uint16_t d_bits = 0;
    for (int k = 0; k < 4; ++k) {
        scales[k] = read_u16(block + 48 + 2 * k);
        d_bits = static_cast<uint16_t>(d_bits | ((scales[k] >> 12) << (4 * k)));
    }
    const float d = fp16_to_fp32(d_bits);
    for (int i = 0; i < 32; ++i) {
        const int t = i / 2;  // one sub-scale per 16 elements
        const int sub = (scales[t / 4] >> (3 * (t % 4))) & 7;
        const float sub_scale = d * static_cast<float>(2 * sub + 1);
        const int high = (qh[i / 2] >> (4 * (i % 2))) & 0x0f;
        const int index = qs[i] | ((high & 7) << 8);
        const float delta = (high & 8) ? -kIq1Delta : kIq1Delta;
        const uint64_t row = grids::kIq1sGrid[static_cast<size_t>(index)];
        for (int j = 0; j < 8; ++j) {
            const auto grid_value = static_cast<float>(static_cast<int8_t>(grid_byte(row, j)));
            out[8 * i + j] = sub_scale * (grid_value + delta);
        }
    }
}

// Layout: f16 d, qs[16] (4-bit indices into kIq4Values).
void dequantize_iq4_nl(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    for (int e = 0; e < 32; ++e) out[e] = d * static_cast<float>(kIq4Values[nibble(block + 2, e)]);
}

// Layout: f16 d, u16 scales_h (2 high bits per sub-block), scales_l[4] (low
// nibbles), qs[128] (16 bytes per 32-element sub-block).
void dequantize_iq4_xs(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    const uint16_t scales_h = read_u16(block + 2);
    const uint8_t* scales_l = block + 4;
    for (int j = 0; j < 8; ++j) {
        const int low = (scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
        const int high = (scales_h >> (2 * j)) & 3;
        const float sub_scale = d * static_cast<float>((low | (high << 4)) - 32);
        const uint8_t* qs = block + 8 + 16 * j;
        for (int e = 0; e < 32; ++e)
            out[32 * j + e] = sub_scale * static_cast<float>(kIq4Values[nibble(qs, e)]);
    }
}

// Layout: E8M0 exponent byte, qs[16] (4-bit e2m1 codes).
void dequantize_mxfp4(const uint8_t* block, float* out) {
    const float d = e8m0_half(block[0]);
    for (int e = 0; e < 32; ++e)
        out[e] = d * static_cast<float>(kMxfp4Values[nibble(block + 1, e)]);
}

// Layout: four UE4M3 scale bytes, then per sub-block s of 16 weights qs[8s ..
// 8s + 7]: weight j < 8 of the sub-block is the low nibble of qs[8s + j],
// weight 8 + j its high nibble.
void dequantize_nvfp4(const uint8_t* block, float* out) {
    for (int s = 0; s < 4; ++s) {
        const float d = ue4m3_half(block[s]);
        const uint8_t* qs = block + 4 + 8 * s;
        for (int j = 0; j < 8; ++j) {
            out[16 * s + j] = d * static_cast<float>(kMxfp4Values[qs[j] & 0x0f]);
            out[16 * s + 8 + j] = d * static_cast<float>(kMxfp4Values[qs[j] >> 4]);
        }
    }
}

}  // namespace ferrox::quant::detail
