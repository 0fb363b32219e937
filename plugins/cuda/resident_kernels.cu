// The resident-decoding kernels of ABI 1.2: RMSNorm, RoPE, add, GLU, KV
// conversion, embedding rows and attention over device buffers. The math of
// each element lives in resident_ops.cuh (checked on the CPU by tests/cuda);
// this file adds the launch shapes and the parallel reductions.
// Kernels keyed by kind (CONVERT, GET_ROWS, ATTENTION) are instantiated from
// the capability table like kernels.cu's, so neither can drift from it.
// Correct first: plain float math, no vector loads or tensor cores.
#include <algorithm>
#include <cstddef>

#include "block_decode.cuh"
#include "capability_table.h"
#include "resident_kernels.h"
#include "resident_ops.cuh"
#include "row_tile.cuh"

namespace ferrox::cuda {
namespace {

// The ops without a kind are keyed on F32 in the table: hold it to them.
static_assert(has_kernel(FERROX_OP_RMS_NORM, FERROX_KIND_F32));
static_assert(has_kernel(FERROX_OP_ROPE, FERROX_KIND_F32));
static_assert(has_kernel(FERROX_OP_ADD, FERROX_KIND_F32));
static_assert(has_kernel(FERROX_OP_SWIGLU, FERROX_KIND_F32));
static_assert(has_kernel(FERROX_OP_GEGLU, FERROX_KIND_F32));
static_assert(has_kernel(FERROX_OP_SWIGLU_OAI, FERROX_KIND_F32));
static_assert(has_kernel(FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32));

constexpr int kElementThreads = 256;
// Grid-stride loops cover the rest; enough blocks to fill any current GPU.
constexpr uint64_t kMaxElementBlocks = 65536;
constexpr uint64_t kMaxGridX = 0x7fffffffULL;

__device__ __forceinline__ float warp_sum(float value) {
    // xor butterfly: every lane ends with the same bits (float + commutes).
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

unsigned element_blocks(uint64_t count) {
    const uint64_t blocks = (count + kElementThreads - 1) / kElementThreads;
    return static_cast<unsigned>(std::min(blocks, kMaxElementBlocks));
}

__device__ __forceinline__ uint64_t global_thread() {
    return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ uint64_t grid_threads() {
    return static_cast<uint64_t>(gridDim.x) * blockDim.x;
}

// ---- RMSNorm: one block per row ---------------------------------------------

// The sum of `value` over the block (blockDim.x a multiple of 32, at most
// 32 warps), the same in every thread. Ends with every thread past a barrier.
__device__ __forceinline__ float block_sum(float value) {
    __shared__ float warp_sums[32];
    value = warp_sum(value);
    if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = value;
    __syncthreads();
    float total = 0.0f;
    const unsigned warps = blockDim.x / kWarpSize;
    for (unsigned w = 0; w < warps; ++w) total += warp_sums[w];  // same order in every thread
    return total;
}

// x and y may alias: each thread reads its elements for the sum, every
// thread passes the barrier in block_sum, then each rewrites its own.
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ gamma, uint32_t dim,
                                float eps, float* y) {
    const uint64_t base = static_cast<uint64_t>(blockIdx.x) * dim;
    float sum = 0.0f;
    for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = x[base + i];
        sum += v * v;
    }
    const float scale = rms_scale(block_sum(sum), dim, eps);
    for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
        y[base + i] = rms_apply(x[base + i], scale, gamma[i]);
}

// The residual add and the next norm in one pass over the row: each thread
// updates its own elements of dst, then normalises exactly those (it reads
// back only what it wrote, so no barrier is needed beyond block_sum's).
__global__ void add_rms_norm_kernel(float* dst, const float* __restrict__ src, uint64_t src_stride,
                                    float alpha, const float* __restrict__ gamma, uint32_t dim,
                                    float eps, float* __restrict__ y) {
    const uint64_t base = static_cast<uint64_t>(blockIdx.x) * dim;
    const float* src_row = src + static_cast<uint64_t>(blockIdx.x) * src_stride;
    float sum = 0.0f;
    for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = dst[base + i] + alpha * src_row[i];
        dst[base + i] = v;
        sum += v * v;
    }
    const float scale = rms_scale(block_sum(sum), dim, eps);
    for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
        y[base + i] = rms_apply(dst[base + i], scale, gamma[i]);
}

// ---- elementwise ------------------------------------------------------------

// One thread per rotated pair: pairs of position p share cos/sin[p].
__global__ void rope_kernel(float* x, const float* __restrict__ cos, const float* __restrict__ sin,
                            uint64_t pairs, uint32_t n_heads, uint32_t head_dim, bool neox) {
    const uint32_t half = head_dim / 2;
    for (uint64_t t = global_thread(); t < pairs; t += grid_threads()) {
        const uint64_t head_index = t / half;  // over n_pos * n_heads
        const auto i = static_cast<uint32_t>(t % half);
        const uint64_t pos = head_index / n_heads;
        float* head = x + head_index * head_dim;
        uint32_t a = 0;
        uint32_t b = 0;
        rope_pair(i, head_dim, neox, a, b);
        float x0 = head[a];
        float x1 = head[b];
        rope_rotate_pair(x0, x1, cos[pos * half + i], sin[pos * half + i]);
        head[a] = x0;
        head[b] = x1;
    }
}

__global__ void add_kernel(float* dst, const float* src, uint64_t count, uint32_t dim,
                           uint64_t src_stride, float alpha) {
    for (uint64_t t = global_thread(); t < count; t += grid_threads()) {
        const uint64_t row = t / dim;
        const uint64_t i = t % dim;
        dst[t] += alpha * src[row * src_stride + i];
    }
}

template <ferrox_glu_kind Kind>
__global__ void glu_kernel(float* gate, const float* __restrict__ up, uint64_t count) {
    for (uint64_t t = global_thread(); t < count; t += grid_threads())
        gate[t] = Kind == FERROX_GLU_SWIGLU  ? swiglu(gate[t], up[t])
                  : Kind == FERROX_GLU_GEGLU ? geglu(gate[t], up[t])
                                             : swiglu_oai(gate[t], up[t]);
}

template <ferrox_kind Kind>
__global__ void convert_kernel(const float* __restrict__ src, void* dst, uint64_t count) {
    for (uint64_t t = global_thread(); t < count; t += grid_threads()) {
        if constexpr (Kind == FERROX_KIND_F32)
            static_cast<float*>(dst)[t] = src[t];
        else if constexpr (Kind == FERROX_KIND_F16)
            static_cast<uint16_t*>(dst)[t] = f32_to_f16_bits(src[t]);
        else
            static_assert(kUnsupportedKind<Kind>, "no CONVERT kernel for this kind");
    }
}

// ---- GET_ROWS: one block per looked-up row ----------------------------------

constexpr int kGetRowsThreads = 128;

template <ferrox_kind Kind>
__global__ void __launch_bounds__(kGetRowsThreads)
    get_rows_kernel(const uint8_t* __restrict__ weights, uint64_t cols, uint64_t row_bytes,
                    const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
    const uint64_t i = blockIdx.x;
    const uint8_t* row = weights + static_cast<uint64_t>(ids[i]) * row_bytes;
    float* dst = out + i * cols;
    const uint64_t granules = (cols + kGranule - 1) / kGranule;
    for (uint64_t g = threadIdx.x; g < granules; g += blockDim.x) {
        float w[kGranule];
        const int valid = decode_granule<Kind>(row, g, cols, w);
#pragma unroll
        for (int l = 0; l < kGranule; ++l)
            if (l < valid) dst[g * kGranule + static_cast<uint64_t>(l)] = scale * w[l];
    }
}

// ---- attention: one block per (query row, head[, chunk]) ---------------------
//
// The block's warps take its cache positions round-robin (warp w:
// first + w, first + w + kAttentionWarps, ...), each keeping an online
// softmax and its share of the weighted value sum in registers (lane owns
// value dims lane, lane + 32, ...). Scores are warp dot products over
// head_dim_k. The warps' parts are merged through shared memory at the end,
// so shared memory is independent of the context length.
//
// Split (flash-decoding, attention_split.h): block (row, head, chunk) walks
// only its chunk of the row's positions and stores the merged part of its
// warps unnormalised (max, sum, out) in the scratch; attention_merge_kernel
// then merges the chunks of each (row, head) the same way.

constexpr int kAttentionSlots = static_cast<int>(kMaxAttentionHeadDim) / kWarpSize;
constexpr int kMergeThreads = 128;

template <ferrox_kind Kind>
__device__ __forceinline__ float load_cache(const void* base, uint64_t index) {
    if constexpr (Kind == FERROX_KIND_F32)
        return static_cast<const float*>(base)[index];
    else if constexpr (Kind == FERROX_KIND_F16)
        return __half2float(static_cast<const __half*>(base)[index]);
    else
        static_assert(kUnsupportedKind<Kind>, "no ATTENTION kernel for this cache kind");
}

// Where split part `part` (= (row * n_head + head) * splits + chunk) keeps its
// state in a scratch of `parts` parts: maxes, then sums, then outputs.
struct SplitScratch {
    float* base;
    uint64_t parts;
    uint32_t head_dim_v;
    __device__ float* max_at(uint64_t part) const { return base + part; }
    __device__ float* sum_at(uint64_t part) const { return base + parts + part; }
    __device__ float* out_at(uint64_t part) const { return base + 2 * parts + part * head_dim_v; }
};

template <ferrox_kind Kind, bool Split>
__global__ void __launch_bounds__(kAttentionWarps* kWarpSize)
    attention_kernel(AttentionLaunch a, uint32_t splits, SplitScratch scratch) {
    __shared__ float q_shared[kMaxAttentionHeadDim];
    __shared__ float part_max[kAttentionWarps];
    __shared__ float part_sum[kAttentionWarps];
    __shared__ float part_out[kAttentionWarps][kMaxAttentionHeadDim];

    const uint32_t chunk = Split ? blockIdx.x % splits : 0;
    const uint32_t row_head = Split ? blockIdx.x / splits : blockIdx.x;
    const uint32_t head = row_head % a.n_head;
    const uint32_t row = row_head / a.n_head;
    const uint32_t kv_head = head / (a.n_head / a.n_head_kv);
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;

    const float* q = a.q + (static_cast<uint64_t>(row) * a.n_head + head) * a.head_dim_k;
    for (uint32_t i = threadIdx.x; i < a.head_dim_k; i += blockDim.x) q_shared[i] = q[i];
    __syncthreads();

    uint32_t first = 0;
    uint32_t last = 0;
    if (a.spans != nullptr)
        attention_cells_span(a.spans, a.n_index, row, first, last);
    else
        attention_span(a.pos0, row, a.window, first, last);
    if constexpr (Split) attention_chunk(first, last, splits, chunk, first, last);
    const uint64_t k_row = static_cast<uint64_t>(a.n_head_kv) * a.head_dim_k;
    const uint64_t v_row = static_cast<uint64_t>(a.n_head_kv) * a.head_dim_v;
    const uint64_t k_head = static_cast<uint64_t>(kv_head) * a.head_dim_k;
    const uint64_t v_head = static_cast<uint64_t>(kv_head) * a.head_dim_v;

    SoftmaxState state = softmax_start();
    float acc[kAttentionSlots];
#pragma unroll
    for (int j = 0; j < kAttentionSlots; ++j) acc[j] = 0.0f;

    for (uint32_t p = first + static_cast<uint32_t>(warp); p <= last; p += kAttentionWarps) {
        // 1.3: p indexes the row's cell list; the same walk over cells.
        // Warp-uniform: every lane of a warp holds the same p.
        const uint64_t cell = a.cell_index != nullptr ? a.cell_index[p] : p;
        if (a.cell_index != nullptr && cell >= a.n_cells) continue;
        const uint64_t k_base = cell * k_row + k_head;
        float partial = 0.0f;
        for (uint32_t i = static_cast<uint32_t>(lane); i < a.head_dim_k; i += kWarpSize)
            partial += q_shared[i] * load_cache<Kind>(a.keys, k_base + i);
        const float score = soft_cap(warp_sum(partial) * a.scale, a.softcap);
        float weight = 0.0f;
        const float rescale = softmax_push(state, score, weight);
        const uint64_t v_base = cell * v_row + v_head;
#pragma unroll
        for (int j = 0; j < kAttentionSlots; ++j) {
            const uint32_t d = static_cast<uint32_t>(j * kWarpSize + lane);
            if (d < a.head_dim_v)
                acc[j] = acc[j] * rescale + weight * load_cache<Kind>(a.values, v_base + d);
        }
    }

    if (lane == 0) {
        part_max[warp] = state.max;
        part_sum[warp] = state.sum;
    }
#pragma unroll
    for (int j = 0; j < kAttentionSlots; ++j) {
        const uint32_t d = static_cast<uint32_t>(j * kWarpSize + lane);
        if (d < a.head_dim_v) part_out[warp][d] = acc[j];
    }
    __syncthreads();

    float factor[kAttentionWarps];
    // A split's chunks leave the sink to the merge kernel.
    const float sink = !Split && a.sinks != nullptr ? a.sinks[head] : -INFINITY;
    const float denominator =
        softmax_merge_factors(part_max, part_sum, kAttentionWarps, 1, factor, sink);
    if constexpr (Split) {
        // The chunk's part, unnormalised against its own max: the merge
        // rescales it. An empty chunk stores max -inf, sum 0, out 0.
        const uint64_t part = blockIdx.x;
        if (threadIdx.x == 0) {
            float total_max = -INFINITY;
            for (int w = 0; w < kAttentionWarps; ++w) total_max = fmaxf(total_max, part_max[w]);
            *scratch.max_at(part) = total_max;
            *scratch.sum_at(part) = denominator;
        }
        float* out = scratch.out_at(part);
        for (uint32_t d = threadIdx.x; d < a.head_dim_v; d += blockDim.x)
            out[d] = softmax_merge_output(&part_out[0][d], kMaxAttentionHeadDim, factor,
                                          kAttentionWarps, 1.0f);
    } else {
        float* out = a.out + (static_cast<uint64_t>(row) * a.n_head + head) * a.head_dim_v;
        for (uint32_t d = threadIdx.x; d < a.head_dim_v; d += blockDim.x)
            out[d] = softmax_merge_output(&part_out[0][d], kMaxAttentionHeadDim, factor,
                                          kAttentionWarps, denominator);
    }
}

// One block per (row, head): merges its `splits` chunk parts into out.
__global__ void __launch_bounds__(kMergeThreads)
    attention_merge_kernel(uint32_t splits, uint32_t head_dim_v, uint32_t n_head,
                           const float* __restrict__ sinks, SplitScratch scratch,
                           float* __restrict__ out) {
    __shared__ float factor[kMaxAttentionSplits];
    __shared__ float denominator;
    const uint64_t first_part = static_cast<uint64_t>(blockIdx.x) * splits;
    const float sink = sinks != nullptr ? sinks[blockIdx.x % n_head] : -INFINITY;
    if (threadIdx.x == 0)
        denominator = softmax_merge_factors(scratch.max_at(first_part), scratch.sum_at(first_part),
                                            splits, 1, factor, sink);
    __syncthreads();
    const float* parts_out = scratch.out_at(first_part);
    float* dst = out + static_cast<uint64_t>(blockIdx.x) * head_dim_v;
    for (uint32_t d = threadIdx.x; d < head_dim_v; d += blockDim.x)
        dst[d] = softmax_merge_output(parts_out + d, head_dim_v, factor, splits, denominator);
}

// ---- table-driven dispatch ----------------------------------------------------

// Calls launch.template operator()<Kind>() for the table's (op, kind) entry;
// cudaErrorNotSupported when the table lists none.
template <ferrox_op Op, size_t Index = 0, class Launch>
cudaError_t dispatch_kind(ferrox_kind kind, Launch&& launch) {
    if constexpr (Index == kKernels.size()) {
        return cudaErrorNotSupported;
    } else {
        constexpr KernelEntry entry = kKernels[Index];
        if constexpr (entry.op == Op) {
            if (entry.kind == kind) return launch.template operator()<entry.kind>();
        }
        return dispatch_kind<Op, Index + 1>(kind, launch);
    }
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, const float* gamma, uint64_t rows, uint32_t dim,
                            float eps, float* y, cudaStream_t stream) {
    if (rows == 0 || dim == 0) return cudaSuccess;
    if (rows > kMaxGridX) return cudaErrorInvalidValue;
    const uint32_t warps = rms_norm_warps(dim);
    rms_norm_kernel<<<static_cast<unsigned>(rows), warps * kWarpSize, 0, stream>>>(x, gamma, dim,
                                                                                   eps, y);
    return cudaGetLastError();
}

cudaError_t launch_add_rms_norm(float* dst, const float* src, uint64_t src_stride, float alpha,
                                const float* gamma, uint64_t rows, uint32_t dim, float eps,
                                float* y, cudaStream_t stream) {
    if (rows == 0 || dim == 0) return cudaSuccess;
    if (rows > kMaxGridX) return cudaErrorInvalidValue;
    const uint32_t warps = rms_norm_warps(dim);
    add_rms_norm_kernel<<<static_cast<unsigned>(rows), warps * kWarpSize, 0, stream>>>(
        dst, src, src_stride, alpha, gamma, dim, eps, y);
    return cudaGetLastError();
}

cudaError_t launch_rope(float* x, const float* cos, const float* sin, uint32_t n_pos,
                        uint32_t n_heads, uint32_t head_dim, bool neox, cudaStream_t stream) {
    const uint64_t pairs = static_cast<uint64_t>(n_pos) * n_heads * (head_dim / 2);
    if (pairs == 0) return cudaSuccess;
    rope_kernel<<<element_blocks(pairs), kElementThreads, 0, stream>>>(x, cos, sin, pairs, n_heads,
                                                                       head_dim, neox);
    return cudaGetLastError();
}

cudaError_t launch_add(float* dst, const float* src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha, cudaStream_t stream) {
    const uint64_t count = rows * dim;
    if (count == 0) return cudaSuccess;
    add_kernel<<<element_blocks(count), kElementThreads, 0, stream>>>(dst, src, count, dim,
                                                                      src_stride, alpha);
    return cudaGetLastError();
}

cudaError_t launch_glu(ferrox_glu_kind kind, float* gate, const float* up, uint64_t count,
                       cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    if (kind == FERROX_GLU_SWIGLU)
        glu_kernel<FERROX_GLU_SWIGLU>
            <<<element_blocks(count), kElementThreads, 0, stream>>>(gate, up, count);
    else if (kind == FERROX_GLU_GEGLU)
        glu_kernel<FERROX_GLU_GEGLU>
            <<<element_blocks(count), kElementThreads, 0, stream>>>(gate, up, count);
    else if (kind == FERROX_GLU_SWIGLU_OAI)
        glu_kernel<FERROX_GLU_SWIGLU_OAI>
            <<<element_blocks(count), kElementThreads, 0, stream>>>(gate, up, count);
    else
        return cudaErrorNotSupported;
    return cudaGetLastError();
}

cudaError_t launch_convert(const float* src, void* dst, ferrox_kind dst_kind, uint64_t count,
                           cudaStream_t stream) {
    return dispatch_kind<FERROX_OP_CONVERT>(dst_kind, [&]<ferrox_kind Kind>() {
        if (count == 0) return cudaSuccess;
        convert_kernel<Kind>
            <<<element_blocks(count), kElementThreads, 0, stream>>>(src, dst, count);
        return cudaGetLastError();
    });
}

cudaError_t launch_get_rows(const DeviceWeightView& weight, const int32_t* ids, uint64_t n,
                            float scale, float* out, cudaStream_t stream) {
    return dispatch_kind<FERROX_OP_GET_ROWS>(weight.kind, [&]<ferrox_kind Kind>() {
        if (n == 0) return cudaSuccess;
        if (n > kMaxGridX) return cudaErrorInvalidValue;
        get_rows_kernel<Kind><<<static_cast<unsigned>(n), kGetRowsThreads, 0, stream>>>(
            weight.data, weight.cols, weight.row_bytes, ids, scale, out);
        return cudaGetLastError();
    });
}

cudaError_t launch_attention(const AttentionLaunch& launch, uint32_t splits, float* split_scratch,
                             cudaStream_t stream) {
    return dispatch_kind<FERROX_OP_ATTENTION>(launch.kv_kind, [&]<ferrox_kind Kind>() {
        const uint64_t rows = static_cast<uint64_t>(launch.n_query) * launch.n_head;
        if (rows == 0) return cudaSuccess;
        const uint64_t blocks = rows * splits;
        if (splits == 0 || splits > kMaxAttentionSplits || blocks > kMaxGridX ||
            launch.n_head_kv == 0 || launch.n_head % launch.n_head_kv != 0 ||
            launch.head_dim_k > kMaxAttentionHeadDim || launch.head_dim_v > kMaxAttentionHeadDim ||
            (splits > 1 && split_scratch == nullptr))
            return cudaErrorInvalidValue;
        const SplitScratch scratch{split_scratch, blocks, launch.head_dim_v};
        if (splits == 1) {
            attention_kernel<Kind, false>
                <<<static_cast<unsigned>(blocks), kAttentionWarps * kWarpSize, 0, stream>>>(
                    launch, 1, scratch);
            return cudaGetLastError();
        }
        attention_kernel<Kind, true>
            <<<static_cast<unsigned>(blocks), kAttentionWarps * kWarpSize, 0, stream>>>(
                launch, splits, scratch);
        if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
        attention_merge_kernel<<<static_cast<unsigned>(rows), kMergeThreads, 0, stream>>>(
            splits, launch.head_dim_v, launch.n_head, launch.sinks, scratch, launch.out);
        return cudaGetLastError();
    });
}

}  // namespace ferrox::cuda
