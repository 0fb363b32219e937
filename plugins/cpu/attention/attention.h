// Attention over the host KV cache (ABI 1.1's `attention` entry): the
// threading around one per-ISA routine that handles one query row against
// one KV head for all the query heads that share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "ferrox/backend_abi.h"
#include "thread_pool.h"

namespace ferrox::cpu {

// The KV cache kinds the kernels read, keys' or values', in table order.
inline constexpr ferrox_kind kAttentionKinds[] = {FERROX_KIND_F32, FERROX_KIND_F16,
                                                  FERROX_KIND_Q8_0, FERROX_KIND_Q4_0};
inline constexpr size_t kAttentionKindCount = std::size(kAttentionKinds);
// ... as kernel names spell them (as -ctk / -ctv do).
inline constexpr const char* kAttentionKindNames[] = {"f32", "f16", "q8_0", "q4_0"};
static_assert(std::size(kAttentionKindNames) == kAttentionKindCount);

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

// One ISA file's routines, per keys' kind and values' kind (kAttentionKinds'
// order): f32; f16 widened as it is read; ggml q8_0 and q4_0 blocks
// dequantized per block as they are read. Each pair is the same template
// (attention_impl.inc), so the float operations of a row depend on the
// kinds only through the values they read.
struct AttentionKernels {
    AttendGroup by_kinds[kAttentionKindCount][kAttentionKindCount];  // [key][value]
};

// The kernel name for keys of `key_kind` over values of `value_kind`
// ("cpu.attention.q8_0" for one kind, "cpu.attention.k_q8_0.v_f16" for
// two), or nullptr when either is not a kind the kernels read.
const char* attention_kernel_name(ferrox_kind key_kind, ferrox_kind value_kind);

AttentionKernels attention_kernels_portable();
AttentionKernels attention_kernels_avx2();
AttentionKernels attention_kernels_avx512();

// Checks the descriptor (null pointers, head counts, cache kinds, head dims a
// block kind can split) and runs it; values are of value_kind when the
// descriptor holds it (ABI 1.8), else of kv_kind.
// Returns false with `error` filled for a malformed descriptor.
bool run_attention(ThreadPool& pool, const AttentionKernels& kernels,
                   const ferrox_attention_desc& desc, const char** error);

}  // namespace ferrox::cpu
