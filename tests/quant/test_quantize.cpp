// quantize_row: bit-exact with gguf.quants.quantize where gguf has a
// quantizer; for the K-quants (gguf has none) a bounded round-trip error.
#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "random_data.h"
#include "vector_files.h"

using namespace ferrox;
using namespace ferrox::quant::testing;

namespace {

std::vector<uint8_t> quantize(ferrox_kind kind, const std::vector<float>& values) {
    std::vector<uint8_t> blocks(*row_bytes(kind, values.size()));
    REQUIRE(quant::quantize_row(kind, values.data(), blocks.data(), values.size()));
    return blocks;
}

std::vector<float> dequantize(ferrox_kind kind, const std::vector<uint8_t>& blocks, size_t n) {
    std::vector<float> values(n);
    REQUIRE(quant::dequantize_row(kind, blocks.data(), values.data(), n));
    return values;
}

}  // namespace

TEST_CASE("F16, BF16, Q8_0 and Q4_0 quantize to the same bytes as gguf.quants.quantize") {
    for (const char* name : {"F16", "BF16", "Q8_0", "Q4_0"}) {
        DYNAMIC_SECTION(name) {
            const KindTraits* kind = kind_traits(name);
            REQUIRE(kind != nullptr);
            const VectorFile file = read_quantize_vectors(name);
            REQUIRE(file.block_bytes == kind->block_bytes);
            const std::vector<uint8_t> actual = quantize(kind->id, file.floats);
            size_t mismatched_blocks = 0;
            for (size_t b = 0; b < file.n_blocks; ++b) {
                const size_t at = b * kind->block_bytes;
                if (std::memcmp(actual.data() + at, file.blocks.data() + at, kind->block_bytes) !=
                    0)
                    if (++mismatched_blocks <= 5) UNSCOPED_INFO("block " << b << " differs");
            }
            CHECK(mismatched_blocks == 0);
        }
    }
}

TEST_CASE("F32 quantization copies the bits, NaN payloads included") {
    const std::vector<float> values = {1.5f, -0.0f, std::bit_cast<float>(0x7f800123u), INFINITY};
    const std::vector<uint8_t> blocks = quantize(FERROX_KIND_F32, values);
    CHECK(std::memcmp(blocks.data(), values.data(), blocks.size()) == 0);
}

TEST_CASE("K-quant and Q8 round trips on Gaussian data stay within their error bounds") {
    const uint32_t seed = test_seed();
    INFO("seed " << seed);
    const std::vector<float> values = gaussian(256 * 64, seed);
    struct Bound {
        ferrox_kind kind;
        double max_nmse;
    };
    // Measured over several seeds (printed below): Q4_K 4.8-5.0e-3 (about
    // what ggml's Q4_K reaches on Gaussian data), Q5_K 1.2e-3, Q6_K 3.0e-4,
    // Q8_K 4.7-5.1e-5, Q8_0 2.8-2.9e-5, Q4_0 7.3-7.5e-3. Bounds leave ~10-40%.
    for (const Bound& bound : {Bound{FERROX_KIND_Q4_K, 5.5e-3}, Bound{FERROX_KIND_Q5_K, 1.5e-3},
                               Bound{FERROX_KIND_Q6_K, 4e-4}, Bound{FERROX_KIND_Q8_K, 7e-5},
                               Bound{FERROX_KIND_Q8_0, 4e-5}, Bound{FERROX_KIND_Q4_0, 9e-3}}) {
        DYNAMIC_SECTION(kind_name(bound.kind)) {
            const double error =
                nmse(dequantize(bound.kind, quantize(bound.kind, values), values.size()), values);
            WARN(kind_name(bound.kind) << " NMSE " << error);
            CHECK(error < bound.max_nmse);
        }
    }
}

TEST_CASE("K-quant quantizers encode a zero row as zeros and keep a constant row's sign") {
    for (const ferrox_kind kind :
         {FERROX_KIND_Q4_K, FERROX_KIND_Q5_K, FERROX_KIND_Q6_K, FERROX_KIND_Q8_K}) {
        DYNAMIC_SECTION(kind_name(kind)) {
            const std::vector<float> zeros(256, 0.0f);
            for (const float v : dequantize(kind, quantize(kind, zeros), 256)) REQUIRE(v == 0.0f);
            const std::vector<float> negative(256, -0.75f);
            const std::vector<float> back = dequantize(kind, quantize(kind, negative), 256);
            CHECK(nmse(back, negative) < 1e-3);
        }
    }
}

TEST_CASE("Q8_K stores bsums equal to the sums of each 16 codes") {
    const uint32_t seed = test_seed();
    INFO("seed " << seed);
    const std::vector<float> values = gaussian(256 * 4, seed + 1, 3.0f);
    const std::vector<uint8_t> blocks = quantize(FERROX_KIND_Q8_K, values);
    for (size_t b = 0; b < 4; ++b) {
        const uint8_t* block = blocks.data() + b * 292;
        for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int e = 16 * j; e < 16 * j + 16; ++e) sum += static_cast<int8_t>(block[4 + e]);
            int16_t stored;
            std::memcpy(&stored, block + 260 + 2 * j, sizeof stored);
            REQUIRE(stored == sum);
        }
    }
}

TEST_CASE("quantize_row refuses kinds without a quantizer and partial blocks, writing nothing") {
    const std::vector<float> values = gaussian(256, test_seed());
    std::vector<uint8_t> out(1024, 0xab);
    for (const ferrox_kind kind : {FERROX_KIND_Q2_K, FERROX_KIND_IQ2_XXS, FERROX_KIND_MXFP4,
                                   static_cast<ferrox_kind>(4), FERROX_KIND_ID_LIMIT}) {
        INFO(static_cast<int>(kind));
        CHECK_FALSE(quant::quantize_row(kind, values.data(), out.data(), 256));
    }
    CHECK_FALSE(quant::quantize_row(FERROX_KIND_Q4_K, values.data(), out.data(), 128));
    CHECK_FALSE(quant::quantize_row(FERROX_KIND_Q8_0, values.data(), out.data(), 33));
    for (const uint8_t byte : out) REQUIRE(byte == 0xab);
}
