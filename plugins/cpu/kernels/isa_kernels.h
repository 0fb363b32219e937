// The per-ISA kernel set: one table of plain function pointers that each of
// isa_portable.cpp, isa_avx2.cpp and isa_avx512.cpp fills from the same
// source (isa_kernels_impl.inc) compiled with its own target flags. Only
// this table crosses between those files, so no inline function compiled for
// AVX-512 can be picked by the linker for the portable path.
//
// Two data paths:
//  - int8: a weight row is decoded to int8 codes with one float scale and one
//    float additive term per 16 weights (w = scale*q + min); the activation is
//    quantized to Q8_0-style blocks of 32 (f16-rounded scale, codes rounded
//    half away from zero: exactly gguf's Q8_0); products are integer dots.
//  - f32: the weight row is decoded to floats, then a float dot (F32, F16,
//    BF16, and the codebook i-quants).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferrox/backend_abi.h"

namespace ferrox::cpu {

// An activation vector quantized for the int8 path.
struct QuantizedActs {
    int8_t* q;          // cols codes
    float* scale;       // cols/16: the block's f16-rounded scale (repeated per half)
    float* scaled_sum;  // cols/16: scale * sum of the 16 codes
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
// y[r] = dot(rows[r], acts) for r < n_rows (<= 4), reading the weight blocks
// directly (no decode buffer); cols a multiple of the kind's block.
using FusedMatvec = void (*)(const std::byte* const* rows, int n_rows, uint64_t cols,
                             const QuantizedActs& acts, float* y);

struct IsaKernels {
    const char* name;  // "portable", "avx2", "avx512vnni"
    // nullptr for kinds this ISA file does not decode (then the other path).
    Int8Decoder (*int8_decoder)(ferrox_kind kind);
    FloatDecoder (*float_decoder)(ferrox_kind kind);
    // x[cols] -> acts; cols a multiple of 32.
    void (*quantize_acts)(const float* x, uint64_t cols, QuantizedActs acts);
    // y[c*y_stride + r] = dot(rows[r], acts[c]) for r < n_rows (<=4),
    // c < n_acts (<=4).
    void (*int8_tile)(const DecodedRow* rows, int n_rows, const QuantizedActs* acts, int n_acts,
                      uint64_t cols, float* y, uint64_t y_stride);
    // The same over float rows and float activations (x[c] = xs + c*cols).
    void (*float_tile)(const float* const* rows, int n_rows, const float* xs, int n_acts,
                       uint64_t cols, float* y, uint64_t y_stride);
    // The MATVEC fast path for kinds read in registers; nullptr: decode + tile.
    FusedMatvec (*fused_matvec)(ferrox_kind kind);
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
