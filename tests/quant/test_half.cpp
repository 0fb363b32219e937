// f16 / bf16 conversions: exhaustive over the 65536 halves against the
// definition, and against numpy's / gguf's rounding on golden vectors.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "ferrox/quant/half.h"
#include "vector_files.h"

using namespace ferrox::quant;
using namespace ferrox::quant::testing;

namespace {

// The value a half denotes, straight from IEEE 754's definition.
double half_value_by_definition(uint16_t h) {
    const int sign = h >> 15;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return sign ? -magnitude : magnitude;
}

bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

}  // namespace

TEST_CASE("fp16_to_fp32 gives every finite half its exact value and keeps the sign of zero") {
    size_t mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const auto half = static_cast<uint16_t>(h);
        if ((half & 0x7c00) == 0x7c00) continue;
        const float value = fp16_to_fp32(half);
        if (static_cast<double>(value) != half_value_by_definition(half) ||
            std::signbit(value) != ((half & 0x8000) != 0))
            ++mismatches;
    }
    CHECK(mismatches == 0);
}

TEST_CASE("fp16_to_fp32 maps Inf to Inf and NaN to NaN with the payload moved up") {
    CHECK(fp16_to_fp32(0x7c00) == INFINITY);
    CHECK(fp16_to_fp32(0xfc00) == -INFINITY);
    for (uint32_t payload = 1; payload < 0x400; ++payload) {
        const float nan = fp16_to_fp32(static_cast<uint16_t>(0xfc00 | payload));
        REQUIRE(std::bit_cast<uint32_t>(nan) == (0xff800000u | (payload << 13)));
    }
}

TEST_CASE("fp16_to_fp32 equals numpy's astype(float32) on all 65536 halves, NaN bits included") {
    const VectorFile file = read_dequantize_vectors("F16");
    REQUIRE(file.elements() == 65536);
    size_t mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint16_t half =
            static_cast<uint16_t>(file.blocks[2 * h] | (file.blocks[2 * h + 1] << 8));
        if (std::bit_cast<uint32_t>(fp16_to_fp32(half)) != std::bit_cast<uint32_t>(file.floats[h]))
            ++mismatches;
    }
    CHECK(mismatches == 0);
}

TEST_CASE("fp32_to_fp16 round-trips every non-NaN half and keeps NaN a NaN") {
    size_t mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const auto half = static_cast<uint16_t>(h);
        const uint16_t back = fp32_to_fp16(fp16_to_fp32(half));
        if (is_half_nan(half) ? !is_half_nan(back) : back != half) ++mismatches;
    }
    CHECK(mismatches == 0);
}

TEST_CASE("fp32_to_fp16 rounds to nearest, ties to even, between every pair of neighbours") {
    // Midpoints between neighbouring halves are exact in float32 (12 bits).
    size_t mismatches = 0;
    for (uint16_t low = 0; low < 0x7bff; ++low) {
        const auto high = static_cast<uint16_t>(low + 1);
        const float mid = (fp16_to_fp32(low) + fp16_to_fp32(high)) / 2;
        const uint16_t even = (low & 1) == 0 ? low : high;
        if (fp32_to_fp16(mid) != even) ++mismatches;
        if (fp32_to_fp16(std::nextafter(mid, 0.0f)) != low) ++mismatches;
        if (fp32_to_fp16(std::nextafter(mid, INFINITY)) != high) ++mismatches;
        if (fp32_to_fp16(-mid) != (even | 0x8000)) ++mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(fp32_to_fp16(65519.996f) == 0x7bff);
    CHECK(fp32_to_fp16(65520.0f) == 0x7c00);  // the tie above the largest half goes to Inf
    CHECK(fp32_to_fp16(1e-30f) == 0x0000);
    CHECK(fp32_to_fp16(-1e-30f) == 0x8000);
}

TEST_CASE("fp32_to_fp16 and fp32_to_bf16 equal numpy's and gguf's on golden values") {
    for (const char* kind : {"F16", "BF16"}) {
        DYNAMIC_SECTION(kind) {
            const VectorFile file = read_quantize_vectors(kind);
            size_t mismatches = 0;
            for (size_t i = 0; i < file.floats.size(); ++i) {
                const float in = file.floats[i];
                const uint16_t expected =
                    static_cast<uint16_t>(file.blocks[2 * i] | (file.blocks[2 * i + 1] << 8));
                const uint16_t actual =
                    std::string_view(kind) == "F16" ? fp32_to_fp16(in) : fp32_to_bf16(in);
                if (actual != expected) {
                    if (++mismatches <= 5)
                        UNSCOPED_INFO("input bits 0x" << std::hex << std::bit_cast<uint32_t>(in)
                                                      << " expected 0x" << expected << " got 0x"
                                                      << actual << std::dec);
                }
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("bf16_to_fp32 is the top half of the float32 bits, exhaustively") {
    for (uint32_t h = 0; h < 0x10000; ++h)
        REQUIRE(std::bit_cast<uint32_t>(bf16_to_fp32(static_cast<uint16_t>(h))) == h << 16);
}

TEST_CASE("fp32_to_bf16 quiets NaN and never rounds a NaN into Inf") {
    CHECK(fp32_to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);
    CHECK(fp32_to_bf16(std::bit_cast<float>(0xff80ffffu)) == 0xffc0);
    CHECK(fp32_to_bf16(std::bit_cast<float>(0x7f7fffffu)) == 0x7f80);  // max float rounds to Inf
    CHECK(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie to even (down)
    CHECK(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie to even (up)
}
