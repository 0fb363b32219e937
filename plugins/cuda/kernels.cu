// MATVEC and tiled GEMM kernels, instantiated from the capability table.
//
// One template does both: a warp owns kRowsPerWarp<Kind> weight rows and walks
// each row granule by granule (32 weights, see block_decode.cuh), lane i taking
// granules i, i+32, ...; each decoded granule is multiplied into a tile of
// `Tile` activations before the next is read, so GEMM reads every weight
// block once per tile instead of once per activation. MATVEC is the Tile = 1
// case.
// The block stages the tile's activations in shared memory, one chunk of
// granules at a time, padded so the lanes' reads of consecutive granules fall
// in distinct banks: read from global memory, each lane's 32 consecutive
// floats made every load instruction touch 32 cache lines, and that (with
// the weights' byte loads) held an H200 to under 10% of its bandwidth.
// No tensor cores yet.
#include <algorithm>
#include <cstddef>

#include "block_decode.cuh"
#include "capability_table.h"
#include "kernels.h"
#include "row_tile.cuh"

namespace ferrox::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
// Rows per warp: they share the staged activations and their weight loads
// are in flight together. Measured on an H200 at 8192x28672 (ms, 1/2/4 rows):
// Q4_0 0.154/0.134/0.126, Q4_K 0.215/0.217/0.193, Q8_0 GEMM n=512
// 47.3/37.2/32.7; but F16 0.177/0.188/0.248, its wide rows' registers
// leaving one block per multiprocessor at 4.
template <ferrox_kind Kind>
constexpr int kRowsPerWarp =
    Kind == FERROX_KIND_F32 || Kind == FERROX_KIND_F16 || Kind == FERROX_KIND_BF16 ? 1 : 4;
template <ferrox_kind Kind>
constexpr int kRowsPerBlock = kWarpsPerBlock* kRowsPerWarp<Kind>;
constexpr uint64_t kMaxGridY = 65535;
// A staged granule: 32 floats and 4 of padding, so granule g starts at bank
// 4g mod 32 and eight lanes' 16-byte reads are conflict-free.
constexpr int kStagedGranuleFloats = kGranule + 4;
constexpr int kStagedGranules = 256;  // per block: 36 KiB of shared memory
// Granules per chunk: the tile's activations share the staging area.
template <int Tile>
constexpr int kChunkGranules = kStagedGranules / Tile;

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

// Y[first + j][row] = dot(W[row], X[first + j]) for j < min(Tile, n - first),
// first = blockIdx.y * Tile. Every (position, row) pair in range is written.
template <ferrox_kind Kind, int Tile>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    row_tile_kernel(const uint8_t* __restrict__ weights, uint64_t rows, uint64_t cols,
                    uint64_t row_bytes, const float* __restrict__ x, uint64_t n,
                    float* __restrict__ y) {
    static_assert(kStagedGranules % Tile == 0 && kChunkGranules<Tile> % kWarpSize == 0);
    constexpr int kChunk = kChunkGranules<Tile>;
    constexpr int kChunkFloats = kChunk * kGranule;
    __shared__ float4 staged_quads[kStagedGranules * kStagedGranuleFloats / 4];
    float* staged = reinterpret_cast<float*>(staged_quads);

    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    constexpr int kRows = kRowsPerWarp<Kind>;
    const uint64_t first_row = static_cast<uint64_t>(blockIdx.x) * kRowsPerBlock<Kind> +
                               static_cast<uint64_t>(warp) * kRows;
    const uint64_t first = static_cast<uint64_t>(blockIdx.y) * Tile;
    const int count = static_cast<int>(n - first < Tile ? n - first : Tile);
    const uint64_t granules = (cols + kGranule - 1) / kGranule;

    // Rows past the matrix's end repeat its last row (no branch keeps the
    // rows' loads apart); their sums are not written.
    const uint8_t* row_starts[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const uint64_t row = first_row + static_cast<uint64_t>(r);
        row_starts[r] = weights + (row < rows ? row : rows - 1) * row_bytes;
    }
    float acc[kRows][Tile];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int j = 0; j < Tile; ++j) acc[r][j] = 0.0f;

    for (uint64_t chunk = 0; chunk < granules; chunk += kChunk) {
        const uint64_t chunk_end = chunk + kChunk < granules ? chunk + kChunk : granules;
        __syncthreads();  // every warp is done with the previous chunk
                          // Coalesced reads; zeros past the row's end and past the batch, so a
                          // short float granule reads defined values.
#pragma unroll 8
        for (int i = static_cast<int>(threadIdx.x); i < Tile * kChunkFloats;
             i += kWarpsPerBlock * kWarpSize) {
            const int j = i / kChunkFloats;
            const int c = i % kChunkFloats;
            const uint64_t col = chunk * kGranule + static_cast<uint64_t>(c);
            const float value = j < count && col < cols ? x[(first + j) * cols + col] : 0.0f;
            staged[(j * kChunk + c / kGranule) * kStagedGranuleFloats + c % kGranule] = value;
        }
        __syncthreads();
        const ActivationGranules chunk_x{staged,
                                         static_cast<uint64_t>(kChunk) * kStagedGranuleFloats,
                                         kStagedGranuleFloats, chunk};
        lane_partial_dots<Kind, Tile, kRows>(row_starts, cols, chunk, chunk_end, chunk_x, count,
                                             lane, acc);
    }

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const uint64_t row = first_row + static_cast<uint64_t>(r);
        if (row >= rows) break;  // warp-uniform: the shuffles see whole warps
