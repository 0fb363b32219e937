// The ternary kinds (TQ1_0, TQ2_0: weights in {-1, 0, 1} times an f16 scale)
// and Q1_0 (one sign bit a weight). Layouts are ggml's (ggml-common.h).
#include "block_codec.h"

namespace ferrox::quant::detail {
namespace {

// TQ1_0's byte regions: 48 bytes of five trits each (the first 32 bytes
// cover weights 0..159, the next 16 weights 160..239), 4 bytes of four
// trits each (weights 240..255), then the f16 scale.
constexpr int kTq1Wide = 32, kTq1Narrow = 16, kTq1High = 4;
constexpr int kTq1ScaleAt = kTq1Wide + kTq1Narrow + kTq1High;
static_assert(kTq1ScaleAt + 2 == KindBlock<FERROX_KIND_TQ1_0>::kBytes);
static_assert(5 * (kTq1Wide + kTq1Narrow) + 4 * kTq1High ==
              KindBlock<FERROX_KIND_TQ1_0>::kElements);

// Trit n of a byte that packs base-3 digits as a fixed-point fraction of 256
// (most significant trit first): multiplying by 3^n (mod 256) shifts trit n
// to the top, and (byte * 3) >> 8 reads it as 0, 1 or 2.
int trit(uint8_t packed, int n) {
    uint8_t shifted = packed;
    for (int k = 0; k < n; ++k) shifted = static_cast<uint8_t>(shifted * 3);
    return (shifted * 3) >> 8;
}

// `count` bytes at `bytes`, `trits` trits each: weight k * count + m is trit
// k of byte m (the trit planes one after another), minus 1, times d.
float* decode_trit_planes(const uint8_t* bytes, int count, int trits, float d, float* out) {
    for (int k = 0; k < trits; ++k)
        for (int m = 0; m < count; ++m) *out++ = static_cast<float>(trit(bytes[m], k) - 1) * d;
    return out;
}

}  // namespace

void dequantize_tq1_0(const uint8_t* block, float* out) {
    const float d = read_f16(block + kTq1ScaleAt);
    out = decode_trit_planes(block, kTq1Wide, 5, d, out);
    out = decode_trit_planes(block + kTq1Wide, kTq1Narrow, 5, d, out);
    decode_trit_planes(block + kTq1Wide + kTq1Narrow, kTq1High, 4, d, out);
}

// Layout: qs[64], f16 d. Each 32 bytes hold 128 weights as four 2-bit
// planes: weight 32l + m of the half is bits 2l..2l+1 of byte m, minus 1.
void dequantize_tq2_0(const uint8_t* block, float* out) {
    const float d = read_f16(block + kSuper / 4);
    for (int half = 0; half < 2; ++half)
        for (int l = 0; l < 4; ++l)
            for (int m = 0; m < 32; ++m) {
                const int q = (block[32 * half + m] >> (2 * l)) & 3;
                out[128 * half + 32 * l + m] = static_cast<float>(q - 1) * d;
            }
}

// Layout: f16 d, qs[16]; weight j is +d when bit j % 8 of qs[j / 8] is set,
// else -d (a negation, so a NaN d keeps its payload with the sign flipped,
// as ggml writes it).
void dequantize_q1_0(const uint8_t* block, float* out) {
    const float d = read_f16(block);
    constexpr int kElements = KindBlock<FERROX_KIND_Q1_0>::kElements;
    for (int j = 0; j < kElements; ++j) out[j] = (block[2 + j / 8] >> (j % 8)) & 1 ? d : -d;
}

}  // namespace ferrox::quant::detail
