// Attention over the host KV cache (ABI 1.1's `attention` entry): the
// threading around one per-ISA routine that handles one query row against
// one KV head for all the query heads that share it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferrox/backend_abi.h"
#include "thread_pool.h"

namespace ferrox::cpu {

// Kernel names per KV cache kind, as kernel_for reports them.
inline constexpr const char* kAttentionF32 = "cpu.attention.f32";
inline constexpr const char* kAttentionF16 = "cpu.attention.f16";
inline constexpr const char* kAttentionQ8_0 = "cpu.attention.q8_0";
inline constexpr const char* kAttentionQ4_0 = "cpu.attention.q4_0";

// One query row against one KV head: `group` query heads (head_dim_k apart in
// `q`, head_dim_v apart in `out`) over cache positions [first, last].
struct AttentionTask {
    const float* q;
    const void* keys;  // row p of this KV head at keys + p * k_stride elements
    const void* values;
    size_t k_stride, v_stride;
    uint32_t first, last, group, head_dim_k, head_dim_v;
    float scale;
    float* scores;  // group * (last - first + 1) floats of scratch
    float* out;
    // Per head, when not null: the largest scaled score and the softmax's sum
    // of exponentials, which let partial results over split positions be
    // merged (out is normalised over [first, last] either way).
    float* max_score = nullptr;
    float* exp_sum = nullptr;
    // > 0: each scaled score becomes tanh(s / softcap) * softcap (ABI 1.4).
    float softcap = 0.0f;
};

using AttendGroup = void (*)(const AttentionTask& task);

// One ISA file's routines, per KV cache element kind.
struct AttentionKernels {
    AttendGroup f32;   // float cache
    AttendGroup f16;   // IEEE half cache, widened as it is read
    AttendGroup q8_0;  // ggml q8_0 blocks, dequantized per block as they are read
    AttendGroup q4_0;  // ggml q4_0 blocks, likewise
};

// The kernel name for a KV cache of `kind`, or nullptr when there is none.
const char* attention_kernel_name(ferrox_kind kind);

AttentionKernels attention_kernels_portable();
AttentionKernels attention_kernels_avx2();
AttentionKernels attention_kernels_avx512();

// Checks the descriptor (null pointers, head counts, cache kind, head dims a
// block kind can split) and runs it.
// Returns false with `error` filled for a malformed descriptor.
bool run_attention(ThreadPool& pool, const AttentionKernels& kernels,
                   const ferrox_attention_desc& desc, const char** error);

}  // namespace ferrox::cpu
