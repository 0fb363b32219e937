#include "kernels/block_decode.h"

#include <cstring>

#include "ferrox/quant/half.h"

namespace ferrox::cpu {
namespace {

uint8_t u8(const std::byte* p, size_t i) { return static_cast<uint8_t>(p[i]); }

float f16_at(const std::byte* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return quant::fp16_to_fp32(h);
}

// K-quant 6-bit scale and min of sub-block j from the packed 12-byte array.
void scale_min_k4(int j, const std::byte* q, uint8_t& scale, uint8_t& min) {
    if (j < 4) {
        scale = u8(q, j) & 63;
        min = u8(q, j + 4) & 63;
    } else {
        scale = static_cast<uint8_t>((u8(q, j + 4) & 0xF) | ((u8(q, j - 4) >> 6) << 4));
        min = static_cast<uint8_t>((u8(q, j + 4) >> 4) | ((u8(q, j) >> 6) << 4));
    }
}

}  // namespace

void decode_f32(const std::byte* block, float* out) { std::memcpy(out, block, sizeof(float)); }

void decode_f16(const std::byte* block, float* out) { *out = f16_at(block); }

// {f16 d; int8 q[32]}: d * q
void decode_q8_0(const std::byte* block, float* out) {
    const float d = f16_at(block);
    for (int i = 0; i < 32; ++i)
        out[i] = d * static_cast<float>(static_cast<int8_t>(u8(block, 2 + static_cast<size_t>(i))));
}

// {f16 d; uint8 q[16]}: low nibbles are weights 0..15, high ones 16..31, offset 8.
void decode_q4_0(const std::byte* block, float* out) {
    const float d = f16_at(block);
    for (int i = 0; i < 16; ++i) {
        const uint8_t q = u8(block, 2 + static_cast<size_t>(i));
        out[i] = d * static_cast<float>((q & 0xF) - 8);
        out[i + 16] = d * static_cast<float>((q >> 4) - 8);
    }
}

// {f16 d; f16 dmin; uint8 scales[12]; uint8 q[128]}: 8 sub-blocks of 32, each
// d*scale*q - dmin*min; a 32-byte run of q holds two sub-blocks (low, high nibble).
void decode_q4_k(const std::byte* block, float* out) {
    const float d = f16_at(block);
    const float dmin = f16_at(block + 2);
    const std::byte* scales = block + 4;
    const std::byte* q = block + 16;
    for (int pair = 0; pair < 4; ++pair) {
        uint8_t s0, m0, s1, m1;
        scale_min_k4(2 * pair, scales, s0, m0);
        scale_min_k4(2 * pair + 1, scales, s1, m1);
        const float d0 = d * s0, o0 = dmin * m0, d1 = d * s1, o1 = dmin * m1;
        for (int l = 0; l < 32; ++l) {
            const uint8_t v = u8(q, static_cast<size_t>(l));
            out[l] = d0 * static_cast<float>(v & 0xF) - o0;
            out[l + 32] = d1 * static_cast<float>(v >> 4) - o1;
        }
        q += 32;
        out += 64;
    }
}

// As Q4_K plus a fifth bit per weight in qh[32]: bit (2*pair) for the low
// nibble's sub-block, bit (2*pair+1) for the high one's.
void decode_q5_k(const std::byte* block, float* out) {
    const float d = f16_at(block);
    const float dmin = f16_at(block + 2);
    const std::byte* scales = block + 4;
    const std::byte* qh = block + 16;
    const std::byte* q = block + 48;
    for (int pair = 0; pair < 4; ++pair) {
        uint8_t s0, m0, s1, m1;
        scale_min_k4(2 * pair, scales, s0, m0);
        scale_min_k4(2 * pair + 1, scales, s1, m1);
        const float d0 = d * s0, o0 = dmin * m0, d1 = d * s1, o1 = dmin * m1;
        const uint8_t lo_bit = static_cast<uint8_t>(1u << (2 * pair));
        const uint8_t hi_bit = static_cast<uint8_t>(2u << (2 * pair));
        for (int l = 0; l < 32; ++l) {
            const uint8_t v = u8(q, static_cast<size_t>(l));
            const uint8_t h = u8(qh, static_cast<size_t>(l));
            out[l] = d0 * static_cast<float>((v & 0xF) + ((h & lo_bit) ? 16 : 0)) - o0;
            out[l + 32] = d1 * static_cast<float>((v >> 4) + ((h & hi_bit) ? 16 : 0)) - o1;
        }
        q += 32;
        out += 64;
    }
}

// {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d}: 6-bit weights offset
// by 32, signed 8-bit scale per 16 weights.
void decode_q6_k(const std::byte* block, float* out) {
    const std::byte* ql = block;
    const std::byte* qh = block + 128;
    const std::byte* sc = block + 192;
    const float d = f16_at(block + 208);
    for (int half = 0; half < 2; ++half) {
        for (int l = 0; l < 32; ++l) {
            const size_t li = static_cast<size_t>(l);
            const int is = l / 16;
            const uint8_t h = u8(qh, li);
            const int q1 = ((u8(ql, li) & 0xF) | ((h & 3) << 4)) - 32;
            const int q2 = ((u8(ql, li + 32) & 0xF) | (((h >> 2) & 3) << 4)) - 32;
            const int q3 = ((u8(ql, li) >> 4) | (((h >> 4) & 3) << 4)) - 32;
            const int q4 = ((u8(ql, li + 32) >> 4) | (((h >> 6) & 3) << 4)) - 32;
            auto scale = [&](int k) {
                return d * static_cast<float>(static_cast<int8_t>(u8(sc, static_cast<size_t>(k))));
            };
            out[l] = scale(is) * static_cast<float>(q1);
            out[l + 32] = scale(is + 2) * static_cast<float>(q2);
            out[l + 64] = scale(is + 4) * static_cast<float>(q3);
            out[l + 96] = scale(is + 6) * static_cast<float>(q4);
        }
        ql += 64;
        qh += 32;
        sc += 8;
        out += 128;
    }
}

}  // namespace ferrox::cpu
