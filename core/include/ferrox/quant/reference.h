// The scalar reference for every GGUF quant format ferrox knows (kAllKinds).
//
// Dequantization reproduces, bit for bit, the float32 values that the gguf
// Python package (gguf.quants.dequantize, numpy) produces: same float32
// operations in the same order, no fused multiply-add. It is the oracle that
// plugin kernels are tested against (with NMSE) and the engine's last-resort
// "f32 dequant-dot" fallback. Clarity over speed.
//
// Byte layouts are ggml's; all multi-byte fields are little-endian.
#pragma once

#include <cstdint>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"

namespace ferrox::quant {

// Writes the n float32 values encoded by `src` (n / block_elements blocks) to
// dst. Returns false, writing nothing, when `kind` is not in kAllKinds or n is
// not a multiple of the kind's block size.
// Exported: the decoder's blocks read gemma4's per-layer embedding rows with
// it, and model_tests compiles those blocks itself.
FERROX_API bool dequantize_row(ferrox_kind kind, const void* src, float* dst, uint64_t n);

// Encodes n floats as `kind` blocks into dst (row_bytes(kind, n) bytes).
// Supported: F32, F16, BF16, Q8_0, Q4_0 (bit-exact with gguf.quants.quantize),
// Q4_K, Q5_K, Q6_K, Q8_K (ferrox's own quantizers; gguf has none). Returns
// false, writing nothing, for any other kind or an n that is not a multiple
// of the block size. Inputs are expected finite; a NaN or Inf gives codes that
// are defined but meaningless.
bool quantize_row(ferrox_kind kind, const float* src, void* dst, uint64_t n);

// Reference dot product of one quantized row with n float32 values.
// Accumulation order: each block is dequantized to float32 (exactly as
// dequantize_row), then products w[i] * x[i] (float32 multiply) are summed
// in element order 0..n-1 into a double, which is rounded to float once at
// the end. Returns NaN when dequantize_row would return false.
float dot_row(ferrox_kind kind, const void* row, const float* x, uint64_t n);

}  // namespace ferrox::quant
