// Seeded random inputs for tests; the seed is printed so a failure can be replayed.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

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

// Normalised mean squared error of `got` against `want`: sum (g-w)^2 / sum w^2.
// NaN where the reference is NaN counts as agreement; NaN elsewhere is a failure (inf).
inline double nmse(std::span<const float> got, std::span<const float> want) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i]) && std::isnan(got[i])) continue;
        if (std::isnan(got[i]) || std::isnan(want[i])) return INFINITY;
        const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
        err += d * d;
        ref += static_cast<double>(want[i]) * static_cast<double>(want[i]);
    }
    return ref == 0 ? err : err / ref;
}

}  // namespace ferrox::test
