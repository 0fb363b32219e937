// The CUDA kernels' own code run on the CPU against the scalar reference
// (ferrox_quant): the weight decoders bit for bit, and the per-lane dot
// products (granule walk, activation tiles, partial tiles) with NMSE. This
// checks the kernels' format math and indexing on every host, GPU or not; the
// GPU tests add the warp sum, the launch and the device's own rounding.
// The kinds come from the capability table's MATVEC rows: a row added there
// is checked here without editing this file.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "capability_table.h"
#include "device_decode_on_host.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "kernel_check.h"

namespace {

bool same_value(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) ||
           std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

std::vector<ferrox_kind> matvec_kinds() {
    std::vector<ferrox_kind> kinds;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels)
        if (entry.op == FERROX_OP_MATVEC) kinds.push_back(entry.kind);
    return kinds;
}

// Decodes `row` with the kernel code and with the reference; the number of
// weights that differ in any bit (NaN matching NaN), and the first of them.
struct Mismatch {
    uint64_t count = 0;
    uint64_t first = 0;
};

Mismatch decode_and_compare(ferrox_kind kind, const std::vector<uint8_t>& row, uint64_t cols) {
    std::vector<float> want(cols);
    std::vector<float> got(cols, std::bit_cast<float>(ferrox::test::kPoisonBits));
    REQUIRE(ferrox::quant::dequantize_row(kind, row.data(), want.data(), cols));
    REQUIRE(ferrox::cuda::test::decode_row_with_kernel_code(kind, row.data(), cols, got.data()));
    Mismatch result;
    for (uint64_t i = 0; i < cols; ++i) {
        // The poison is a NaN: an unwritten weight must not pass as a NaN weight.
        const bool unwritten = std::bit_cast<uint32_t>(got[i]) == ferrox::test::kPoisonBits;
        if (unwritten || !same_value(got[i], want[i])) {
            if (result.count++ == 0) result.first = i;
        }
    }
    return result;
}

}  // namespace

TEST_CASE("the kernels decode every MATVEC kind exactly as the scalar reference") {
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    int kinds_checked = 0;
    for (const ferrox_kind kind : matvec_kinds()) {
        const ferrox::KindTraits& traits = ferrox::test::traits_of(kind);
        INFO("kind " << traits.name);
        // Floats also get a row length that ends in a short granule.
        const uint64_t cols = traits.block_elements == 1 ? 1000 + 37 : 64 * traits.block_elements;
        // Random bytes everywhere, scales included: every bit pattern of the
        // format (negative d, negative Q3_K/Q6_K/IQ4_XS sub-scales, high bits
        // of the 6-bit K scales, NaN and Inf f16 scales) must decode as the
        // reference decodes it.
        std::vector<uint8_t> row(*ferrox::row_bytes(kind, cols));
        for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
        const Mismatch random_bytes = decode_and_compare(kind, row, cols);
        INFO("random bytes: first mismatch at weight " << random_bytes.first << " of " << cols);
        CHECK(random_bytes.count == 0);

        // Realistic scales of both signs, the regime real weights live in.
        const ferrox::test::Matrix m = ferrox::test::random_matrix(kind, 1, cols, rng);
        const Mismatch realistic = decode_and_compare(kind, m.bytes, cols);
        INFO("realistic scales: first mismatch at weight " << realistic.first << " of " << cols);
        CHECK(realistic.count == 0);
        ++kinds_checked;
    }
    // F32, F16, BF16 and at least one quantized kind: the loop ran.
    CHECK(kinds_checked >= 4);
}

TEST_CASE("the kernel decoders agree with the reference for every byte value at every offset") {
    // Each quantized block byte (scale, min, code or high-bit byte) takes all
    // 256 values in its own row of otherwise random blocks, so every nibble,
    // bit pair, high bit, IQ4 code and 6-bit scale field is decoded at least
    // once in each position, not just probably.
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    for (const ferrox_kind kind : matvec_kinds()) {
        const ferrox::KindTraits& traits = ferrox::test::traits_of(kind);
        if (traits.block_elements == 1) continue;  // floats: covered above
        INFO("kind " << traits.name);
        const uint64_t cols = 256 * static_cast<uint64_t>(traits.block_elements);
        std::vector<uint8_t> row(*ferrox::row_bytes(kind, cols));
        uint64_t mismatches = 0;
        for (uint32_t offset = 0; offset < traits.block_bytes; ++offset) {
            for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
            for (uint32_t v = 0; v < 256; ++v)
                row[v * traits.block_bytes + offset] = static_cast<uint8_t>(v);
            const Mismatch m = decode_and_compare(kind, row, cols);
            if (m.count != 0) {
                UNSCOPED_INFO("byte offset " << offset << ": " << m.count
                                             << " mismatches, first at weight " << m.first);
            }
            mismatches += m.count;
        }
        CHECK(mismatches == 0);
    }
}

TEST_CASE(
    "the device's word-wise span reads give the bytes at every alignment, nothing past them") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> word(0, 0xFFFFFFFFu);
    for (const int n : {2, 16, 17, 18, 20, 22, 24, 32, 34, 64, 128}) {
        // Exactly-sized heap buffers (whole words, as device allocations are):
        // a span at the very end would show a load past the last word under
        // ASan. CI's ASan build has no CUDA; this was run under ASan by hand
        // (4 Dec 2026), where always loading the extra word is caught.
        for (int end_gap = 0; end_gap < 8; ++end_gap) {
            const size_t words =
                (static_cast<size_t>(n) + static_cast<size_t>(end_gap) + 3) / 4 + 1;
            std::vector<uint32_t> storage(words);
            for (auto& w : storage) w = word(rng);
            const auto* base = reinterpret_cast<const uint8_t*>(storage.data());
            const uint8_t* p =
                base + words * 4 - static_cast<size_t>(end_gap) - static_cast<size_t>(n);
            INFO("span of " << n << " bytes at offset " << (p - base) << " of " << words * 4);
            std::vector<uint8_t> got(static_cast<size_t>(n));
            REQUIRE(ferrox::cuda::test::load_span_by_words_on_host(p, n, got.data()));
            CHECK(std::memcmp(got.data(), p, static_cast<size_t>(n)) == 0);
        }
    }
    uint8_t out[8];
    CHECK_FALSE(ferrox::cuda::test::load_span_by_words_on_host(out, 5, out));
}

