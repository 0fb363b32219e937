// The work one lane of the MATVEC/GEMM kernel does, as host-and-device code:
// partial dot products of one weight row's granules lane, lane + 32, ... of a
// range with a tile of up to `Tile` activations. The kernel (kernels.cu) adds
// the 32 lanes' partials with warp shuffles; tests/cuda adds them on the CPU
// to check this indexing against the scalar reference on hosts without a GPU.
#pragma once

#include <cstdint>

#include "block_decode.cuh"

namespace ferrox::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr int kGemmTile = 8;  // activations sharing one decoded weight granule

// Activations per tile for each op the kernel template serves.
template <ferrox_op Op>
inline constexpr int kTileFor = Op == FERROX_OP_GEMM ? kGemmTile : 1;

// Where granule g of activation j of the tile starts: the kernel stages a
// chunk of granules in shared memory, each padded (granule_stride > 32) so
// that the lanes' 16-byte reads of consecutive granules hit distinct banks;
// the host test reads the activations in place.
struct ActivationGranules {
    const float* base;
    uint64_t position_stride;
    uint64_t granule_stride;
    uint64_t first_granule;

    __host__ __device__ __forceinline__ const float* at(int j, uint64_t g) const {
        return base + static_cast<uint64_t>(j) * position_stride +
               (g - first_granule) * granule_stride;
    }
};

// sum over l < valid of w[l] * xs[l], in order. On the device xs is in
// shared memory, 16-byte aligned, and readable to 32 (zeros past a row's end).
__host__ __device__ __forceinline__ float granule_dot(const float (&w)[kGranule], const float* xs,
                                                      int valid) {
    float sum = 0.0f;
#ifdef __CUDA_ARCH__
    const auto* quads = reinterpret_cast<const float4*>(xs);
    FERROX_UNROLL
    for (int q = 0; q < kGranule / 4; ++q) {
        const float4 x = quads[q];
        if (4 * q < valid) sum += w[4 * q] * x.x;
        if (4 * q + 1 < valid) sum += w[4 * q + 1] * x.y;
        if (4 * q + 2 < valid) sum += w[4 * q + 2] * x.z;
        if (4 * q + 3 < valid) sum += w[4 * q + 3] * x.w;
    }
#else
    for (int l = 0; l < valid; ++l) sum += w[l] * xs[l];
#endif
    return sum;
}

// acc[r][j] += sum over this lane's granules g in [begin, end) of
// dot(W[row r] granule g, X[j] granule g) for j < count (count <= Tile). The
// lane's granules are begin + lane, begin + lane + 32, ... (begin is a
// multiple of 32), in increasing order, so walking a row in chunks adds the
// same terms in the same order as walking it whole. The rows are the inner
// loop so that their weight loads are in flight together.
template <ferrox_kind Kind, int Tile, int Rows>
__host__ __device__ __forceinline__ void lane_partial_dots(
    const uint8_t* const (&weight_rows)[Rows], uint64_t cols, uint64_t begin, uint64_t end,
    const ActivationGranules& x, int count, int lane, float (&acc)[Rows][Tile]) {
    for (uint64_t g = begin + static_cast<uint64_t>(lane); g < end; g += kWarpSize) {
        FERROX_UNROLL
        for (int r = 0; r < Rows; ++r) {
            float w[kGranule];
            const int valid = decode_granule<Kind>(weight_rows[r], g, cols, w);
            FERROX_UNROLL
            for (int j = 0; j < Tile; ++j) {
                if (Tile > 1 && j >= count) break;  // a MATVEC's one activation is always there
                acc[r][j] += granule_dot(w, x.at(j, g), valid);
            }
        }
    }
}

}  // namespace ferrox::cuda
