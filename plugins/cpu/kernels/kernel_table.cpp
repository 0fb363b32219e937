#include "kernels/kernel_table.h"

#include <array>

namespace ferrox::cpu {
namespace {

constexpr std::array<CpuKernel, 7> kTable{{
    {FERROX_KIND_F32, "cpu.f32.matvec", "cpu.f32.gemm", decode_f32},
    {FERROX_KIND_F16, "cpu.f16.matvec", "cpu.f16.gemm", decode_f16},
    {FERROX_KIND_Q8_0, "cpu.q8_0.matvec", "cpu.q8_0.gemm", decode_q8_0},
    {FERROX_KIND_Q4_0, "cpu.q4_0.matvec", "cpu.q4_0.gemm", decode_q4_0},
    {FERROX_KIND_Q4_K, "cpu.q4_k.matvec", "cpu.q4_k.gemm", decode_q4_k},
    {FERROX_KIND_Q5_K, "cpu.q5_k.matvec", "cpu.q5_k.gemm", decode_q5_k},
    {FERROX_KIND_Q6_K, "cpu.q6_k.matvec", "cpu.q6_k.gemm", decode_q6_k},
}};

}  // namespace

std::span<const CpuKernel> kernel_table() { return kTable; }

const CpuKernel* find_kernel(ferrox_kind kind) {
    for (const auto& k : kTable)
        if (k.kind == kind) return &k;
    return nullptr;
}

}  // namespace ferrox::cpu
