// How attention_resident and attention_cells spread a short batch over the
// GPU (flash-decoding).
//
// One block per (query row, head) leaves most SMs idle in decode: 8-32 heads
// against 100+ SMs, each block walking thousands of cache positions alone.
// When the blocks are fewer than the SMs and the span is long, each (row,
// head) is cut into contiguous chunks of positions, one block per chunk, and
// a second kernel merges the chunks' softmax parts. Plain C++ (no CUDA): the
// backend, the kernels and the tests (CPU and GPU) all choose the same split.
#pragma once

#include <cstdint>

namespace ferrox::cuda {

// Spans up to this many positions run single-pass: a split's extra launch
// and scratch round trip would cost more than the idle SMs.
inline constexpr uint64_t kAttentionSplitMinSpan = 256;
// Every chunk keeps at least this many positions (8 per warp of the block).
inline constexpr uint64_t kAttentionMinChunk = 64;
// Upper bound on chunks per (row, head): bounds the merge's shared memory
// and the scratch.
inline constexpr uint32_t kMaxAttentionSplits = 64;
// Blocks per SM the split aims for: two resident blocks hide each other's
// memory latency; more adds merge work for no gain.
inline constexpr uint64_t kAttentionBlocksPerSm = 2;

// Positions the last (longest-seeing) query row attends to.
constexpr uint64_t attention_longest_span(uint32_t n_query, uint32_t pos0, uint32_t window) {
    const uint64_t seen = uint64_t{pos0} + n_query;
    return window > 0 && window < seen ? window : seen;
}

// Chunks per (row, head): 1 (single pass) unless n_query * n_head blocks
// leave SMs idle and the longest span exceeds kAttentionSplitMinSpan; then
// enough to give every SM kAttentionBlocksPerSm blocks, within
// kAttentionMinChunk positions per chunk and kMaxAttentionSplits.
// attention_cells gives `span` (its desc's max_span) directly.
constexpr uint32_t attention_splits_for_span(uint32_t n_query, uint32_t n_head, uint64_t span,
                                             uint32_t sm_count) {
    const uint64_t blocks = uint64_t{n_query} * n_head;
    if (blocks == 0 || blocks >= sm_count || span <= kAttentionSplitMinSpan) return 1;
    uint64_t splits = (kAttentionBlocksPerSm * sm_count + blocks - 1) / blocks;
    if (splits > span / kAttentionMinChunk) splits = span / kAttentionMinChunk;
    if (splits > kMaxAttentionSplits) splits = kMaxAttentionSplits;
    return splits < 2 ? 1 : static_cast<uint32_t>(splits);
}

constexpr uint32_t attention_splits(uint32_t n_query, uint32_t pos0, uint32_t window,
                                    uint32_t n_head, uint32_t sm_count) {
    return attention_splits_for_span(n_query, n_head, attention_longest_span(n_query, pos0, window),
                                     sm_count);
}

// Floats of split scratch: per (row, head, chunk) its max, its sum and its
// unnormalised output of head_dim_v. Since splits are only chosen while
// n_query * n_head < sm_count, this stays below
// (2 * sm_count + sm_count) * (2 + head_dim_v) floats: ~0.8 MiB on 132 SMs
// at head_dim_v 512.
constexpr uint64_t attention_split_scratch_floats(uint32_t n_query, uint32_t n_head,
                                                  uint32_t head_dim_v, uint32_t splits) {
    return uint64_t{n_query} * n_head * splits * (2 + uint64_t{head_dim_v});
}

}  // namespace ferrox::cuda
