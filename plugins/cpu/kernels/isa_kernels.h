// The per-ISA kernel set: one table of plain function pointers that each of
// isa_portable.cpp, isa_avx2.cpp and isa_avx512.cpp fills from the same
// source (isa_kernels_impl.inc) compiled with its own target flags. Only
// this table crosses between those files, so no inline function compiled for
// AVX-512 can be picked by the linker for the portable path.
//
// Two data paths:
//  - int8: a weight row is decoded to int8 codes with one float scale and one
//    float additive term per 16 weights (w = scale*q + min); the activation is
//    quantized the way llama.cpp's x86 CPU backend quantizes it for that
//    weight kind (its "vec_dot_type", see ActFormat), so both engines round
//    the same activations to the same codes; products are integer dots.
//  - f32: the weight row is decoded to floats, then a float dot (F32, F16,
//    BF16, and the codebook i-quants).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"

namespace ferrox::cpu {

// How the int8 path quantizes activations for a weight kind: ggml's
// vec_dot_type for that kind, with the rounding of ggml's x86 code, so that
// ferrox and llama.cpp see identical activation codes and scales.
enum class ActFormat : uint8_t {
    None,  // the f32 path: activations stay float
    // Blocks of 32: scale f16(amax / 127); codes round-half-even(x * (127 /
    // amax)), 0 when amax is 0 (ggml's AVX quantize_row_q8_0).
    Q8_0,
    // Q8_0's codes and scale; the block sum is kept as f16(d * sum) with the
    // unrounded d (ggml's block_q8_1.s), see QuantizedActs::scaled_sum.
    Q8_1,
    // Blocks of 256: with m the first value of largest |x|, iscale = -127/m,
    // codes min(127, round-half-even(iscale * x)), scale the f32 1/iscale;
    // all zero when amax is 0 (ggml's quantize_row_q8_K_ref).
    Q8_K,
};

// The GGML kind whose blocks an activation format writes: its block shape is
// the quant kind table's (Q8_0 and Q8_1 32 weights, Q8_K 256).
constexpr ferrox_kind act_kind(ActFormat format) {
    switch (format) {
        case ActFormat::Q8_0:
            return FERROX_KIND_Q8_0;
        case ActFormat::Q8_1:
            return FERROX_KIND_Q8_1;
        case ActFormat::Q8_K:
            return FERROX_KIND_Q8_K;
        case ActFormat::None:
            break;
    }
    return FERROX_KIND_F32;
}

// Columns per activation block (0 for None: nothing is quantized).
constexpr uint32_t act_block_elements(ActFormat format) {
    return format == ActFormat::None ? 0 : kind_traits(act_kind(format))->block_elements;
}

// Eight Q8_0 blocks of one activation laid out for the pairs MATVEC
// (pairs_matvec_row in fused_lanes.inc), which dots blocks 2j and 2j + 1 in
// 128-bit lane j: a block's columns 0-15 meet its weights' low nibbles and
// 16-31 the high ones. Built by products.cpp for the weight kind's code offset.
struct PairGroup {
    int8_t low_even[64], high_even[64], low_odd[64], high_odd[64];
    // Lane j (4 values): blocks 2j and 2j + 1, twice: -offset * the block's
    // code sum, and the block's scale.
    int32_t start[16];
    float scale[16];
};

// An activation vector quantized for the int8 path. Every format has one
// scale per 32 columns at least (Q8_K repeats its block scale), which the
// fused MATVEC kernels rely on; the tiles read it per 16.
struct QuantizedActs {
    int8_t* q;     // cols codes
    float* scale;  // cols/16: the block's scale, repeated per 16
    // cols/16: scale * sum of the 16 codes; for Q8_1 the whole block's
    // f16(d * sum) sits in the first half and 0 in the second (the kinds that
    // use Q8_1, Q4_1 and Q5_1, have one min per 32, so the product is the same).
    float* scaled_sum;
    // Q8_K for a fused MATVEC only (else nullptr; quantize_acts fills them
    // where given), for the 512-bit Q4_K / Q5_K kernel: the codes' sum per 16
    // columns, and the codes again, each 128 columns in the order 0-31,
    // 64-95, 32-63, 96-127 (the low nibbles of 64 packed Q4_K bytes are
    // columns 0-31 and 64-95, the high ones 32-63 and 96-127).
    int16_t* code_sum;
    int8_t* q_nibble_order;
    // Q8_0 for a one-activation fused MATVEC whose kind reads them
    // (LaneGemmInfo::pair_groups), else nullptr: cols / 256 PairGroups.
    const PairGroup* pair_groups;
};

// A weight row decoded for the int8 path: w = scale * q + offset per 16. On
// the VNNI path codes are stored with their top bit flipped (q + 128 as
// unsigned), which the tile cancels exactly in integers.
struct DecodedRow {
    int8_t* q;      // cols codes
    float* scale;   // cols/16
    float* offset;  // cols/16: the K-quant / Q4_1 / Q5_1 min, else 0
};

// Decodes `blocks` whole blocks of one kind starting at `src`.
using Int8Decoder = void (*)(const std::byte* src, uint64_t blocks, DecodedRow out);
// Decodes `blocks` whole blocks to floats.
using FloatDecoder = void (*)(const std::byte* src, uint64_t blocks, float* out);
// y[a * y_stride] = dot(row, acts[a]) for a < n_acts (<= kFusedMaxActs),
// reading the weight blocks directly (no decode buffer), each block once for
// all the activations; cols a multiple of the kind's block. Each result is
// bit-identical to the n_acts = 1 call with that activation.
constexpr int kFusedMaxActs = 4;
using FusedMatvec = void (*)(const std::byte* row, uint64_t cols, const QuantizedActs* acts,
                             int n_acts, float* y, uint64_t y_stride);

// The decode GEMM of the 32-weight kinds with the activations in vector lanes
// (AVX-512 VNNI; see fused_lanes.inc): up to kLaneActs activations against
// rows [0, n_rows) of `rows` (row_bytes apart), y[a * y_stride + r]. Each
// result is bit-identical to that kind's fused MATVEC with that activation.
inline constexpr int kLaneActs = 16;

// Activations laid out for it (LaneBatch in products.cpp): for each 4
// columns, 16 lanes of 4 codes (unused lanes hold 0); per block of 32 columns
// the 16 activations' scales and the dots' start, -offset * the block's code
// sum, which cancels the offset the weight codes carry as VNNI's unsigned
// operand (LaneGemmInfo::offset).
struct LaneActs {
    const int8_t* codes;   // cols/4 * kLaneActs * 4
    const int32_t* start;  // cols/32 * kLaneActs
    const float* scale;    // cols/32 * kLaneActs
};
using LaneGemm = void (*)(const std::byte* rows, uint64_t row_bytes, uint64_t n_rows, uint64_t cols,
                          LaneActs acts, int n_acts, float* y, uint64_t y_stride);
struct LaneGemmInfo {
    LaneGemm gemm = nullptr;  // nullptr: none for the kind on this ISA
    int offset = 0;
    // Its MATVEC of one activation reads QuantizedActs::pair_groups, built
    // with `offset` (Q4_0).
    bool pair_groups = false;
};

// The panel GEMM (prefill). kPanelRows decoded rows are interleaved so that
// one 64-byte vector holds 4 consecutive columns of 16 rows: a VNNI dot of it
// against 4 activation bytes broadcast gives 16 rows' partial sums in the 16
// int32 lanes, so per-row weight scales are per lane, and the float work is
// one multiply-add per group of `group` columns for 16 rows at once.
inline constexpr int kPanelRows = 32;

struct PanelBuffer {
    uint8_t* q;     // kPanelRows * cols codes
    float* scale;   // kPanelRows * cols/16
    float* offset;  // kPanelRows * cols/16
};

// An activation regrouped per `group` columns for the panel GEMM.
struct PanelActs {
    const int8_t* q;          // cols codes
    const int32_t* start;     // cols/group: -code_bias * the group's code sum
    const float* scale;       // cols/group
    const float* scaled_sum;  // cols/group
};

// y[c*y_stride + r] = dot(rows[r], acts[c]) for r < n_rows (<= kPanelRows),
// c < n, through `panel`.
using PanelGemm = void (*)(const DecodedRow* rows, int n_rows, const PanelActs* acts, uint64_t n,
                           uint64_t cols, float* y, uint64_t y_stride, PanelBuffer panel);

struct PanelGemmInfo {
    PanelGemm gemm;  // nullptr: this ISA has none for the kind (4x4 tiles instead)
    // The same for activations whose scale is constant per 256 columns
    // (Q8_K), which saves a multiply per group; nullptr: use `gemm`.
    PanelGemm gemm_scale256;
    int group;      // columns per weight scale (16 or 32)
    int code_bias;  // what the decoder added to each code (128: VNNI's +128)
};

struct IsaKernels {
    const char* name;  // "portable", "avx2", "avx512vnni"
    // nullptr for the kinds of the other path: every ISA decodes exactly
    // kCpuKernels' rows of its path (checked at compile time).
    Int8Decoder (*int8_decoder)(ferrox_kind kind);
    FloatDecoder (*float_decoder)(ferrox_kind kind);
    // x[cols] -> acts; cols a multiple of 32 (of 256 for Q8_K). Every ISA
    // gives the same bits: the vector paths follow the scalar rule exactly.
    void (*quantize_acts)(ActFormat format, const float* x, uint64_t cols, QuantizedActs acts);
    // y[c*y_stride + r] = dot(rows[r], acts[c]) for r < n_rows (<=4),
    // c < n_acts (<=4).
    void (*int8_tile)(const DecodedRow* rows, int n_rows, const QuantizedActs* acts, int n_acts,
                      uint64_t cols, float* y, uint64_t y_stride);
    // The same over float rows and float activations (x[c] = xs + c*cols).
    void (*float_tile)(const float* const* rows, int n_rows, const float* xs, int n_acts,
                       uint64_t cols, float* y, uint64_t y_stride);
    // The MATVEC fast path for kinds read in registers; nullptr: decode + tile.
    FusedMatvec (*fused_matvec)(ferrox_kind kind);
    PanelGemmInfo (*panel_gemm)(ferrox_kind kind);
    LaneGemmInfo (*lanes_gemm)(ferrox_kind kind);
};

const IsaKernels& isa_kernels_portable();
const IsaKernels& isa_kernels_avx2();
const IsaKernels& isa_kernels_avx512vnni();

// Helpers the ISA files call into (defined in a baseline file): f16 rounding
// of a scale, and the core's reference decoder for the codebook i-quants.
float round_to_f16(float value);
float f16_bits_to_float(uint16_t bits);
void reference_decode(ferrox_kind kind, const std::byte* src, uint64_t blocks, float* out);

}  // namespace ferrox::cpu
