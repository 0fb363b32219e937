#include "attention/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ferrox/quant_kind.h"

namespace ferrox::cpu {
namespace {

// A split below this many positions costs more to merge than it saves.
constexpr uint32_t kMinSplitPositions = 128;

struct Geometry {
    uint32_t group;
    size_t k_stride, v_stride, q_row, out_row;
};

// The visible positions of query row `row`: [first, last].
uint32_t first_visible(const ferrox_attention_desc& d, uint32_t row) {
    const uint32_t pos = d.pos0 + row;
    return d.window && pos + 1 > d.window ? pos + 1 - d.window : 0;
}

// ... and the last: its own position, or up to `lookahead` further (ABI 1.7,
// non-causal), never past the call's last row. `lookahead` is 0 for a
// descriptor too short to hold it.
uint32_t last_visible(const ferrox_attention_desc& d, uint32_t lookahead, uint32_t row) {
    const uint32_t pos = d.pos0 + row, end = d.pos0 + d.n_query - 1;
    return end - pos > lookahead ? pos + lookahead : end;
}

// Decode is one query row and few KV heads: too few tasks for the pool. Then
// each row's positions are split into contiguous parts, merged afterwards.
uint32_t splits_for(const ferrox_attention_desc& d, uint32_t lookahead, unsigned threads) {
    const uint64_t tasks = uint64_t{d.n_query} * d.n_head_kv;
    if (threads < 2 || tasks >= 2ull * threads) return 1;
    uint32_t longest = 0;  // one row when tasks are few: the widest span of the first and last
    for (const uint32_t row : {0u, d.n_query - 1})
        longest = std::max(longest, last_visible(d, lookahead, row) - first_visible(d, row) + 1);
    return std::clamp<uint32_t>(longest / kMinSplitPositions, 1, 2 * threads);
}

// Element `index` of a cache of `kind` (a block's first element for a block
// kind: run_attention checked that heads are whole blocks).
const void* element(const void* cache, size_t index, ferrox_kind kind) {
    const KindTraits* k = kind_traits(kind);
    return static_cast<const std::byte*>(cache) + index / k->block_elements * k->block_bytes;
}

// kind's place in kAttentionKinds, or kAttentionKindCount when absent.
size_t kind_index(ferrox_kind kind) {
    size_t i = 0;
    while (i < kAttentionKindCount && kAttentionKinds[i] != kind) ++i;
    return i;
}

// Every name attention_kernel_name gives, built once: "cpu.attention.<k>"
// for one kind, "cpu.attention.k_<k>.v_<v>" for a pair.
struct KernelNames {
    std::string names[kAttentionKindCount][kAttentionKindCount];
    KernelNames() {
        for (size_t k = 0; k < kAttentionKindCount; ++k)
            for (size_t v = 0; v < kAttentionKindCount; ++v) {
                const std::string key = kAttentionKindNames[k];
                const std::string value = kAttentionKindNames[v];
                names[k][v] =
                    k == v ? "cpu.attention." + key : "cpu.attention.k_" + key + ".v_" + value;
            }
    }
};

}  // namespace

const char* attention_kernel_name(ferrox_kind key_kind, ferrox_kind value_kind) {
    static const KernelNames table;
    const size_t k = kind_index(key_kind), v = kind_index(value_kind);
    if (k == kAttentionKindCount || v == kAttentionKindCount) return nullptr;
    return table.names[k][v].c_str();
}

bool run_attention(ThreadPool& pool, const AttentionKernels& kernels,
                   const ferrox_attention_desc& desc, const char** error) {
    // A 1.1 to 1.3 core's descriptor ends before softcap: not capped.
    if (desc.struct_size < offsetof(ferrox_attention_desc, out) + sizeof desc.out) {
        *error = "attention: descriptor is shorter than ABI 1.1's (struct_size too small)";
        return false;
    }
    const float softcap =
        desc.struct_size >= offsetof(ferrox_attention_desc, softcap) + sizeof desc.softcap
            ? desc.softcap
            : 0.0f;
    if (!(softcap >= 0.0f) || !std::isfinite(softcap)) {
        *error = "attention: softcap must be a finite value >= 0 (0: not capped)";
        return false;
    }
    // ABI 1.5; a shorter descriptor has none.
    const float* const sinks =
        desc.struct_size >= offsetof(ferrox_attention_desc, sinks) + sizeof desc.sinks ? desc.sinks
                                                                                       : nullptr;
    // ABI 1.7; a shorter descriptor attends causally.
    const uint32_t lookahead =
        desc.struct_size >= offsetof(ferrox_attention_desc, lookahead) + sizeof desc.lookahead
            ? desc.lookahead
            : 0;
    if (!desc.q || !desc.keys || !desc.values || !desc.out) {
        *error = "attention: null q, keys, values or out";
        return false;
    }
    if (desc.n_head == 0 || desc.n_head_kv == 0 || desc.n_head % desc.n_head_kv != 0 ||
        desc.head_dim_k == 0 || desc.head_dim_v == 0) {
        *error = "attention: n_head must be a positive multiple of n_head_kv, head dims positive";
        return false;
    }
    // ABI 1.8; a shorter descriptor's values are of the keys' kind.
    const ferrox_kind value_kind =
        desc.struct_size >= offsetof(ferrox_attention_desc, value_kind) + sizeof desc.value_kind
            ? desc.value_kind
            : desc.kv_kind;
    const size_t k_index = kind_index(desc.kv_kind), v_index = kind_index(value_kind);
    if (k_index == kAttentionKindCount || v_index == kAttentionKindCount) {
        *error = "attention: the K and V cache kinds must each be F32, F16, Q8_0 or Q4_0";
        return false;
    }
    const AttendGroup kernel = kernels.by_kinds[k_index][v_index];
    // A block kind's rows are whole blocks per head: the kernels step a head
    // by blocks and never split one.
    if (desc.head_dim_k % kind_traits(desc.kv_kind)->block_elements != 0 ||
        desc.head_dim_v % kind_traits(value_kind)->block_elements != 0) {
        *error = "attention: a Q8_0 or Q4_0 K or V cache needs head dims that are multiples of 32";
        return false;
    }
    if (desc.n_query == 0) return true;
    const Geometry g{desc.n_head / desc.n_head_kv, size_t{desc.n_head_kv} * desc.head_dim_k,
                     size_t{desc.n_head_kv} * desc.head_dim_v,
                     size_t{desc.n_head} * desc.head_dim_k, size_t{desc.n_head} * desc.head_dim_v};
    const uint32_t splits = splits_for(desc, lookahead, pool.size());
    const uint64_t units = uint64_t{desc.n_query} * desc.n_head_kv;  // (row, KV head) pairs
    // Sinks join each head's softmax denominator once, so even an unsplit
    // row goes through the merge, which adds them.
    const bool merge = splits > 1 || sinks != nullptr;

    // When merging, part s of unit u writes its normalised output, max and sum
    // here; the merge below weighs parts by sum * exp(max - overall max).
    // (Plain pointers into the caller's buffers: a thread_local named inside
    // the lambda would be each worker's own, empty one.)
    thread_local std::vector<float> part_buffer, max_buffer, sum_buffer;
    if (merge) {
        part_buffer.resize(units * splits * g.group * desc.head_dim_v);
        max_buffer.resize(units * splits * g.group);
        sum_buffer.resize(units * splits * g.group);
    }
    float* const parts = part_buffer.data();
    float* const maxima = max_buffer.data();
    float* const sums = sum_buffer.data();

    // Grain 1: a causal row's cost grows with its position, so equal splits
    // would leave the thread with the last rows working alone.
    pool.parallel_for(units * splits, 1, [&](uint64_t begin, uint64_t end) {
        thread_local std::vector<float> scores;
        for (uint64_t t = begin; t < end; ++t) {
            const uint64_t unit = t / splits;
            const auto part = static_cast<uint32_t>(t % splits);
            const auto row = static_cast<uint32_t>(unit / desc.n_head_kv);
            const auto kv_head = static_cast<uint32_t>(unit % desc.n_head_kv);
            const uint32_t first = first_visible(desc, row);
            const uint32_t span = last_visible(desc, lookahead, row) - first + 1;
            const uint32_t from = first + static_cast<uint32_t>(uint64_t{span} * part / splits);
            const uint32_t to = first + static_cast<uint32_t>(uint64_t{span} * (part + 1) / splits);
            const size_t slot = (unit * splits + part) * g.group;
            if (from == to) {  // an empty part (a short row): weight zero in the merge
                std::fill_n(maxima + slot, g.group, 0.0f);
                std::fill_n(sums + slot, g.group, 0.0f);
                continue;
            }
            const size_t need = size_t{g.group} * (to - from);
            if (scores.size() < need) scores.resize(need);
            const uint32_t head0 = kv_head * g.group;
            AttentionTask task{desc.q + row * g.q_row + size_t{head0} * desc.head_dim_k,
                               element(desc.keys, size_t{kv_head} * desc.head_dim_k, desc.kv_kind),
                               element(desc.values, size_t{kv_head} * desc.head_dim_v, value_kind),
                               g.k_stride,
                               g.v_stride,
                               from,
                               to - 1,
                               g.group,
                               desc.head_dim_k,
                               desc.head_dim_v,
                               desc.scale,
                               scores.data(),
                               desc.out + row * g.out_row + size_t{head0} * desc.head_dim_v};
            task.softcap = softcap;
            if (merge) {
                task.out = parts + slot * desc.head_dim_v;
                task.max_score = maxima + slot;
                task.exp_sum = sums + slot;
            }
            kernel(task);
        }
    });
    if (!merge) return true;

    for (uint64_t unit = 0; unit < units; ++unit) {
        const auto row = static_cast<uint32_t>(unit / desc.n_head_kv);
        const auto kv_head = static_cast<uint32_t>(unit % desc.n_head_kv);
        for (uint32_t h = 0; h < g.group; ++h) {
            const uint32_t head = kv_head * g.group + h;
            float overall = sinks ? sinks[head] : -INFINITY;
            for (uint32_t s = 0; s < splits; ++s) {
                const size_t slot = (unit * splits + s) * g.group + h;
                if (sums[slot] > 0.0f) overall = std::max(overall, maxima[slot]);
            }
            float* out = desc.out + row * g.out_row + size_t{head} * desc.head_dim_v;
            std::fill_n(out, desc.head_dim_v, 0.0f);
            // A sink is one more exponential in the sum, with no value.
            float total = sinks ? std::exp(sinks[head] - overall) : 0.0f;
            for (uint32_t s = 0; s < splits; ++s) {
                const size_t slot = (unit * splits + s) * g.group + h;
                if (sums[slot] <= 0.0f) continue;
                const float weight = sums[slot] * std::exp(maxima[slot] - overall);
                const float* part = parts + slot * desc.head_dim_v;
                for (uint32_t i = 0; i < desc.head_dim_v; ++i) out[i] += weight * part[i];
                total += weight;
            }
            const float inverse = 1.0f / total;
            for (uint32_t i = 0; i < desc.head_dim_v; ++i) out[i] *= inverse;
        }
    }
    return true;
}

}  // namespace ferrox::cpu
