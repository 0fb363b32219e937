// dequantize_row / dot_row contracts: what they refuse, and that the dot
// product is exactly the documented dequantize-then-accumulate.
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <string>

#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::quant::testing;

TEST_CASE("dequantize_row refuses a row that is not whole blocks, writing nothing") {
    const std::vector<uint8_t> bytes = random_bytes(4096, test_seed());
    for (const KindTraits& kind : kAllKinds) {
        if (kind.block_elements == 1) continue;
        INFO(kind.name);
        std::vector<float> out(1024, 7.0f);
        CHECK_FALSE(
            quant::dequantize_row(kind.id, bytes.data(), out.data(), kind.block_elements + 1));
        CHECK_FALSE(
            quant::dequantize_row(kind.id, bytes.data(), out.data(), kind.block_elements / 2));
        for (const float v : out) REQUIRE(v == 7.0f);
    }
}

TEST_CASE("dequantize_row refuses kinds ferrox does not know, writing nothing") {
    const std::vector<uint8_t> bytes = random_bytes(4096, test_seed());
    std::vector<float> out(256, 7.0f);
    // 4 and 5 are retired Q4_2/Q4_3; 24-28 are I8..F64; 31 and 36 retired
    // repacked layouts; 42 Q2_0. (Ids stay within the enum's value range:
    // casting 1000 to ferrox_kind is UB.)
    for (const uint32_t id : {4u, 5u, 24u, 28u, 31u, 36u, 42u, 63u}) {
        INFO(id);
        CHECK_FALSE(
            quant::dequantize_row(static_cast<ferrox_kind>(id), bytes.data(), out.data(), 256));
        CHECK(std::isnan(
            quant::dot_row(static_cast<ferrox_kind>(id), bytes.data(), out.data(), 256)));
    }
    for (const float v : out) REQUIRE(v == 7.0f);
}

TEST_CASE("dequantize_row accepts an empty row") {
    float untouched = 7.0f;
    CHECK(quant::dequantize_row(FERROX_KIND_Q4_K, nullptr, &untouched, 0));
    CHECK(untouched == 7.0f);
}

TEST_CASE("dot_row equals dequantize_row then a double sum of float32 products in order") {
    const uint32_t seed = test_seed();
    INFO("seed " << seed);
    for (const KindTraits& kind : kAllKinds) {
        DYNAMIC_SECTION(kind.name) {
            const uint64_t n = 512;
            std::vector<uint8_t> row = random_bytes(*row_bytes(kind.id, n), seed + kind.id);
            // Keep the f16/f32 scales finite so the sum is a number to compare.
            std::vector<float> values(n);
            const std::vector<float> x = gaussian(n, seed);
            if (is_float_kind(kind.id)) {
                const std::vector<float> source = gaussian(n, seed + 7);
                REQUIRE(quant::quantize_row(kind.id, source.data(), row.data(), n));
            }
            REQUIRE(quant::dequantize_row(kind.id, row.data(), values.data(), n));
            double expected = 0;
            for (uint64_t i = 0; i < n; ++i) expected += static_cast<double>(values[i] * x[i]);
            const float actual = quant::dot_row(kind.id, row.data(), x.data(), n);
            if (std::isnan(expected))
                CHECK(std::isnan(actual));
            else
                CHECK(actual == static_cast<float>(expected));
        }
    }
}

TEST_CASE("dot_row returns NaN for a row that is not whole blocks") {
    const std::vector<uint8_t> bytes = random_bytes(1024, test_seed());
    const std::vector<float> x = gaussian(300, test_seed());
    CHECK(std::isnan(quant::dot_row(FERROX_KIND_Q8_0, bytes.data(), x.data(), 33)));
}

TEST_CASE("a kind is found by its name in any case and an unknown name finds nothing") {
    for (const auto& k : kAllKinds) {
        std::string lower(k.name);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        CHECK(kind_traits(lower) == &k);
        CHECK(kind_traits(k.name) == &k);
    }
    CHECK(kind_traits("q4_kk") == nullptr);
    CHECK(kind_traits("") == nullptr);
    CHECK(kind_traits("Q4") == nullptr);
}
