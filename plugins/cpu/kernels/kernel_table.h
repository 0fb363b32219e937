// The CPU plugin's capability table: every kind in the core's kind table has
// a MATVEC and a GEMM kernel here, on one of two paths (see isa_kernels.h).
// kernel_for(), make_view() and every ISA file's decoder tables read it; the
// static_asserts here and in isa_kernels_impl.inc hold them to it at compile
// time, so the kernel the registry names is the one that runs.
#pragma once

#include <array>

#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"
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

namespace kernel_rows {
using enum DataPath;

// The acts column follows ggml-cpu.c's type_traits_cpu[].vec_dot_type: Q8_K for
// the K-quants and IQ4_XS, Q8_1 for Q4_1/Q5_1, Q8_0 for the other 32-blocks.
// Q8_K weights (no ggml dot of their own) take Q8_K too; TQ1_0 / TQ2_0 Q8_K,
// NVFP4 and Q1_0 Q8_0, as ggml-cpu.c gives them. The codebook
// i-quants run on f32 here, so they quantize nothing.
inline constexpr std::array<CpuKernel, kAllKinds.size()> kCpuKernels{{
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
    {FERROX_KIND_TQ1_0, "cpu.tq1_0.matvec", "cpu.tq1_0.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_TQ2_0, "cpu.tq2_0.matvec", "cpu.tq2_0.gemm", Int8, ActFormat::Q8_K},
    {FERROX_KIND_NVFP4, "cpu.nvfp4.matvec", "cpu.nvfp4.gemm", Int8, ActFormat::Q8_0},
    {FERROX_KIND_Q1_0, "cpu.q1_0.matvec", "cpu.q1_0.gemm", Int8, ActFormat::Q8_0},
}};

// Row i is kind i of the core's table: every kind has its kernels, once.
constexpr bool rows_follow_kind_table() {
    for (size_t i = 0; i < kCpuKernels.size(); ++i)
        if (kCpuKernels[i].kind != kAllKinds[i].id) return false;
    return true;
}
static_assert(rows_follow_kind_table(), "kCpuKernels must list quant_kind.h's kinds, in order");

// The int8 rows say how they quantize, the float rows quantize nothing; a
// weight block is a whole number of activation blocks (the tiles read both
// per 16 columns). NVFP4 (64) and Q1_0 (128) take ggml's Q8_0 (32), the
// other int8 kinds an activation block of exactly their own size, which the
// fused kernels need (checked beside them in isa_kernels_impl.inc).
constexpr bool acts_match_paths() {
    for (const auto& k : kCpuKernels) {
        if ((k.path == Int8) != (k.acts != ActFormat::None)) return false;
        if (k.path == Int8 && kind_traits(k.kind)->block_elements % act_block_elements(k.acts) != 0)
            return false;
    }
    return true;
}
static_assert(acts_match_paths(), "an int8 row's blocks must be whole activation blocks");

}  // namespace kernel_rows

using kernel_rows::kCpuKernels;

// nullptr: no kernel, use the fallback.
constexpr const CpuKernel* find_kernel(ferrox_kind kind) {
    for (const auto& k : kCpuKernels)
        if (k.kind == kind) return &k;
    return nullptr;
}

// What runs for kinds without a kernel: the core's reference dequantizer, then
// an f32 dot. Every kind the core knows has a kernel (rows_follow_kind_table),
// and weight_prepare refuses the others, so this name is declared in the
// backend table but never runs (make_view throws rather than take it).
inline constexpr const char* kFallbackName = "f32 dequant-dot";

}  // namespace ferrox::cpu
