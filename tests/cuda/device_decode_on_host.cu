#include <cstddef>

#include "block_decode.cuh"
#include "capability_table.h"
#include "device_decode_on_host.h"
#include "row_tile.cuh"

namespace ferrox::cuda::test {
namespace {

template <ferrox_kind Kind>
void decode_row(const uint8_t* row, uint64_t cols, float* out) {
    const uint64_t granules = (cols + kGranule - 1) / kGranule;
    for (uint64_t g = 0; g < granules; ++g) {
        float w[kGranule];
        const int valid = decode_granule<Kind>(row, g, cols, w);
        for (int l = 0; l < valid; ++l) out[g * kGranule + static_cast<uint64_t>(l)] = w[l];
    }
}

// What the grid does: every (row, tile) pair, every lane, then the lane sum.
template <ferrox_kind Kind, int Tile>
void run_rows(const uint8_t* weights, uint64_t rows, uint64_t cols, uint64_t row_bytes,
              const float* x, uint64_t n, float* y) {
    for (uint64_t first = 0; first < n; first += Tile) {
        const int count = static_cast<int>(n - first < Tile ? n - first : Tile);
        for (uint64_t row = 0; row < rows; ++row) {
            float total[Tile] = {};
            const ActivationGranules tile_x{x + first * cols, cols, kGranule, 0};
            const uint64_t granules = (cols + kGranule - 1) / kGranule;
            // Two rows at once, as the kernel walks several: this one and the
            // next (or itself again at the end), whose sums must not mix in.
            const uint8_t* const row_starts[2] = {
                weights + row * row_bytes, weights + (row + 1 < rows ? row + 1 : row) * row_bytes};
            for (int lane = 0; lane < kWarpSize; ++lane) {
                float acc[2][Tile] = {};
                lane_partial_dots<Kind, Tile, 2>(row_starts, cols, 0, granules, tile_x, count, lane,
                                                 acc);
                for (int j = 0; j < Tile; ++j) total[j] += acc[0][j];
            }
            for (int j = 0; j < count; ++j) y[(first + j) * rows + row] = total[j];
        }
    }
}

// The same walk over the table as kernels.cu: exactly the listed MATVEC and
// GEMM kernels (the resident ops' rows are other kernels, not row tiles).
template <size_t Index = 0>
bool dispatch(ferrox_op op, ferrox_kind kind, auto&& run) {
    if constexpr (Index == kKernels.size()) {
        return false;
    } else {
        constexpr KernelEntry entry = kKernels[Index];
        if constexpr (entry.op == FERROX_OP_MATVEC || entry.op == FERROX_OP_GEMM) {
            if (entry.op == op && entry.kind == kind) {
                run.template operator()<entry.op, entry.kind>();
                return true;
            }
        }
        return dispatch<Index + 1>(op, kind, run);
    }
}

template <int N>
bool copy_span(const uint8_t* p, int n, uint8_t* out) {
    if (n != N) return false;
    const ByteSpan<N> span = load_span_by_words<N>(p);
    for (int i = 0; i < N; ++i) out[i] = static_cast<uint8_t>(span.byte(i));
    return true;
}

}  // namespace

bool load_span_by_words_on_host(const void* p, int n, uint8_t* out) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    // The span sizes the decoders read (block_decode.cuh).
    return copy_span<2>(bytes, n, out) || copy_span<16>(bytes, n, out) ||
           copy_span<17>(bytes, n, out) || copy_span<18>(bytes, n, out) ||
           copy_span<20>(bytes, n, out) || copy_span<22>(bytes, n, out) ||
           copy_span<24>(bytes, n, out) || copy_span<32>(bytes, n, out) ||
           copy_span<34>(bytes, n, out) || copy_span<64>(bytes, n, out) ||
           copy_span<128>(bytes, n, out);
}

bool decode_row_with_kernel_code(ferrox_kind kind, const void* row, uint64_t cols, float* out) {
    return dispatch(FERROX_OP_MATVEC, kind, [&]<ferrox_op Op, ferrox_kind Kind>() {
        decode_row<Kind>(static_cast<const uint8_t*>(row), cols, out);
    });
}

bool run_kernel_code_on_host(ferrox_op op, ferrox_kind kind, const void* weights, uint64_t rows,
                             uint64_t cols, uint64_t row_bytes, const float* x, uint64_t n,
                             float* y) {
    return dispatch(op, kind, [&]<ferrox_op Op, ferrox_kind Kind>() {
        run_rows<Kind, kTileFor<Op>>(static_cast<const uint8_t*>(weights), rows, cols, row_bytes, x,
                                     n, y);
    });
}

}  // namespace ferrox::cuda::test
