#include "attention/attention.h"

#include <vector>

namespace ferrox::cpu {

bool run_attention(ThreadPool& pool, AttendGroup kernel, const ferrox_attention_desc& desc,
                   const char** error) {
    if (desc.struct_size < sizeof desc) {
        *error = "attention: descriptor is older than this plugin's (struct_size too small)";
        return false;
    }
    if (!desc.q || !desc.keys || !desc.values || !desc.out) {
        *error = "attention: null q, keys, values or out";
        return false;
    }
    if (desc.n_head == 0 || desc.n_head_kv == 0 || desc.n_head % desc.n_head_kv != 0 ||
        desc.head_dim_k == 0 || desc.head_dim_v == 0) {
        *error = "attention: n_head must be a positive multiple of n_head_kv, head dims positive";
        return false;
    }
    const uint32_t group = desc.n_head / desc.n_head_kv;
    const size_t k_stride = size_t{desc.n_head_kv} * desc.head_dim_k;
    const size_t v_stride = size_t{desc.n_head_kv} * desc.head_dim_v;
    const size_t q_row = size_t{desc.n_head} * desc.head_dim_k;
    const size_t out_row = size_t{desc.n_head} * desc.head_dim_v;
    const uint64_t tasks = uint64_t{desc.n_query} * desc.n_head_kv;
    // Grain 1: a causal row's cost grows with its position, so equal splits
    // would leave the thread with the last rows working alone.
    pool.parallel_for(tasks, 1, [&](uint64_t begin, uint64_t end) {
        thread_local std::vector<float> scores;
        for (uint64_t t = begin; t < end; ++t) {
            const auto row = static_cast<uint32_t>(t / desc.n_head_kv);
            const auto kv_head = static_cast<uint32_t>(t % desc.n_head_kv);
            const uint32_t pos = desc.pos0 + row;
            const uint32_t first = desc.window && pos + 1 > desc.window ? pos + 1 - desc.window : 0;
            const size_t need = size_t{group} * (pos - first + 1);
            if (scores.size() < need) scores.resize(need);
            const uint32_t head0 = kv_head * group;
            kernel({desc.q + row * q_row + size_t{head0} * desc.head_dim_k,
                    desc.keys + size_t{kv_head} * desc.head_dim_k,
                    desc.values + size_t{kv_head} * desc.head_dim_v, k_stride, v_stride, first, pos,
                    group, desc.head_dim_k, desc.head_dim_v, desc.scale, scores.data(),
                    desc.out + row * out_row + size_t{head0} * desc.head_dim_v});
        }
    });
    return true;
}

}  // namespace ferrox::cpu
