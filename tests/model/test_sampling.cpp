// Sampling through SamplerChain::from_params (the chain run, chat and the
// server draw with): determinism per seed and each filter's behaviour.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "ferrox/sampler_chain.h"
#include "ferrox/sampling.h"
#include "random_data.h"

using namespace ferrox;

namespace {
std::vector<int32_t> draws(SamplerParams p, const std::vector<float>& logits, int n) {
    SamplerChain s = SamplerChain::from_params(p);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
    return out;
}
SamplerParams plain(uint64_t seed) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}
}  // namespace

TEST_CASE("greedy sampling returns the argmax whatever the seed") {
    std::mt19937_64 rng(ferrox::test::test_seed(21));
    const auto logits = ferrox::test::gaussian(5000, rng);
    SamplerParams p;
    p.temperature = 0;
    const int32_t best = argmax(logits);
    for (uint64_t seed : {1u, 2u, 3u}) {
        p.seed = seed;
        CHECK(SamplerChain::from_params(p).sample(logits) == best);
    }
}

TEST_CASE("the same seed gives the same tokens and another seed gives others") {
    std::mt19937_64 rng(ferrox::test::test_seed(22));
    const auto logits = ferrox::test::gaussian(1000, rng, 0.5f);
    const auto a = draws(plain(42), logits, 50), b = draws(plain(42), logits, 50);
    const auto c = draws(plain(43), logits, 50);
    CHECK(a == b);
    CHECK(a != c);
}

TEST_CASE("draws follow the softmax of logits / temperature") {
    const std::vector<float> logits{0.0f, std::log(2.0f), std::log(5.0f), std::log(2.0f)};
    const int n = 40000;
    std::map<int32_t, int> counts;
    for (int32_t t : draws(plain(7), logits, n)) ++counts[t];
    const double want[4] = {0.1, 0.2, 0.5, 0.2};
    for (int i = 0; i < 4; ++i) CHECK(double(counts[i]) / n == Approx(want[i]).margin(0.01));
}

TEST_CASE("top-k keeps only the k most likely tokens") {
    std::mt19937_64 rng(ferrox::test::test_seed(23));
    const auto logits = ferrox::test::gaussian(300, rng, 0.2f);
    std::vector<int32_t> order(300);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    const std::set<int32_t> top3(order.begin(), order.begin() + 3);
    auto p = plain(5);
    p.top_k = 3;
    std::set<int32_t> seen;
    for (int32_t t : draws(p, logits, 500)) seen.insert(t);
    CHECK(seen == top3);
}

TEST_CASE("top-p keeps the smallest prefix reaching p and min-p drops tokens below min_p * p_max") {
    const Candidates c{{{0, 0, 0.5f}, {1, 0, 0.3f}, {2, 0, 0.15f}, {3, 0, 0.05f}}, true, true};
    auto top_p = c;
    top_p.keep_top_p(0.7f);
    CHECK(top_p.c.size() == 2);
    auto top_p_all = c;
    top_p_all.keep_top_p(0.99f);
    CHECK(top_p_all.c.size() == 4);
    auto min_p = c;
    min_p.keep_min_p(0.3f);  // floor 0.15: keeps 0.5, 0.3, 0.15
    CHECK(min_p.c.size() == 3);
}

TEST_CASE(
    "the repetition penalty divides positive and multiplies negative logits of recent tokens") {
    // Greedy over the penalised logits, one token at a time: what remains the best tells
    // what the penalty did. Logits 2, -2, 2, 1 with history 2, 0, 1, 1 and last_n 3: the
    // penalty sees 0 and 1 (not 2): 0 -> 1, 1 -> -4; 2 stays 2 and wins.
    SamplerParams p;
    p.temperature = 0;
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    SamplerChain chain = SamplerChain::from_params(p);
    chain.accept(std::vector<int32_t>{2, 0, 1, 1});
    CHECK(chain.sample(std::vector<float>{2.0f, -2.0f, 2.0f, 1.0f}) == 2);
    // 0 penalised to 1.0 falls below 3's 1.5.
    CHECK(chain.sample(std::vector<float>{2.0f, -2.0f, 0.5f, 1.5f}) == 3);
    // -2 * 2 = -4 stays below -3 when 1 is negative.
    CHECK(chain.sample(std::vector<float>{-5.0f, -2.0f, -5.0f, -3.0f}) == 3);
    p.repeat_penalty = 4.0f;
    p.repeat_last_n = 64;
    SamplerChain strong = SamplerChain::from_params(p);
    strong.accept(0);
    CHECK(strong.sample(std::vector<float>{3.0f, 2.0f}) == 1);
}
