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

// MATVEC for every weight kind block_decode.cuh decodes; GEMM (one weight
// read per tile of activations) for every quantized one of them: the tiled
// template is the MATVEC template with a wider tile, so any kind with a
// granule decoder gets it unchanged. The float kinds have no GEMM row and run
// GEMM as per-position matvecs (kGemmFallback). The rows after them are the
// resident-decoding ops of ABI 1.2 (resident_kernels.cu).
inline constexpr auto kKernels = std::to_array<KernelEntry>({
    // MATVEC / GEMM rows: block_decode.cuh decodes each kind.
    {FERROX_OP_MATVEC, FERROX_KIND_F32, "cuda_matvec_f32"},
    {FERROX_OP_MATVEC, FERROX_KIND_F16, "cuda_matvec_f16"},
    {FERROX_OP_MATVEC, FERROX_KIND_BF16, "cuda_matvec_bf16"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q8_0, "cuda_matvec_q8_0"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q4_0, "cuda_matvec_q4_0"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q4_1, "cuda_matvec_q4_1"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q5_0, "cuda_matvec_q5_0"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q5_1, "cuda_matvec_q5_1"},
    {FERROX_OP_MATVEC, FERROX_KIND_IQ4_NL, "cuda_matvec_iq4_nl"},
    {FERROX_OP_MATVEC, FERROX_KIND_IQ4_XS, "cuda_matvec_iq4_xs"},
    {FERROX_OP_MATVEC, FERROX_KIND_MXFP4, "cuda_matvec_mxfp4"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q2_K, "cuda_matvec_q2_k"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q3_K, "cuda_matvec_q3_k"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q4_K, "cuda_matvec_q4_k"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q5_K, "cuda_matvec_q5_k"},
    {FERROX_OP_MATVEC, FERROX_KIND_Q6_K, "cuda_matvec_q6_k"},
    // Float GEMM too: MoE routers (F32) score a whole prefill chunk at once,
    // and F16/BF16 models would otherwise prefill per position.
    {FERROX_OP_GEMM, FERROX_KIND_F32, "cuda_gemm_tiled_f32"},
    {FERROX_OP_GEMM, FERROX_KIND_F16, "cuda_gemm_tiled_f16"},
    {FERROX_OP_GEMM, FERROX_KIND_BF16, "cuda_gemm_tiled_bf16"},
    {FERROX_OP_GEMM, FERROX_KIND_Q8_0, "cuda_gemm_tiled_q8_0"},
    {FERROX_OP_GEMM, FERROX_KIND_Q4_0, "cuda_gemm_tiled_q4_0"},
    {FERROX_OP_GEMM, FERROX_KIND_Q4_1, "cuda_gemm_tiled_q4_1"},
    {FERROX_OP_GEMM, FERROX_KIND_Q5_0, "cuda_gemm_tiled_q5_0"},
    {FERROX_OP_GEMM, FERROX_KIND_Q5_1, "cuda_gemm_tiled_q5_1"},
    {FERROX_OP_GEMM, FERROX_KIND_IQ4_NL, "cuda_gemm_tiled_iq4_nl"},
    {FERROX_OP_GEMM, FERROX_KIND_IQ4_XS, "cuda_gemm_tiled_iq4_xs"},
    {FERROX_OP_GEMM, FERROX_KIND_MXFP4, "cuda_gemm_tiled_mxfp4"},
    {FERROX_OP_GEMM, FERROX_KIND_Q2_K, "cuda_gemm_tiled_q2_k"},
    {FERROX_OP_GEMM, FERROX_KIND_Q3_K, "cuda_gemm_tiled_q3_k"},
    {FERROX_OP_GEMM, FERROX_KIND_Q4_K, "cuda_gemm_tiled_q4_k"},
    {FERROX_OP_GEMM, FERROX_KIND_Q5_K, "cuda_gemm_tiled_q5_k"},
    {FERROX_OP_GEMM, FERROX_KIND_Q6_K, "cuda_gemm_tiled_q6_k"},
    // Resident-decoding rows (ABI 1.2): elementwise ops are keyed on F32.
    {FERROX_OP_RMS_NORM, FERROX_KIND_F32, "cuda_rms_norm"},
    {FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, "cuda_add_rms_norm"},
    {FERROX_OP_ROPE, FERROX_KIND_F32, "cuda_rope"},
    {FERROX_OP_ADD, FERROX_KIND_F32, "cuda_add"},
    {FERROX_OP_SWIGLU, FERROX_KIND_F32, "cuda_swiglu"},
    {FERROX_OP_GEGLU, FERROX_KIND_F32, "cuda_geglu"},
    {FERROX_OP_SWIGLU_OAI, FERROX_KIND_F32, "cuda_swiglu_oai"},
    {FERROX_OP_CONVERT, FERROX_KIND_F32, "cuda_convert_f32"},
    {FERROX_OP_CONVERT, FERROX_KIND_F16, "cuda_convert_f16"},
    {FERROX_OP_ATTENTION, FERROX_KIND_F32, "cuda_attention_f32"},
    {FERROX_OP_ATTENTION, FERROX_KIND_F16, "cuda_attention_f16"},
    // GET_ROWS (embedding lookup) decodes rows with the MATVEC granule
    // decoder: one row per MATVEC kind (a test holds the two lists equal).
    {FERROX_OP_GET_ROWS, FERROX_KIND_F32, "cuda_get_rows_f32"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_F16, "cuda_get_rows_f16"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_BF16, "cuda_get_rows_bf16"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q8_0, "cuda_get_rows_q8_0"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q4_0, "cuda_get_rows_q4_0"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q4_1, "cuda_get_rows_q4_1"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q5_0, "cuda_get_rows_q5_0"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q5_1, "cuda_get_rows_q5_1"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_IQ4_NL, "cuda_get_rows_iq4_nl"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_IQ4_XS, "cuda_get_rows_iq4_xs"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_MXFP4, "cuda_get_rows_mxfp4"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q2_K, "cuda_get_rows_q2_k"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q3_K, "cuda_get_rows_q3_k"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q4_K, "cuda_get_rows_q4_k"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q5_K, "cuda_get_rows_q5_k"},
    {FERROX_OP_GET_ROWS, FERROX_KIND_Q6_K, "cuda_get_rows_q6_k"},
});

