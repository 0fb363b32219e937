// The CPU plugin's capability table: the one list of kinds with a kernel of
// its own. kernel_for(), matvec and gemm all read it.
#pragma once

#include <span>

#include "ferrox/backend_abi.h"
#include "kernels/block_decode.h"

namespace ferrox::cpu {

struct CpuKernel {
    ferrox_kind kind;
    const char* matvec_name;
    const char* gemm_name;
    BlockDecoder decode;
};

std::span<const CpuKernel> kernel_table();
const CpuKernel* find_kernel(ferrox_kind kind);  // nullptr: no kernel, use the fallback

// What runs for kinds without a kernel: the core's reference dequantizer, then
// an f32 dot. Correct for every kind, and much slower.
inline constexpr const char* kFallbackName = "f32 dequant-dot";

}  // namespace ferrox::cpu
