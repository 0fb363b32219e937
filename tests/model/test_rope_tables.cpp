// RoPE angle tables: the plain case is the angles the decoder always used;
// each scaling scheme changes exactly what it should. The numbers themselves
// are held against Python's float64 recipes and llama.cpp's ggml rope in
// tests/parity/test_rope_parity.py.
#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "ferrox/model/architecture.h"
#include "ferrox/model/ops.h"
#include "ferrox/model/rope_tables.h"

using namespace ferrox;

namespace {

model::Hparams plain(uint32_t n_rot) {
    model::Hparams hp;
    hp.arch = model::find_architecture("llama");
    hp.n_rot = hp.head_dim_k = n_rot;
    hp.rope_base = 10000.0f;
    hp.rope_n_ctx_orig = 4096;
    return hp;
}

struct Table {
    std::vector<float> cos, sin;
};

Table table(const model::RopeSpec& spec, uint32_t pos0, uint32_t n, uint32_t half) {
    Table t{std::vector<float>(size_t{n} * half), std::vector<float>(size_t{n} * half)};
    model::rope_table(spec, pos0, n, half, t.cos, t.sin);
    return t;
}

}  // namespace

TEST_CASE("without scaling the table holds the decoder's unscaled angles, bit for bit") {
    const auto hp = plain(64);
    const auto spec = model::rope_spec(hp, {}, false);
    CHECK(spec.ext_factor == 0.0f);
    CHECK(spec.attn_factor == 1.0f);
    const auto t = table(spec, 1000, 3, 32);
    std::vector<float> c(32), s(32);
    for (uint32_t p = 0; p < 3; ++p) {
        model::ops::rope_angles(1000 + p, 10000.0f, 1.0f, c, s);
        for (uint32_t i = 0; i < 32; ++i) {
            CHECK(t.cos[p * 32 + i] == c[i]);
            CHECK(t.sin[p * 32 + i] == s[i]);
        }
    }
}

TEST_CASE("per-pair factors divide each pair's angle and only global layers get them") {
    auto hp = plain(16);
    hp.sliding_window = 8;
    hp.swa_period = 6;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(1.0f, 8.0f);
    std::vector<float> factors(8);
    for (float& f : factors) f = dist(rng);
    const auto global = model::rope_spec(hp, factors, false);
    const auto local = model::rope_spec(hp, factors, true);
    CHECK(global.freq_factors == factors);
    CHECK(local.freq_factors.empty());
    const auto t = table(global, 37, 1, 8);
    for (uint32_t i = 0; i < 8; ++i) {
        const double theta = 37.0 * std::pow(10000.0, -2.0 * i / 16.0) / double{factors[i]};
        CHECK(t.cos[i] == Approx(std::cos(theta)).margin(1e-6));
        CHECK(t.sin[i] == Approx(std::sin(theta)).margin(1e-6));
    }
}

TEST_CASE("LongRoPE takes its long factors only past the original context, and rope_freqs wins") {
    auto hp = plain(8);
    hp.rope_scaling = model::RopeScaling::LongRope;
    model::RopeFactors f;
    f.short_factors = {1, 1, 2, 2};
    f.long_factors = {1, 3, 5, 7};
    CHECK(std::vector<float>(model::rope_factors_for(hp, f, 4096).begin(),
                             model::rope_factors_for(hp, f, 4096).end()) == f.short_factors);
    CHECK(std::vector<float>(model::rope_factors_for(hp, f, 4097).begin(),
                             model::rope_factors_for(hp, f, 4097).end()) == f.long_factors);
    f.freqs = {2, 2, 2, 2};
    CHECK(model::rope_factors_for(hp, f, 4097).data() == f.freqs.data());
}

TEST_CASE("YaRN keeps the fast pairs, interpolates the slow ones, and scales the magnitude") {
    auto hp = plain(64);
    hp.rope_scaling = model::RopeScaling::Yarn;
    hp.rope_freq_scale = 0.25f;
    const auto spec = model::rope_spec(hp, {}, false);
    CHECK(spec.ext_factor == 1.0f);
    float corr[2];
    model::yarn_corr_dims(spec, corr);
    REQUIRE(corr[0] > 0);
    REQUIRE(corr[1] < 31);
    const auto t = table(spec, 500, 1, 32);
    const double magnitude = 1.0 + 0.1 * std::log(4.0);  // the net YaRN mscale
    for (uint32_t i = 0; i < 32; ++i) {
        const double r = std::hypot(double{t.cos[i]}, double{t.sin[i]});
        CHECK(r == Approx(magnitude).epsilon(1e-6));
    }
    // Pair 0 (fastest) keeps its angle; the last pair is divided by the factor 4.
    CHECK(std::atan2(t.sin[0], t.cos[0]) ==
          Approx(std::remainder(500.0, 2 * std::numbers::pi)).margin(1e-5));
    const double slow = 500.0 * std::pow(10000.0, -62.0 / 64.0) / 4.0;
    CHECK(std::atan2(t.sin[31], t.cos[31]) == Approx(slow).margin(1e-6));
}

TEST_CASE("partial rotary: pairs past n_rot / 2 are the identity, exponents run over n_rot") {
    auto hp = plain(16);
    hp.head_dim_k = 64;
    const auto spec = model::rope_spec(hp, {}, false);
    const auto t = table(spec, 9, 1, 32);
    for (uint32_t i = 8; i < 32; ++i) {
        CHECK(t.cos[i] == 1.0f);
        CHECK(t.sin[i] == 0.0f);
    }
    CHECK(t.cos[1] == Approx(std::cos(9.0 * std::pow(10000.0, -2.0 / 16.0))).margin(1e-6));
}

TEST_CASE(
    "a YaRN ramp weight below 1 mixes less, and with the ramp off the magnitude is the file's") {
    auto hp = plain(64);
    hp.rope_scaling = model::RopeScaling::Yarn;
    hp.rope_freq_scale = 0.25f;
    hp.rope_yarn_ext_factor = 0.5f;
    const auto half_ramp = model::rope_spec(hp, {}, false);
    CHECK(half_ramp.ext_factor == 0.5f);
    const auto t = table(half_ramp, 500, 1, 32);
    // Pair 0 sits below the ramp: half its original angle, half the interpolated one.
    CHECK(std::atan2(t.sin[0], t.cos[0]) ==
          Approx(std::remainder(500.0 * (0.5 + 0.5 * 0.25), 2 * std::numbers::pi)).margin(1e-5));
    CHECK(std::hypot(double{t.cos[0]}, double{t.sin[0]}) ==
          Approx(1.0 + 0.1 * std::log(4.0)).epsilon(1e-6));

    hp.rope_yarn_ext_factor = 0.0f;
    hp.rope_yarn_attn_factor = 1.5f;
    hp.rope_attn_factor = 0.5f;
    const auto off = model::rope_spec(hp, {}, false);
    CHECK(off.ext_factor == 0.0f);
    CHECK(off.attn_factor == Approx(0.75f));
    const auto u = table(off, 500, 1, 32);
    // Every pair interpolated (plain linear scaling), magnitude 1.5 * 0.5.
    CHECK(std::atan2(u.sin[0], u.cos[0]) ==
          Approx(std::remainder(500.0 * 0.25, 2 * std::numbers::pi)).margin(1e-5));
    CHECK(std::hypot(double{u.cos[5]}, double{u.sin[5]}) == Approx(0.75).epsilon(1e-6));
}