#pragma unroll
        for (int j = 0; j < Tile; ++j) {
            const float total = warp_sum(acc[r][j]);
            if (lane == 0 && j < count) y[(first + j) * rows + row] = total;
        }
    }
}

template <ferrox_kind Kind, int Tile>
cudaError_t launch_row_tiles(const DeviceWeightView& weight, const float* x, uint64_t n, float* y,
                             cudaStream_t stream) {
    if (weight.rows == 0 || n == 0) return cudaSuccess;
    const uint64_t row_blocks = (weight.rows + kRowsPerBlock<Kind> - 1) / kRowsPerBlock<Kind>;
    if (row_blocks > 0x7fffffffULL) return cudaErrorInvalidValue;
    // grid.y is capped at 65535 tiles: walk longer batches in slices.
    const uint64_t positions_per_launch = kMaxGridY * Tile;
    for (uint64_t start = 0; start < n; start += positions_per_launch) {
        const uint64_t here = std::min(positions_per_launch, n - start);
        const dim3 grid(static_cast<unsigned>(row_blocks),
                        static_cast<unsigned>((here + Tile - 1) / Tile));
        row_tile_kernel<Kind, Tile><<<grid, kWarpsPerBlock * kWarpSize, 0, stream>>>(
            weight.data, weight.rows, weight.cols, weight.row_bytes, x + start * weight.cols, here,
            y + start * weight.rows);
        if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
    }
    return cudaSuccess;
}

// Walks the capability table at compile time: an entry instantiates and
// launches its kernel; a (op, kind) not in the table is cudaErrorNotSupported.
template <size_t Index = 0>
cudaError_t dispatch(ferrox_op op, const DeviceWeightView& weight, const float* x, uint64_t n,
                     float* y, cudaStream_t stream) {
    if constexpr (Index == kKernels.size()) {
        return cudaErrorNotSupported;
    } else {
        constexpr KernelEntry entry = kKernels[Index];
        if (entry.op == op && entry.kind == weight.kind) {
            if constexpr (entry.op == FERROX_OP_MATVEC || entry.op == FERROX_OP_GEMM)
                return launch_row_tiles<entry.kind, kTileFor<entry.op>>(weight, x, n, y, stream);
            else
                return cudaErrorNotSupported;
        }
        return dispatch<Index + 1>(op, weight, x, n, y, stream);
    }
}

}  // namespace

cudaError_t launch_matvec(const DeviceWeightView& weight, const float* x, float* y,
                          cudaStream_t stream) {
    return dispatch(FERROX_OP_MATVEC, weight, x, 1, y, stream);
}

cudaError_t launch_gemm(const DeviceWeightView& weight, const float* x, uint64_t n, float* y,
                        cudaStream_t stream) {
    return dispatch(FERROX_OP_GEMM, weight, x, n, y, stream);
}

cudaError_t check_kernel_image() {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, row_tile_kernel<FERROX_KIND_F32, 1>);
}

}  // namespace ferrox::cuda
