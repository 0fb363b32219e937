// Matrix-vector and matrix-matrix products over one prepared weight.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferrox/backend_abi.h"
#include "kernels/kernel_table.h"
#include "thread_pool.h"

namespace ferrox::cpu {

struct WeightView {
    ferrox_kind kind;
    uint64_t rows, cols, row_bytes;
    const std::byte* data;
    const CpuKernel* kernel;  // nullptr: fallback path
};

// y[rows] = W x
void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y);
// y[n][rows] = x[n][cols] W^T
void gemm(ThreadPool& pool, const WeightView& w, const float* x, uint64_t n, float* y);

}  // namespace ferrox::cpu
