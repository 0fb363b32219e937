// The CPU plugin's capability table: every kind in the core's kind table has
// a MATVEC and a GEMM kernel here, on one of two paths (see isa_kernels.h).
// kernel_for(), matvec and gemm all read it.
#pragma once

#include <span>

#include "ferrox/backend_abi.h"
#include "kernels/isa_kernels.h"

namespace ferrox::cpu {

enum class DataPath {
    Int8,  // weights decoded to int8 codes, activations quantized (ActFormat)
    Float  // weights decoded to f32, f32 activations
};

struct CpuKernel {
    ferrox_kind kind;
    const char* matvec_name;
    const char* gemm_name;
    DataPath path;
    // Int8 path: how activations are quantized, llama.cpp's vec_dot_type for
    // the kind (its type_traits_cpu table); None on the f32 path.
    ActFormat acts;
};

std::span<const CpuKernel> kernel_table();
const CpuKernel* find_kernel(ferrox_kind kind);  // nullptr: no kernel, use the fallback

// What runs for kinds without a kernel: the core's reference dequantizer, then
// an f32 dot. Correct for every kind, and much slower. Kept for robustness
// (an id the table does not know).
inline constexpr const char* kFallbackName = "f32 dequant-dot";

}  // namespace ferrox::cpu
