// The sampler chain: from_params draws what the first sampler (Sampler,
// removed) drew, each stage does what it says, and per-sequence chains keep
// separate random streams.
#include <algorithm>
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

namespace {
// Portable logits: mt19937's output is fixed by the standard; a distribution's is not.
std::vector<float> portable_logits(std::mt19937& rng, size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(rng() >> 8) * 0x1.0p-24f * 16.0f - 8.0f;
    return v;
}

// The draws of the first sampler (class Sampler at 9088ff8, since removed) for
// the settings and logits made below: 40 settings (greedy, top-k 0 and k,
// top-p, min-p, a repetition penalty), 20 draws each. Seeded output
// recorded by users stays reproducible while these hold.
const std::vector<std::vector<int32_t>> kSamplerDraws{
    {80, 202, 65, 134, 266, 23, 155, 182, 73, 154, 57, 33, 154, 147, 224, 154, 268, 186, 161, 122},
    {95, 56, 226, 17, 94, 151, 277, 67, 295, 15, 281, 14, 68, 129, 180, 31, 248, 101, 130, 262},
    {219, 94, 224, 231, 283, 110, 248, 46, 52, 234, 12, 278, 59, 125, 209, 99, 146, 145, 99, 152},
    {271, 19, 197, 55, 239, 93, 176, 215, 153, 292, 83, 76, 179, 257, 286, 7, 247, 299, 7, 207},
    {140, 117, 65, 47, 83, 220, 182, 132, 78, 42, 48, 136, 219, 16, 232, 291, 279, 231, 36, 267},
    {165, 29, 80, 186, 260, 64, 242, 111, 55, 236, 176, 147, 205, 257, 40, 107, 214, 75, 15, 277},
    {180, 20, 282, 230, 277, 150, 85, 138, 155, 83, 9, 263, 17, 271, 211, 41, 180, 252, 110, 110},
    {159, 253, 191, 80,  274, 181, 269, 253, 134, 192,
     170, 150, 178, 210, 291, 30,  52,  123, 204, 138},
    {203, 165, 28, 205, 216, 292, 17, 263, 195, 40, 240, 91, 148, 3, 127, 277, 172, 237, 238, 101},
    {285, 11, 278, 87, 167, 283, 12, 211, 228, 247, 16, 170, 224, 93, 120, 241, 5, 131, 94, 95},
    {74, 9, 239, 71, 122, 151, 245, 249, 178, 219, 47, 294, 129, 79, 240, 61, 158, 219, 284, 277},
    {189, 212, 283, 205, 59, 202, 212, 118, 287, 83, 283, 223, 17, 139, 55, 76, 25, 214, 217, 112},
    {202, 270, 90, 196, 193, 259, 160, 253, 68, 289, 248, 170, 283, 95, 171, 264, 98, 162, 144, 15},
    {262, 297, 228, 94, 45, 155, 179, 273, 168, 209, 158, 11, 59, 261, 112, 53, 109, 23, 106, 104},
    {174, 95, 198, 12, 121, 85, 194, 7, 147, 190, 138, 284, 166, 29, 40, 179, 131, 54, 225, 174},
    {91, 205, 34, 141, 48, 254, 29, 253, 113, 230, 296, 214, 244, 108, 48, 292, 80, 126, 181, 186},
    {224, 209, 16, 115, 78, 75, 128, 209, 90, 159, 172, 25, 23, 89, 27, 157, 292, 184, 258, 119},
    {0, 207, 21, 100, 18, 219, 252, 277, 42, 168, 102, 120, 84, 55, 28, 96, 150, 15, 140, 81},
    {178, 249, 164, 160, 260, 9, 4, 48, 226, 145, 149, 80, 47, 258, 176, 159, 185, 21, 1, 209},
    {156, 54, 18, 149, 203, 263, 192, 190, 0, 118, 63, 207, 105, 11, 37, 32, 283, 71, 156, 194},
    {188, 240, 22, 190, 280, 285, 164, 53, 70, 216, 162, 53, 99, 182, 192, 99, 277, 157, 211, 281},
    {245, 40, 271, 229, 31, 241, 191, 127, 119, 52, 284, 8, 280, 53, 185, 116, 251, 266, 36, 136},
    {297, 73, 111, 90, 279, 184, 224, 2, 263, 88, 90, 35, 273, 163, 162, 185, 133, 110, 202, 276},
    {248, 188, 211, 138, 282, 86, 181, 18, 180, 47, 231, 233, 210, 127, 163, 145, 288, 218, 299, 0},
    {274, 29, 144, 53, 46, 21, 233, 100, 173, 90, 47, 148, 142, 109, 71, 51, 243, 147, 201, 168},
    {207, 187, 141, 264, 110, 101, 199, 51, 40, 180, 32, 204, 193, 1, 48, 94, 118, 99, 187, 9},
    {169, 37, 76, 33, 220, 252, 168, 191, 144, 138, 32, 56, 22, 17, 157, 4, 299, 120, 211, 269},
    {121, 128, 220, 79, 139, 236, 20, 286, 52, 266, 55, 239, 138, 110, 93, 294, 223, 242, 141, 5},
    {40, 179, 13, 103, 55, 256, 267, 267, 18, 224, 144, 291, 196, 126, 45, 103, 166, 22, 296, 79},
    {141, 94, 221, 218, 39, 196, 15, 36, 7, 226, 180, 270, 152, 75, 62, 8, 235, 11, 118, 175},
    {285, 58, 253, 87, 193, 283, 146, 121, 79, 226, 296, 218, 275, 155, 35, 65, 186, 216, 132, 47},
    {145, 56, 37, 74, 133, 41, 97, 114, 112, 84, 275, 236, 92, 219, 243, 191, 263, 178, 239, 134},
    {264, 91, 281, 23, 195, 3, 86, 57, 199, 81, 221, 151, 50, 42, 69, 135, 109, 207, 158, 288},
    {87, 146, 128, 296, 6, 165, 209, 55, 173, 57, 208, 204, 214, 206, 150, 213, 126, 70, 186, 272},
    {135, 232, 38, 163, 147, 5, 214, 188, 58, 176, 218, 115, 61, 139, 242, 83, 86, 5, 146, 149},
    {28, 199, 208, 178, 90, 178, 295, 98, 63, 189, 229, 257, 34, 39, 108, 2, 99, 117, 30, 138},
    {163, 243, 137, 287, 123, 176, 236, 129, 69, 39, 209, 131, 89, 19, 283, 222, 204, 49, 248, 13},
    {36, 146, 262, 174, 267, 171, 137, 255, 107, 92, 153, 161, 266, 246, 27, 274, 227, 85, 61, 87},
    {6, 13, 211, 155, 40, 192, 192, 259, 90, 129, 39, 196, 49, 193, 53, 107, 59, 116, 268, 148},
    {281, 290, 241, 118, 21,  38,  146, 299, 193, 145,
     165, 29,  216, 269, 194, 103, 248, 40,  140, 226},
};
}  // namespace

