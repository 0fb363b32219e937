// Test hooks: the CUDA kernels' own code (plugins/cuda/block_decode.cuh and
// row_tile.cuh, host-and-device) compiled for the CPU, so the kernels' format
// math and indexing can be checked against the scalar reference on a host
// without a GPU. Only the warp-shuffle sum and the launch are left to the GPU.
#pragma once

#include <cstdint>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda::test {

// Decodes one row of `cols` weights of `kind` into out[0..cols) the way the
// MATVEC kernel does. Returns false when the capability table lists no MATVEC
// kernel for `kind`.
bool decode_row_with_kernel_code(ferrox_kind kind, const void* row, uint64_t cols, float* out);

// Y[n][rows] = X[n][cols] W^T computed by the kernel's per-lane code for `op`
// (MATVEC: tiles of 1, GEMM: tiles of kGemmTile), the 32 lanes' partials added
// on the CPU. Returns false unless op is MATVEC or GEMM and the table lists a
// kernel for (op, kind).
bool run_kernel_code_on_host(ferrox_op op, ferrox_kind kind, const void* weights, uint64_t rows,
                             uint64_t cols, uint64_t row_bytes, const float* x, uint64_t n,
                             float* y);

// Copies n bytes at p into out[0..n) the way the device reads a span whose
// address is not 16-byte aligned: aligned words joined by funnel shifts
// (load_span_by_words). Returns false for a size no decoder reads.
bool load_span_by_words_on_host(const void* p, int n, uint8_t* out);

}  // namespace ferrox::cuda::test
