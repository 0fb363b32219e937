#include "kernels/products.h"

#include <algorithm>
#include <vector>

#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"

namespace ferrox::cpu {
namespace {

// Eight independent partial sums so the compiler can vectorise without
// -ffast-math reassociation.
float dot(const float* a, const float* b, uint64_t n) {
    float acc[8] = {};
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[i + static_cast<uint64_t>(l)] * b[i + static_cast<uint64_t>(l)];
    float tail = 0.0f;
    for (; i < n; ++i) tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

void decode_row(const WeightView& w, uint64_t row, float* out) {
    const std::byte* src = w.data + row * w.row_bytes;
    if (!w.kernel) {
        quant::dequantize_row(w.kind, src, out, w.cols);
        return;
    }
    const KindTraits& t = *kind_traits(static_cast<uint32_t>(w.kind));
    for (uint64_t b = 0; b < w.cols / t.block_elements; ++b)
        w.kernel->decode(src + b * t.block_bytes, out + b * t.block_elements);
}

// Rows per task: enough work to amortise a claim, enough tasks to balance.
uint64_t grain_for(const ThreadPool& pool, uint64_t rows) {
    const uint64_t per_thread = rows / (uint64_t{pool.size()} * 8);
    return std::clamp<uint64_t>(per_thread, 4, 256);
}

std::vector<float>& scratch(uint64_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer;
}

}  // namespace

void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y) {
    pool.parallel_for(w.rows, grain_for(pool, w.rows), [&](uint64_t begin, uint64_t end) {
        float* row = scratch(w.cols).data();
        for (uint64_t r = begin; r < end; ++r) {
            decode_row(w, r, row);
            y[r] = dot(row, x, w.cols);
        }
    });
}

void gemm(ThreadPool& pool, const WeightView& w, const float* x, uint64_t n, float* y) {
    // Decode a tile of rows once, then use it against every activation.
    constexpr uint64_t kTile = 8;
    const uint64_t tiles = (w.rows + kTile - 1) / kTile;
    pool.parallel_for(tiles, 1, [&](uint64_t begin, uint64_t end) {
        float* tile = scratch(kTile * w.cols).data();
        for (uint64_t t = begin; t < end; ++t) {
            const uint64_t r0 = t * kTile;
            const uint64_t count = std::min(kTile, w.rows - r0);
            for (uint64_t r = 0; r < count; ++r) decode_row(w, r0 + r, tile + r * w.cols);
            for (uint64_t j = 0; j < n; ++j)
                for (uint64_t r = 0; r < count; ++r)
                    y[j * w.rows + r0 + r] = dot(tile + r * w.cols, x + j * w.cols, w.cols);
        }
    });
}

}  // namespace ferrox::cpu