TEST_CASE("from_params draws exactly what the first sampler drew for the same logits and seed") {
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 40; ++trial) {
        SamplerParams p;
        p.temperature = trial % 5 == 0 ? 0.0f : 0.3f + 0.1f * static_cast<float>(trial % 9);
        p.top_k = static_cast<uint32_t>(trial % 4 == 0 ? 0 : 5 + trial);
        p.top_p = trial % 3 == 0 ? 1.0f : 0.9f;
        p.min_p = trial % 2 ? 0.05f : 0.0f;
        p.repeat_penalty = trial % 4 == 1 ? 1.3f : 1.0f;
        p.repeat_last_n = 16;
        p.seed = rng();
        SamplerChain chain = SamplerChain::from_params(p);
        std::vector<int32_t> drawn;
        for (int step = 0; step < 20; ++step) {
            const int32_t t = chain.sample(portable_logits(rng, 300));
            drawn.push_back(t);
            chain.accept(t);
        }
        INFO("trial " << trial);
        CHECK(drawn == kSamplerDraws[size_t(trial)]);
    }
}

TEST_CASE("clear_history forgets the tokens and keeps the random stream") {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.5f;
    p.seed = 77;
    std::mt19937 rng(8);
    const auto logits = portable_logits(rng, 64);
    // One chain over two "turns" against a fresh chain that skips the first turn's draws.
    SamplerChain a = SamplerChain::from_params(p), b = SamplerChain::from_params(p);
    for (int i = 0; i < 5; ++i) {
        a.accept(a.sample(logits));
        (void)b.sample(logits);  // the same draws from the stream, nothing accepted
    }
    a.clear_history();
    CHECK(a.history().empty());
    for (int i = 0; i < 10; ++i) {
        const int32_t x = a.sample(logits), y = b.sample(logits);
        CHECK(x == y);
        a.accept(x);
        b.accept(y);
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

TEST_CASE("a logit bias adds each entry, in order, to its token in id order or any other") {
    // Against a plain reference (every entry compared with every candidate, the
    // stage's old loop): candidates in id order, shuffled, and cut to a subset;
    // entries repeated, out of range and negative.
    std::mt19937 rng(4041);
    for (int round = 0; round < 20; ++round) {
        const size_t n = 1 + rng() % 3000;
        const auto logits = random_logits(rng, n);
        std::vector<std::pair<int32_t, float>> bias;
        const size_t entries = 1 + rng() % 600;
        std::normal_distribution<float> d(0.0f, 5.0f);
        for (size_t i = 0; i < entries; ++i) {
            const int32_t id = static_cast<int32_t>(rng() % (n + 20)) - 10;
            bias.push_back({id, d(rng)});
            if (rng() % 8 == 0) bias.push_back({id, d(rng)});  // the same token again
        }
        for (int layout = 0; layout < 3; ++layout) {
            Candidates c;
            for (size_t i = 0; i < n; ++i)
                c.c.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
            if (layout >= 1) std::shuffle(c.c.begin(), c.c.end(), rng);
            if (layout == 2) c.c.resize(c.c.size() / 2 + 1);
            Candidates want = c;
            for (auto& x : want.c)
                for (const auto& [id, b] : bias)
                    if (x.id == id) x.logit += b;
            SamplerState state;
            logit_bias_stage(bias)->apply(c, state);
            REQUIRE(c.c.size() == want.c.size());
            for (size_t i = 0; i < c.c.size(); ++i) {
                INFO("round " << round << ", layout " << layout << ", candidate " << i);
                REQUIRE(c.c[i].id == want.c[i].id);
                REQUIRE(c.c[i].logit == want.c[i].logit);  // the same additions in the same order
            }
        }
    }
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

TEST_CASE("greedy after neutral stages takes the logits' argmax, as the candidate path does") {
    // The shortcut (penalties at their neutral values, then greedy) against the
    // candidate path, forced by a logit bias of 0 on one token (a stage that
    // changes nothing but says it might): the same token on random logits with
    // ties planted at the top (the lowest id wins) and -inf entries.
    std::mt19937 rng(4242);
    SamplerParams greedy;
    greedy.temperature = 0.0f;
    ChainParams direct;
    direct.base = greedy;
    ChainParams candidates = direct;
    candidates.logit_bias = {{3, 0.0f}};
    for (int round = 0; round < 200; ++round) {
        auto logits = random_logits(rng, 1000);
        const auto top = std::max_element(logits.begin(), logits.end());
        for (int tie = 0; tie < round % 4; ++tie) logits[rng() % logits.size()] = *top;
        if (round % 5 == 0) logits[rng() % logits.size()] = -INFINITY;
        auto a = SamplerChain::from_params(direct);
        auto b = SamplerChain::from_params(candidates);
        INFO("round " << round);
        const int32_t expected = b.sample(logits);
        CHECK(a.sample(logits) == expected);
        CHECK(logits[static_cast<size_t>(expected)] ==
              *std::max_element(logits.begin(), logits.end()));
        CHECK(std::find(logits.begin(), logits.end(), logits[static_cast<size_t>(expected)]) -
                  logits.begin() ==
              expected);  // the first of the highest
    }
    // An active penalty is not skipped: the seen top token loses to the next.
    std::vector<float> logits{1.0f, 5.0f, 4.0f};
    SamplerParams penalised = greedy;
    penalised.repeat_penalty = 2.0f;
    ChainParams with_penalty;
    with_penalty.base = penalised;
    auto chain = SamplerChain::from_params(with_penalty);
    chain.accept(1);
    CHECK(chain.sample(logits) == 2);
}
