// The CUDA kernels' own code run on the CPU against the scalar reference
// (ferrox_quant): the weight decoders bit for bit, and the per-lane dot
// products (granule walk, activation tiles, partial tiles) with NMSE. This
// checks the kernels' format math and indexing on every host, GPU or not; the
// GPU tests add the warp sum, the launch and the device's own rounding.
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

}  // namespace

TEST_CASE("the kernels decode every MATVEC kind exactly as the scalar reference") {
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    int kinds_checked = 0;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        if (entry.op != FERROX_OP_MATVEC) continue;
        const ferrox::KindTraits* traits = ferrox::kind_traits(static_cast<uint32_t>(entry.kind));
        REQUIRE(traits != nullptr);
        INFO("kind " << traits->name);
        // Floats also get a row length that ends in a short granule.
        const uint64_t cols = traits->block_elements == 1 ? 1000 + 37 : 8 * traits->block_elements;
        // Random bytes everywhere, scales included: every bit pattern of the
        // format (negative Q6_K scales, high bits of the 6-bit K scales, NaN
        // and Inf f16 scales) must decode as the reference decodes it.
        std::vector<uint8_t> row(*ferrox::row_bytes(entry.kind, cols));
        for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
        std::vector<float> want(cols);
        std::vector<float> got(cols, -12345.0f);
        REQUIRE(ferrox::quant::dequantize_row(entry.kind, row.data(), want.data(), cols));
        REQUIRE(ferrox::cuda::test::decode_row_with_kernel_code(entry.kind, row.data(), cols,
                                                                got.data()));
        uint64_t mismatches = 0;
        uint64_t first_mismatch = cols;
        for (uint64_t i = 0; i < cols; ++i) {
            if (!same_value(got[i], want[i])) {
                if (mismatches++ == 0) first_mismatch = i;
            }
        }
        INFO("first mismatch at weight " << first_mismatch << " of " << cols);
        CHECK(mismatches == 0);
        ++kinds_checked;
    }
    CHECK(kinds_checked == 8);
}

TEST_CASE("the kernel decoders exist for no kind the table does not list") {
    float out[32];
    const uint8_t bytes[64] = {1};
    CHECK_FALSE(ferrox::cuda::test::decode_row_with_kernel_code(FERROX_KIND_Q5_0, bytes, 32, out));
    CHECK_FALSE(
        ferrox::cuda::test::decode_row_with_kernel_code(FERROX_KIND_IQ4_NL, bytes, 32, out));
}

TEST_CASE("every kernel's per-lane code, its lanes summed on the CPU, matches the reference") {
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
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
            const ferrox::test::Agreement a =
                ferrox::test::compare(y, ferrox::test::reference(m, x, n));
            CHECK(a.unwritten == 0);
            CHECK(a.nan_mismatch == 0);
            // Host floats, only the summation order differs from the reference.
            CHECK(a.nmse <= 1e-10);
        }
    }
}
