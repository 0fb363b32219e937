// Seeded random inputs for tests; the seed is printed so a failure can be replayed.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

#include "nmse.h"  // nmse(got, want)

namespace ferrox::test {

// FERROX_TEST_SEED overrides the default, to replay a failure.
inline uint64_t test_seed(uint64_t fallback) {
    const char* env = std::getenv("FERROX_TEST_SEED");
    const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : fallback;
    UNSCOPED_INFO("seed " << seed << " (set FERROX_TEST_SEED to replay)");
    return seed;
}

inline std::vector<float> gaussian(size_t n, std::mt19937_64& rng, float sigma = 1.0f) {
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

}  // namespace ferrox::test
