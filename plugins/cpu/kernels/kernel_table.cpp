#include "kernels/kernel_table.h"

#include <array>

namespace ferrox::cpu {
namespace {

using enum DataPath;

// The acts column follows ggml-cpu.c's type_traits_cpu[].vec_dot_type: Q8_K for
// the K-quants and IQ4_XS, Q8_1 for Q4_1/Q5_1, Q8_0 for the other 32-blocks.
// Q8_K weights (no ggml dot of their own) take Q8_K too. The codebook
// i-quants run on f32 here, so they quantize nothing.

constexpr std::array<CpuKernel, 25> kTable{{
    {FERROX_KIND_F32, "cpu.f32.matvec", "cpu.f32.gemm", Float, ActFormat::None},
    {FERROX_KIND_F16, "cpu.f16.matvec", "cpu.f16.gemm", Float, ActFormat::None},
    {FERROX_KIND_BF16, "cpu.bf16.matvec", "cpu.bf16.gemm", Float, ActFormat::None},
    {FERROX_KIND_Q4_0, "cpu.q4_0.matvec", "cpu.q4_0.gemm", Int8, ActFormat::Q8_0},
    {FERROX_KIND_Q4_1, "cpu.q4_1.matvec", "cpu.q4_1.gemm", Int8, ActFormat::Q8_1},
    {FERROX_KIND_Q5_0, "cpu.q5_0.matvec", "cpu.q5_0.gemm", Int8, ActFormat::Q8_0},
    {FERROX_KIND_Q5_1, "cpu.q5_1.matvec", "cpu.q5_1.gemm", Int8, ActFormat::Q8_1},
    {FERROX_KIND_Q8_0, "cpu.q8_0.matvec", "cpu.q8_0.gemm", Int8, ActFormat::Q8_0},
    {FERROX_KIND_Q8_1, "cpu.q8_1.matvec", "cpu.q8_1.gemm", Int8, ActFormat::Q8_1},
    {FERROX_KIND_Q2_K, "cpu.q2_k.matvec", "cpu.q2_k.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_Q3_K, "cpu.q3_k.matvec", "cpu.q3_k.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_Q4_K, "cpu.q4_k.matvec", "cpu.q4_k.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_Q5_K, "cpu.q5_k.matvec", "cpu.q5_k.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_Q6_K, "cpu.q6_k.matvec", "cpu.q6_k.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_Q8_K, "cpu.q8_k.matvec", "cpu.q8_k.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_IQ2_XXS, "cpu.iq2_xxs.matvec", "cpu.iq2_xxs.gemm", Float, ActFormat::None},
    {FERROX_KIND_IQ2_XS, "cpu.iq2_xs.matvec", "cpu.iq2_xs.gemm", Float, ActFormat::None},
    {FERROX_KIND_IQ3_XXS, "cpu.iq3_xxs.matvec", "cpu.iq3_xxs.gemm", Float, ActFormat::None},
    {FERROX_KIND_IQ1_S, "cpu.iq1_s.matvec", "cpu.iq1_s.gemm", Float, ActFormat::None},
    {FERROX_KIND_IQ4_NL, "cpu.iq4_nl.matvec", "cpu.iq4_nl.gemm", Int8, ActFormat::Q8_0},
    {FERROX_KIND_IQ3_S, "cpu.iq3_s.matvec", "cpu.iq3_s.gemm", Float, ActFormat::None},
    {FERROX_KIND_IQ2_S, "cpu.iq2_s.matvec", "cpu.iq2_s.gemm", Float, ActFormat::None},
    {FERROX_KIND_IQ4_XS, "cpu.iq4_xs.matvec", "cpu.iq4_xs.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_IQ1_M, "cpu.iq1_m.matvec", "cpu.iq1_m.gemm", Float, ActFormat::None},
    {FERROX_KIND_MXFP4, "cpu.mxfp4.matvec", "cpu.mxfp4.gemm", Int8, ActFormat::Q8_0},
}};

// One source of truth, checked: the int8 rows say how they quantize, the
// float rows quantize nothing.
constexpr bool acts_match_paths() {
    for (const auto& k : kTable)
        if ((k.path == Int8) != (k.acts != ActFormat::None)) return false;
    return true;
}
static_assert(acts_match_paths());

}  // namespace

std::span<const CpuKernel> kernel_table() { return kTable; }

const CpuKernel* find_kernel(ferrox_kind kind) {
    for (const auto& k : kTable)
        if (k.kind == kind) return &k;
    return nullptr;
}

}  // namespace ferrox::cpu
