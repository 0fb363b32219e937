// MATVEC and tiled GEMM kernels, instantiated from the capability table.
//
// One template does both: a warp owns one weight row and walks it granule by
// granule (32 weights, see block_decode.cuh), lane i taking granules i, i+32,
// ...; each decoded granule is multiplied into a tile of `Tile` activations
// before the next is read, so GEMM reads every weight block once per tile
// instead of once per activation. MATVEC is the Tile = 1 case.
// Correct first: byte loads and L1-cached activations, no tensor cores yet.
#include <algorithm>
#include <cstddef>

#include "block_decode.cuh"
#include "capability_table.h"
#include "kernels.h"
#include "row_tile.cuh"

namespace ferrox::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // one warp per row
constexpr uint64_t kMaxGridY = 65535;

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

// Y[first + j][row] = dot(W[row], X[first + j]) for j < min(Tile, n - first),
// first = blockIdx.y * Tile. Every (position, row) pair in range is written.
template <ferrox_kind Kind, int Tile>
__global__ void __launch_bounds__(kRowsPerBlock* kWarpSize)
    row_tile_kernel(const uint8_t* __restrict__ weights, uint64_t rows, uint64_t cols,
                    uint64_t row_bytes, const float* __restrict__ x, uint64_t n,
                    float* __restrict__ y) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const uint64_t row =
        static_cast<uint64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
    if (row >= rows) return;  // warp-uniform: the shuffles below see whole warps
    const uint64_t first = static_cast<uint64_t>(blockIdx.y) * Tile;
    const int count = static_cast<int>(n - first < Tile ? n - first : Tile);

    float acc[Tile];
    lane_partial_dots<Kind, Tile>(weights + row * row_bytes, cols, x + first * cols, count, lane,
                                  acc);

#pragma unroll
    for (int j = 0; j < Tile; ++j) {
        const float total = warp_sum(acc[j]);
        if (lane == 0 && j < count) y[(first + j) * rows + row] = total;
    }
}

template <ferrox_kind Kind, int Tile>
cudaError_t launch_row_tiles(const DeviceWeightView& weight, const float* x, uint64_t n, float* y,
                             cudaStream_t stream) {
    if (weight.rows == 0 || n == 0) return cudaSuccess;
    const uint64_t row_blocks = (weight.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    if (row_blocks > 0x7fffffffULL) return cudaErrorInvalidValue;
    // grid.y is capped at 65535 tiles: walk longer batches in slices.
    const uint64_t positions_per_launch = kMaxGridY * Tile;
    for (uint64_t start = 0; start < n; start += positions_per_launch) {
        const uint64_t here = std::min(positions_per_launch, n - start);
        const dim3 grid(static_cast<unsigned>(row_blocks),
                        static_cast<unsigned>((here + Tile - 1) / Tile));
        row_tile_kernel<Kind, Tile><<<grid, kRowsPerBlock * kWarpSize, 0, stream>>>(
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
