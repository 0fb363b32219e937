// The work one lane of the MATVEC/GEMM kernel does, as host-and-device code:
// partial dot products of one weight row's granules lane, lane + 32, ... with
// a tile of up to `Tile` activations. The kernel (kernels.cu) adds the 32
// lanes' partials with warp shuffles; tests/cuda adds them on the CPU to check
// this indexing against the scalar reference on hosts without a GPU.
#pragma once

#include <cstdint>

#include "block_decode.cuh"

namespace ferrox::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr int kGemmTile = 8;  // activations sharing one decoded weight granule

// Activations per tile for each op the kernel template serves.
template <ferrox_op Op>
inline constexpr int kTileFor = Op == FERROX_OP_GEMM ? kGemmTile : 1;

// acc[j] = sum over this lane's granules g of dot(W[row] granule g, X[j] granule g)
// for j < count (count <= Tile); x_tile points at X[0] of the tile, rows of `cols`.
template <ferrox_kind Kind, int Tile>
__host__ __device__ __forceinline__ void lane_partial_dots(const uint8_t* weight_row, uint64_t cols,
                                                           const float* x_tile, int count, int lane,
                                                           float (&acc)[Tile]) {
    FERROX_UNROLL
    for (int j = 0; j < Tile; ++j) acc[j] = 0.0f;
    const uint64_t granules = (cols + kGranule - 1) / kGranule;
    for (uint64_t g = static_cast<uint64_t>(lane); g < granules; g += kWarpSize) {
        float w[kGranule];
        const int valid = decode_granule<Kind>(weight_row, g, cols, w);
        FERROX_UNROLL
        for (int j = 0; j < Tile; ++j) {
            if (j >= count) break;
            const float* xs = x_tile + static_cast<uint64_t>(j) * cols + g * kGranule;
            float sum = 0.0f;
            FERROX_UNROLL
            for (int l = 0; l < kGranule; ++l)
                if (l < valid) sum += w[l] * xs[l];
            acc[j] += sum;
        }
    }
}

}  // namespace ferrox::cuda
