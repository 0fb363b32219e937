// Seeded random inputs for the quant tests. The seed is Catch2's --rng-seed
// when one is given, else a fixed default, and every test prints it on failure.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "nmse.h"

namespace ferrox::quant::testing {

inline uint32_t test_seed() {
    const uint32_t seed = Catch::rngSeed();
    return seed != 0 ? seed : 0x5eed1234u;
}

inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, sigma);
    std::vector<float> values(n);
    for (float& v : values) v = normal(rng);
    return values;
}

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> bytes(n);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() >> 24);
    return bytes;
}

// nmse(got, want): tests/support/nmse.h.
using ferrox::test::nmse;

}  // namespace ferrox::quant::testing
