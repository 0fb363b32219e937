// Host ops against naive double-precision references on seeded random data.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ferrox/model/ops.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::model;
using ferrox::test::gaussian;
using ferrox::test::nmse;

TEST_CASE("layer_norm matches a double-precision reference, and needs its bias and mean") {
    std::mt19937_64 rng(ferrox::test::test_seed(12));
    auto x = gaussian(384, rng, 3.0f);
    for (float& v : x) v += 2.5f;  // a mean far from 0: a norm that skips it shows
    const auto w = gaussian(384, rng, 1.0f);
    const auto b = gaussian(384, rng, 0.5f);
    std::vector<float> y(384), want(384), no_bias(384), rms(384);
    ops::layer_norm(x, w, b, 1e-12f, y);
    double sum = 0, sq = 0;
    for (float v : x) sum += double(v);
    const double mean = sum / 384.0;
    for (float v : x) sq += (double(v) - mean) * (double(v) - mean);
    const double inv = 1.0 / std::sqrt(sq / 384.0 + 1e-12);
    for (size_t i = 0; i < 384; ++i) {
        want[i] = static_cast<float>((double(x[i]) - mean) * inv * double(w[i]) + double(b[i]));
        no_bias[i] = want[i] - b[i];
    }
    CHECK(nmse(y, want) < 1e-12);
    CHECK(nmse(no_bias, want) > 1e-3);  // the faults the reference tells apart
    ops::rms_norm(x, w, 1e-12f, rms);
    CHECK(nmse(rms, want) > 1e-3);
    // In place (y aliasing x), as the encoder calls it.
    ops::layer_norm(x, w, b, 1e-12f, x);
    CHECK(x == y);
}

TEST_CASE("rms_norm matches a double-precision reference") {
    std::mt19937_64 rng(ferrox::test::test_seed(11));
    const auto x = gaussian(640, rng, 3.0f);
    const auto w = gaussian(640, rng, 1.0f);
    std::vector<float> y(640), want(640);
    ops::rms_norm(x, w, 1e-6f, y);
    double ss = 0;
    for (float v : x) ss += double(v) * double(v);
    const double inv = 1.0 / std::sqrt(ss / 640.0 + 1e-6);
    for (size_t i = 0; i < 640; ++i)
        want[i] = static_cast<float>(double(x[i]) * inv * double(w[i]));
    CHECK(nmse(y, want) < 1e-12);
}

