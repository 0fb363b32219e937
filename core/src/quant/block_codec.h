// Private to the quant reference: the per-kind block codecs and the small
// byte readers they share. Every codec reads one block (the kind's
// block_bytes) and writes its block_elements floats, or the reverse.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "ferrox/quant/half.h"
#include "ferrox/quant_kind.h"

namespace ferrox::quant::detail {

// The two block sizes the codecs are written for, from the kind table: every
// legacy format shares Q8_0's, every K-quant Q4_K's super-block.
inline constexpr int kLegacyBlock = KindBlock<FERROX_KIND_Q8_0>::kElements;
inline constexpr int kSuperBlock = KindBlock<FERROX_KIND_Q4_K>::kElements;

consteval bool all_blocks_are(std::initializer_list<ferrox_kind> kinds, int elements) {
    for (ferrox_kind k : kinds)
        if (static_cast<int>(kind_traits(static_cast<uint32_t>(k))->block_elements) != elements)
            return false;
    return true;
}
static_assert(all_blocks_are({FERROX_KIND_Q4_0, FERROX_KIND_Q4_1, FERROX_KIND_Q5_0,
                              FERROX_KIND_Q5_1, FERROX_KIND_Q8_0, FERROX_KIND_Q8_1},
                             kLegacyBlock));
static_assert(all_blocks_are({FERROX_KIND_Q2_K, FERROX_KIND_Q3_K, FERROX_KIND_Q4_K,
                              FERROX_KIND_Q5_K, FERROX_KIND_Q6_K, FERROX_KIND_Q8_K},
                             kSuperBlock));

using DequantizeBlock = void (*)(const uint8_t* block, float* out);
using QuantizeBlock = void (*)(const float* in, uint8_t* block);

inline uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t read_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline float read_f16(const uint8_t* p) { return fp16_to_fp32(read_u16(p)); }
inline float read_f32(const uint8_t* p) {
    float value;
    std::memcpy(&value, p, sizeof value);
    return value;
}
inline void write_u16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
}
inline void write_f16(uint8_t* p, float v) { write_u16(p, fp32_to_fp16(v)); }
inline void write_f32(uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); }

// Elements per K-quant (and i-quant) super-block.
inline constexpr int kSuper = kSuperBlock;

// The 4-bit code of element i of a 32-element block: elements 0..15 are the
// low nibbles of qs[0..15], elements 16..31 their high nibbles.
inline uint8_t nibble(const uint8_t* qs, int i) {
    return static_cast<uint8_t>(i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4);
}

// float.cpp
void dequantize_f32(const uint8_t* block, float* out);
void dequantize_f16(const uint8_t* block, float* out);
void dequantize_bf16(const uint8_t* block, float* out);
void quantize_f32(const float* in, uint8_t* block);
void quantize_f16(const float* in, uint8_t* block);
void quantize_bf16(const float* in, uint8_t* block);

// legacy.cpp: 32-element blocks with one scale (and maybe a min)
void dequantize_q4_0(const uint8_t* block, float* out);
void dequantize_q4_1(const uint8_t* block, float* out);
void dequantize_q5_0(const uint8_t* block, float* out);
void dequantize_q5_1(const uint8_t* block, float* out);
void dequantize_q8_0(const uint8_t* block, float* out);
void dequantize_q8_1(const uint8_t* block, float* out);
void quantize_q4_0(const float* in, uint8_t* block);
void quantize_q8_0(const float* in, uint8_t* block);

// kquants.cpp: 256-element super-blocks with quantized sub-block scales
void dequantize_q2_k(const uint8_t* block, float* out);
void dequantize_q3_k(const uint8_t* block, float* out);
void dequantize_q4_k(const uint8_t* block, float* out);
void dequantize_q5_k(const uint8_t* block, float* out);
void dequantize_q6_k(const uint8_t* block, float* out);
void dequantize_q8_k(const uint8_t* block, float* out);

// kquants_quantize.cpp
void quantize_q4_k(const float* in, uint8_t* block);
void quantize_q5_k(const float* in, uint8_t* block);
void quantize_q6_k(const float* in, uint8_t* block);
void quantize_q8_k(const float* in, uint8_t* block);

// iquants.cpp: codebook (grid) and non-linear formats
void dequantize_iq2_xxs(const uint8_t* block, float* out);
void dequantize_iq2_xs(const uint8_t* block, float* out);
void dequantize_iq2_s(const uint8_t* block, float* out);
void dequantize_iq3_xxs(const uint8_t* block, float* out);
void dequantize_iq3_s(const uint8_t* block, float* out);
void dequantize_iq1_s(const uint8_t* block, float* out);
void dequantize_iq1_m(const uint8_t* block, float* out);
void dequantize_iq4_nl(const uint8_t* block, float* out);
void dequantize_iq4_xs(const uint8_t* block, float* out);
void dequantize_mxfp4(const uint8_t* block, float* out);
void dequantize_nvfp4(const uint8_t* block, float* out);

// lowbit.cpp: ternary and 1-bit formats
void dequantize_tq1_0(const uint8_t* block, float* out);
void dequantize_tq2_0(const uint8_t* block, float* out);
void dequantize_q1_0(const uint8_t* block, float* out);

}  // namespace ferrox::quant::detail
