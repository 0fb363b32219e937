// Matrix-vector and matrix-matrix products over one prepared weight: the
// threading and buffering around the per-ISA tiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferrox/backend_abi.h"
#include "kernels/isa_kernels.h"
#include "kernels/kernel_table.h"
#include "thread_pool.h"

namespace ferrox::cpu {

struct WeightView {
    ferrox_kind kind;
    uint64_t rows, cols, row_bytes;
    const std::byte* data;
    const CpuKernel* kernel;              // the row kernel_for() names, never null
    uint64_t blocks_per_row;              // cols / block elements
    Int8Decoder int8_decode = nullptr;    // DataPath::Int8
    FloatDecoder float_decode = nullptr;  // DataPath::Float
    FusedMatvec fused_matvec = nullptr;   // MATVEC without a decode buffer
    LaneGemmInfo lanes_gemm = {};         // decode GEMM with activations in lanes
};

// Fills the view's decoders from the chosen ISA's kernel set; throws for a
// kind without a kernel row (weight_prepare refuses those first).
WeightView make_view(const IsaKernels& isa, ferrox_kind kind, uint64_t rows, uint64_t cols,
                     uint64_t row_bytes, const std::byte* data);

// y[rows] = W x
void matvec(ThreadPool& pool, const IsaKernels& isa, const WeightView& w, const float* x, float* y);

// One product of matvec_many: y[w->rows] = W x.
struct MatvecTask {
    const WeightView* w;
    const float* x;
    float* y;
};
// Every task's y = W x, each row to matvec's bits, all the tasks' rows
// split across the pool as one job (one wake-up of its threads).
void matvec_many(ThreadPool& pool, const IsaKernels& isa, std::span<const MatvecTask> tasks);
// y[n][rows] = x[n][cols] W^T
void gemm(ThreadPool& pool, const IsaKernels& isa, const WeightView& w, const float* x, uint64_t n,
          float* y);

}  // namespace ferrox::cpu