TEST_CASE("rope rotates the documented pairs by pos * base^(-2i/d)") {
    // d = 4, base 10000: pair 0 turns by pos rad, pair 1 by pos * 0.01 rad.
    const float in[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    const double a0 = 1.0, a1 = 0.01;
    {
        std::vector<float> h(in, in + 4);
        ops::rope(h, 1, 10000.0f, 1.0f, RopeStyle::Neox);  // pairs (0,2) and (1,3)
        CHECK(h[0] == Approx(1 * std::cos(a0) - 3 * std::sin(a0)));
        CHECK(h[2] == Approx(1 * std::sin(a0) + 3 * std::cos(a0)));
        CHECK(h[1] == Approx(2 * std::cos(a1) - 4 * std::sin(a1)));
        CHECK(h[3] == Approx(2 * std::sin(a1) + 4 * std::cos(a1)));
    }
    {
        std::vector<float> h(in, in + 4);
        ops::rope(h, 1, 10000.0f, 1.0f, RopeStyle::Normal);  // pairs (0,1) and (2,3)
        CHECK(h[0] == Approx(1 * std::cos(a0) - 2 * std::sin(a0)));
        CHECK(h[1] == Approx(1 * std::sin(a0) + 2 * std::cos(a0)));
        CHECK(h[2] == Approx(3 * std::cos(a1) - 4 * std::sin(a1)));
        CHECK(h[3] == Approx(3 * std::sin(a1) + 4 * std::cos(a1)));
    }
}

TEST_CASE("rope makes q.k depend only on the distance between positions, in both styles") {
    std::mt19937_64 rng(ferrox::test::test_seed(12));
    for (RopeStyle style : {RopeStyle::Normal, RopeStyle::Neox}) {
        const auto q = gaussian(128, rng), k = gaussian(128, rng);
        auto dot_at = [&](uint32_t pq, uint32_t pk) {
            std::vector<float> a = q, b = k;
            ops::rope(a, pq, 1e6f, 1.0f, style);
            ops::rope(b, pk, 1e6f, 1.0f, style);
            double d = 0;
            for (size_t i = 0; i < a.size(); ++i) d += double(a[i]) * double(b[i]);
            return d;
        };
        CHECK(dot_at(7, 3) == Approx(dot_at(104, 100)).epsilon(1e-4));
        CHECK(dot_at(0, 0) == Approx(dot_at(50, 50)).epsilon(1e-4));
    }
}

TEST_CASE("softmax sums to one, matches a double reference and survives large inputs") {
    std::mt19937_64 rng(ferrox::test::test_seed(13));
    auto x = gaussian(1000, rng, 5.0f);
    x[3] = 500.0f;  // exp(500) overflows float without the max subtraction
    std::vector<float> want(x.size());
    double mx = 500, sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += std::exp(double(x[i]) - mx);
    for (size_t i = 0; i < x.size(); ++i)
        want[i] = static_cast<float>(std::exp(double(x[i]) - mx) / sum);
    ops::softmax(x);
    double total = 0;
    for (float v : x) total += double(v);
    CHECK(total == Approx(1.0).epsilon(1e-6));
    CHECK(nmse(x, want) < 1e-12);
}

TEST_CASE("gelu_tanh and silu match their formulas") {
    for (double x : {-3.0, -0.5, 0.0, 0.7, 2.5}) {
        const double gelu =
            0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        CHECK(double(ops::gelu_tanh(float(x))) == Approx(gelu).margin(1e-6));
        CHECK(double(ops::silu(float(x))) == Approx(x / (1 + std::exp(-x))).margin(1e-6));
    }
}

TEST_CASE("attention with GQA, causal mask and sliding window matches a naive reference") {
    std::mt19937_64 rng(ferrox::test::test_seed(14));
    const ops::AttentionShape shape{4, 2, 16, 8, 0.25f};
    const uint32_t n_pos = 40;
    const auto q = gaussian(shape.n_head * shape.head_dim_k, rng);
    const auto keys = gaussian(n_pos * shape.n_head_kv * shape.head_dim_k, rng);
    const auto values = gaussian(n_pos * shape.n_head_kv * shape.head_dim_v, rng);
    for (uint32_t window : {0u, 8u}) {
        const uint32_t pos = 30;
        const uint32_t first = window && pos + 1 > window ? pos + 1 - window : 0;
        std::vector<float> scores(n_pos), out(shape.n_head * shape.head_dim_v);
        ops::attend(shape, q, keys.data(), values.data(), first, pos, scores, out);

        std::vector<float> want(out.size());
        for (uint32_t h = 0; h < shape.n_head; ++h) {
            const uint32_t kvh = h / 2;
            std::vector<double> s(n_pos, -INFINITY);
            double mx = -INFINITY;
            for (uint32_t p = 0; p < n_pos; ++p) {
                const bool visible = p <= pos && (window == 0 || pos - p < window);
                if (!visible) continue;
                double d = 0;
                for (uint32_t i = 0; i < 16; ++i)
                    d += double(q[h * 16 + i]) * double(keys[(p * 2 + kvh) * 16 + i]);
                s[p] = d * 0.25;
                mx = std::max(mx, s[p]);
            }
            double z = 0;
            for (double& v : s) z += (v = std::exp(v - mx));
            for (uint32_t i = 0; i < 8; ++i) {
                double acc = 0;
                for (uint32_t p = 0; p < n_pos; ++p)
                    acc += s[p] / z * double(values[(p * 2 + kvh) * 8 + i]);
                want[h * 8 + i] = static_cast<float>(acc);
            }
        }
        INFO("window " << window);
        CHECK(nmse(out, want) < 1e-10);
    }
}

TEST_CASE("gelu through the f16 table stays within f16 rounding of the exact formula") {
    std::mt19937_64 rng(ferrox::test::test_seed(0x6e1));
    std::uniform_real_distribution<float> wide(-12.0f, 12.0f);
    std::normal_distribution<float> typical(0.0f, 1.5f);
    auto exact = [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    };
    for (int i = 0; i < 20000; ++i) {
        const float x = i % 2 ? wide(rng) : typical(rng);
        const double want = exact(double(x));
        const double got = double(ops::gelu_tanh_f16(x));
        INFO("x = " << x);
        if (x <= -10.0f || x >= 10.0f) {
            CHECK(got == (x >= 10.0f ? double(x) : 0.0));
            continue;
        }
        // Input and output each rounded to f16 (relative 2^-11), and the
        // input's error scaled by the slope, which is below 1.13 in magnitude.
        const double input_step = std::fabs(double(x)) * std::ldexp(1.0, -11) + 1e-7;
        CHECK(std::fabs(got - want) <= std::fabs(want) * std::ldexp(1.0, -11) + 1.13 * input_step);
    }
    // glu applies it to the gate and multiplies by up.
    std::vector<float> gate{-11.0f, -0.3f, 0.8f, 11.0f}, up{2.0f, 3.0f, -1.0f, 0.5f};
    std::vector<float> want(4);
    for (size_t i = 0; i < 4; ++i) want[i] = ops::gelu_tanh_f16(gate[i]) * up[i];
    ops::glu(gate, up, FfnActivation::GeluTanh);
    CHECK(gate == want);
}

TEST_CASE("keep_top_groups keeps the groups whose two best scores sum highest, masks the rest") {
    // 4 groups of 3: sums of the two best are 1.5, 1.7, 0.9 (one large score
    // alone does not win a group its place), 1.6.
    std::vector<float> scores = {1.0f, 0.5f, 0.1f,  0.9f, 0.8f, 0.0f,
                                 0.9f, 0.0f, -1.0f, 0.8f, 0.7f, 0.8f};
    std::vector<float> group_scores(4);
    std::vector<uint32_t> order(4);
    ops::keep_top_groups(scores, 4, 2, group_scores, order);
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> want = {-inf, -inf, -inf, 0.9f, 0.8f, 0.0f,
                                     -inf, -inf, -inf, 0.8f, 0.7f, 0.8f};
    CHECK(scores == want);

    // Random scores against a brute force over every choice of groups.
    std::mt19937_64 rng(ferrox::test::test_seed(12));
    for (int trial = 0; trial < 50; ++trial) {
        const auto x = gaussian(32, rng, 1.0f);  // 8 groups of 4, 3 used
        std::vector<float> got(x.begin(), x.end()), gs(8);
        std::vector<uint32_t> go(8);
        ops::keep_top_groups(got, 8, 3, gs, go);
        std::vector<std::pair<float, int>> sums;
        for (int g = 0; g < 8; ++g) {
            std::vector<float> v(x.begin() + 4 * g, x.begin() + 4 * g + 4);
            std::sort(v.rbegin(), v.rend());
            sums.push_back({v[0] + v[1], g});
        }
        std::sort(sums.rbegin(), sums.rend());
        for (int g = 0; g < 8; ++g) {
            const bool kept = std::any_of(sums.begin(), sums.begin() + 3,
                                          [&](const auto& s) { return s.second == g; });
            for (int e = 4 * g; e < 4 * g + 4; ++e) CHECK(got[e] == (kept ? x[e] : -inf));
        }
    }
}
