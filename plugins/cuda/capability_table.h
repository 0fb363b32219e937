// The CUDA plugin's capability table: the one list of kernels that exist.
//
// kernel_for() answers from it, and the kernel launchers (kernels.cu) are
// instantiated from it at compile time, so the table cannot claim a kernel
// that was not built, nor can a kernel be built that the table hides.
// Plain C++ (no CUDA): compiled by g++ for the ABI glue and the tests, and by
// nvcc for the launchers.
#pragma once

#include <array>
#include <cstdint>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda {

struct KernelEntry {
    ferrox_op op;
    ferrox_kind kind;
    const char* name;  // what kernel_for() reports and the registry records
};

// MATVEC for every weight kind the decoder meets; GEMM (one weight read per
// tile of activations) for the four kinds that dominate prefill. A kind with
// a MATVEC but no GEMM kernel runs GEMM as per-position matvecs.
inline constexpr std::array<KernelEntry, 12> kKernels{{
    {FERROX_OP_MATVEC, FERROX_KIND_F32, "cuda_matvec_f32"},
    {FERROX_OP_MATVEC, FERROX_KIND_F16, "cuda_matvec_f16"},
    {FERROX_OP_MATVEC, FERROX_KIND_BF16, "cuda_matvec_bf16"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q8_0, "cuda_matvec_q8_0"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q4_0, "cuda_matvec_q4_0"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q4_K, "cuda_matvec_q4_k"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q5_K, "cuda_matvec_q5_k"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q6_K, "cuda_matvec_q6_k"},
    {FERROX_OP_GEMM, FERROX_KIND_Q8_0, "cuda_gemm_tiled_q8_0"},
    {FERROX_OP_GEMM, FERROX_KIND_Q4_0, "cuda_gemm_tiled_q4_0"},
    {FERROX_OP_GEMM, FERROX_KIND_Q4_K, "cuda_gemm_tiled_q4_k"},
    {FERROX_OP_GEMM, FERROX_KIND_Q6_K, "cuda_gemm_tiled_q6_k"},
}};

inline constexpr const char* kGemmFallback = "CUDA per-position matvec";

constexpr const char* find_kernel(ferrox_op op, ferrox_kind kind) {
    for (const KernelEntry& entry : kKernels)
        if (entry.op == op && entry.kind == kind) return entry.name;
    return nullptr;
}

constexpr bool has_kernel(ferrox_op op, ferrox_kind kind) {
    return find_kernel(op, kind) != nullptr;
}

// Fills `out` (up to out->struct_size) the way the ABI's kernel_for() must:
// the kernel's name, or NULL with no by-design reason (a plain miss). Defined
// in capability_table.cpp so the tests link exactly what the plugin links.
void describe_kernel(ferrox_op op, ferrox_kind kind, ferrox_kernel_info* out);

}  // namespace ferrox::cuda