TEST_CASE("the kernel decoders exist for exactly the kinds with a MATVEC row") {
    std::vector<uint8_t> bytes(4096, 0x5A);
    std::vector<float> out(256);
    for (const ferrox::KindTraits& traits : ferrox::kAllKinds) {
        INFO("kind " << traits.name);
        const uint64_t cols = traits.block_elements == 1 ? 32 : traits.block_elements;
        CHECK(ferrox::cuda::test::decode_row_with_kernel_code(traits.id, bytes.data(), cols,
                                                              out.data()) ==
              ferrox::cuda::has_kernel(FERROX_OP_MATVEC, traits.id));
    }
}

TEST_CASE("the row-tile code runs for MATVEC and GEMM rows only, not the resident ops") {
    std::vector<uint8_t> weights(4096, 0);
    std::vector<float> x(256, 1.0f);
    std::vector<float> y(8, 0.0f);
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        INFO(entry.name);
        const bool row_tile = entry.op == FERROX_OP_MATVEC || entry.op == FERROX_OP_GEMM;
        const uint32_t block = ferrox::test::traits_of(entry.kind).block_elements;
        CHECK(ferrox::cuda::test::run_kernel_code_on_host(entry.op, entry.kind, weights.data(), 1,
                                                          block == 1 ? 32 : block, 0, x.data(), 1,
                                                          y.data()) == row_tile);
    }
}

TEST_CASE("every kernel's per-lane code, its lanes summed on the CPU, matches the reference") {
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    int kernels_checked = 0;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        if (entry.op != FERROX_OP_MATVEC && entry.op != FERROX_OP_GEMM) continue;
        const uint32_t block = ferrox::test::traits_of(entry.kind).block_elements;
        // More than 32 granules so lanes wrap; floats end in a short granule.
        const uint64_t cols = block == 1 ? 1037 : (block == 32 ? 40 * 32 : 5 * 256);
        const uint64_t rows = 5;
        const ferrox::test::Matrix m = ferrox::test::random_matrix(entry.kind, rows, cols, rng);
        const std::vector<uint64_t> batches = entry.op == FERROX_OP_GEMM
                                                  ? std::vector<uint64_t>{1, 7, 8, 9, 17}
                                                  : std::vector<uint64_t>{1};
        for (const uint64_t n : batches) {
            INFO(entry.name << ", " << rows << " x " << cols << ", batch " << n);
            const std::vector<float> x = ferrox::test::random_activations(n * cols, rng);
            std::vector<float> y(n * rows, std::bit_cast<float>(ferrox::test::kPoisonBits));
            REQUIRE(ferrox::cuda::test::run_kernel_code_on_host(
                entry.op, entry.kind, m.bytes.data(), rows, cols, m.row_bytes, x.data(), n,
                y.data()));
            const std::vector<float> want = ferrox::test::reference(m, x, n);
            const ferrox::test::Agreement a = ferrox::test::compare(y, want);
            CHECK(a.unwritten == 0);
            CHECK(a.nan_mismatch == 0);
            // Host floats, only the summation order differs from the reference.
            UNSCOPED_INFO("nmse " << a.nmse);
            CHECK(a.nmse <= 1e-10);
            // A finite reference: the NMSE above compared real numbers.
            uint64_t not_finite = 0;
            for (const float v : want) not_finite += std::isfinite(v) ? 0 : 1;
            CHECK(not_finite == 0);
        }
        ++kernels_checked;
    }
    CHECK(kernels_checked >= 4);
}

TEST_CASE("random_matrix makes finite realistic weights for every kind the table lists") {
    // The GPU tests and ferrox_cuda_bench take their kinds from the table;
    // every weight kind in it needs a generator (scale_fields) here.
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        if (entry.op != FERROX_OP_MATVEC && entry.op != FERROX_OP_GEMM &&
            entry.op != FERROX_OP_GET_ROWS)
            continue;
        INFO(entry.name);
        const uint32_t block = ferrox::test::traits_of(entry.kind).block_elements;
        const uint64_t cols = block == 1 ? 100 : 4 * uint64_t{block};
        ferrox::test::Matrix m{};
        REQUIRE_NOTHROW(m = ferrox::test::random_matrix(entry.kind, 3, cols, rng));
        std::vector<float> w(cols);
        float largest = 0.0f;
        uint64_t not_finite = 0;
        for (uint64_t r = 0; r < m.rows; ++r) {
            REQUIRE(ferrox::quant::dequantize_row(entry.kind, &m.bytes[r * m.row_bytes], w.data(),
                                                  cols));
            for (const float v : w) {
                not_finite += std::isfinite(v) ? 0 : 1;
                largest = std::max(largest, std::fabs(v));
            }
        }
        CHECK(not_finite == 0);
        // At most kMaxScale / 16 times the largest sub-scale-code product
        // (Q6_K's 128 * 32, IQ4_XS's 32 * 127): ~5.1. Random bytes read as the
        // scale (a wrong offset) decode far larger, or not finite.
        CHECK(largest > 0.0f);
        CHECK(largest < 8.0f);
    }
}
