// The sampler chain: from_params draws what Sampler draws, each stage does
// what it says, and per-sequence chains keep separate random streams.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "ferrox/sampler_chain.h"
#include "ferrox/sampling.h"

using namespace ferrox;

namespace {
std::vector<float> random_logits(std::mt19937& rng, size_t n) {
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}
}  // namespace

TEST_CASE("from_params draws exactly what Sampler draws for the same logits and history") {
    const uint32_t seed = 1234;
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 40; ++trial) {
        SamplerParams p;
        p.temperature = trial % 5 == 0 ? 0.0f : 0.3f + 0.1f * static_cast<float>(trial % 9);
        p.top_k = static_cast<uint32_t>(trial % 4 == 0 ? 0 : 5 + trial);
        p.top_p = trial % 3 == 0 ? 1.0f : 0.9f;
        p.min_p = trial % 2 ? 0.05f : 0.0f;
        p.repeat_penalty = trial % 4 == 1 ? 1.3f : 1.0f;
        p.repeat_last_n = 16;
        p.seed = rng();
        Sampler old(p);
        SamplerChain chain = SamplerChain::from_params(p);
        std::vector<int32_t> history;
        for (int step = 0; step < 20; ++step) {
            const auto logits = random_logits(rng, 300);
            const int32_t a = old.sample(logits, history);
            const int32_t b = chain.sample(logits);
            REQUIRE(a == b);
            history.push_back(a);
            chain.accept(a);
        }
    }
}

TEST_CASE("frequency and presence penalties lower a seen token by count * f + p") {
    std::vector<float> logits(8, 1.0f);
    logits[3] = 1.5f;
    SamplerChain chain(0);
    chain.add(penalties_stage(64, 1.0f, 0.2f, 0.1f)).add(greedy_stage());
    // Token 3 seen twice: 1.5 - 2 * 0.2 - 0.1 = 1.0, tied with the rest; the lowest id wins.
    chain.accept(std::vector<int32_t>{3, 3});
    CHECK(chain.sample(logits) == 0);
    SamplerChain once(0);
    once.add(penalties_stage(64, 1.0f, 0.2f, 0.1f)).add(greedy_stage());
    once.accept(3);  // 1.5 - 0.2 - 0.1 = 1.2: still the best
    CHECK(once.sample(logits) == 3);
}

TEST_CASE("a logit bias of -inf bans a token and a positive bias promotes one") {
    std::mt19937 rng(99);
    const auto logits = random_logits(rng, 50);
    const int32_t best = argmax(logits);
    SamplerChain ban(0);
    ban.add(logit_bias_stage({{best, -INFINITY}})).add(greedy_stage());
    CHECK(ban.sample(logits) != best);
    SamplerChain promote(0);
    promote.add(logit_bias_stage({{7, 100.0f}})).add(greedy_stage());
    CHECK(promote.sample(logits) == 7);
}

TEST_CASE("chains cloned per sequence draw from their own streams") {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    std::mt19937 rng(5);
    const auto logits = random_logits(rng, 64);
    const SamplerChain base = SamplerChain::from_params(p);
    SamplerChain a = base.clone_for(11), b = base.clone_for(11), c = base.clone_for(12);
    std::vector<int32_t> ta, tb, tc;
    for (int i = 0; i < 32; ++i) {
        // b is interleaved with c: a shared stream would make b differ from a.
        ta.push_back(a.sample(logits));
        tc.push_back(c.sample(logits));
        tb.push_back(b.sample(logits));
    }
    CHECK(ta == tb);
    CHECK(ta != tc);
}