inline constexpr const char* kGemmFallback = "CUDA per-position matvec";
// Why FERROX_OP_DELTA_NET has no kernel here (describe_kernel's by_design).
inline constexpr const char* kDeltaNetElsewhere =
    "the delta rule runs on host memory: no CUDA delta_net entry (the next backend or the core "
    "runs it)";

constexpr const char* find_kernel(ferrox_op op, ferrox_kind kind) {
    for (const KernelEntry& entry : kKernels)
        if (entry.op == op && entry.kind == kind) return entry.name;
    return nullptr;
}

constexpr bool has_kernel(ferrox_op op, ferrox_kind kind) {
    return find_kernel(op, kind) != nullptr;
}

// Fills `out` (up to out->struct_size) the way the ABI's kernel_for() must:
// the kernel's name, or NULL with no by-design reason (a plain miss; for
// DELTA_NET, kDeltaNetElsewhere). Defined
// in capability_table.cpp so the tests link exactly what the plugin links.
void describe_kernel(ferrox_op op, ferrox_kind kind, ferrox_kernel_info* out);

// The same for attention over keys of `key_kind` and values of `value_kind`
// (ABI 1.8's attention_kinds): one kind is describe_kernel's ATTENTION; a
// pair is left to a host backend by design (the kernels template one element
// type for K and V).
void describe_attention_kinds(ferrox_kind key_kind, ferrox_kind value_kind,
                              ferrox_kernel_info* out);

}  // namespace ferrox::cuda
