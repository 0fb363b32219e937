// N-gram speculation (docs/speculation.md): the drafter against a brute-force
// lookup, and the scheduler verifying drafts over the fake context -- the
// text equals plain decoding's (greedy and seeded, alone and among 15 other
// sequences, with max_tokens and stop strings), drafts are accepted when the
// model repeats itself, and drafts use only the rows a call leaves free. A
// draft model (a second fake context): the same text, and the slots'
// proposals of a step sharing one draft call per proposal step.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fake_context.h"
#include "ferrox/ngram_draft.h"
#include "letter_tokenizer.h"
#include "random_data.h"
#include "scheduler.h"

using namespace ferrox;
using namespace ferrox::server;
using ferrox::test::FakeContext;
using ferrox::test::kFirstLetter;

namespace {

// The drafter's rule, written the slow way: for n from the longest down,
// the newest earlier end of the last n tokens within the window.
std::vector<int32_t> reference_draft(const std::vector<int32_t>& t, uint32_t max_draft,
                                     const NgramDraftParams& p) {
    const size_t len = t.size();
    if (len < 2 || max_draft == 0) return {};
    for (size_t n = std::min<size_t>(p.max_ngram, len); n >= std::max<size_t>(p.min_ngram, 1);
         --n) {
        for (size_t e = len - 1; e-- > 0;) {
            if (len - 1 - e > p.window) break;
            if (e + 1 < n) continue;
            if (std::equal(t.end() - long(n), t.end(), t.begin() + long(e + 1 - n))) {
                const size_t k = std::min<size_t>(max_draft, len - e - 1);
                return {t.begin() + long(e + 1), t.begin() + long(e + 1 + k)};
            }
        }
        if (n == 1) break;
    }
    return {};
}

struct Rig {
    std::unique_ptr<Tokenizer> tok = test::letter_tokenizer();
    FakeContext* ctx = nullptr;  // owned by the scheduler
    Metrics metrics;
    std::unique_ptr<Scheduler> scheduler;

    FakeContext* draft = nullptr;  // the draft model's, when one drafts

    // draft_memory > 0: a draft model (a fake of that memory, its own cells)
    // drafts instead of prompt lookup; the target's own memory makes it the
    // target itself (always right), another one right only sometimes.
    Rig(uint32_t n_seq, size_t memory, uint32_t n_ctx = 4096, size_t draft_memory = 0,
        uint32_t draft_ctx = 4096) {
        auto fake =
            std::make_unique<FakeContext>(n_ctx, n_seq, uint32_t(tok->vocab_size()), kFirstLetter);
        fake->memory = memory;
        ctx = fake.get();
        SchedulerOptions o;
        o.sequences = n_seq;
        o.max_queue = 64;
        scheduler = std::make_unique<Scheduler>(*tok, std::move(fake), o, metrics);
        if (draft_memory > 0) {
            auto d = std::make_unique<FakeContext>(draft_ctx, n_seq, uint32_t(tok->vocab_size()),
                                                   kFirstLetter);
            d->memory = draft_memory;
            draft = d.get();
            scheduler->use_draft_model(std::move(d));
        }
    }
};

struct Ask {
    std::vector<int32_t> prompt;
    uint32_t max_tokens = 40;
    uint32_t draft = 0;
    float temperature = 0;
    uint64_t seed = 0;
    std::vector<std::string> stop;
};

struct Answer {
    std::string text;
    Event done;
};

// Steps the scheduler until every job has ended; `after_step` runs after
// each step.
std::vector<Answer> run_all(Rig& rig, const std::vector<Ask>& asks,
                            const std::function<void()>& after_step = {}) {
    std::vector<std::shared_ptr<Job>> jobs;
    for (const Ask& a : asks) {
        GenerationRequest r;
        r.prompt = a.prompt;
        r.max_tokens = a.max_tokens;
        r.draft_max = a.draft;
        r.sampling.base.temperature = a.temperature;
        r.sampling.base.seed = a.seed;
        r.stop = a.stop;
        r.cache_scope = "tenant";
        auto s = rig.scheduler->submit(std::move(r));
        REQUIRE(s.refusal == Scheduler::Refusal::None);
        jobs.push_back(s.job);
    }
    std::vector<Answer> out(asks.size());
    std::vector<bool> done(asks.size(), false);
    for (int step = 0; step < 2000; ++step) {
        bool all = true;
        for (size_t i = 0; i < jobs.size(); ++i) {
            while (auto e = jobs[i]->next(std::chrono::milliseconds(0))) {
                REQUIRE_FALSE(done[i]);
                if (e->kind == Event::Kind::Text)
                    out[i].text += e->text;
                else
                    out[i].done = std::move(*e), done[i] = true;
            }
            all = all && done[i];
        }
        if (all) return out;
        rig.scheduler->step();
        if (after_step) after_step();
    }
    FAIL("the jobs did not end within 2000 steps");
    return out;
}

std::vector<int32_t> letters(std::mt19937_64& rng, size_t n) {
    std::uniform_int_distribution<int32_t> letter(kFirstLetter, kFirstLetter + 25);
    std::vector<int32_t> p(n);
    for (auto& t : p) t = letter(rng);
    return p;
}

// The most rows any decode call gave one sequence.
size_t widest_rows(const FakeContext& ctx) {
    size_t most = 0;
    for (const auto& call : ctx.decodes) {
        std::map<int32_t, size_t> per_seq;
        for (const auto& row : call) most = std::max(most, ++per_seq[row.seq]);
    }
    return most;
}

}  // namespace

TEST_CASE("ngram_draft proposes what followed the newest longest match, as a brute force does") {
    std::mt19937_64 rng(test::test_seed(20261206));
    size_t proposed = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        // Few distinct tokens so that matches of every length occur.
        std::uniform_int_distribution<int32_t> tok(0, 1 + trial % 7);
        std::vector<int32_t> t(1 + rng() % 60);
        for (auto& x : t) x = tok(rng);
        NgramDraftParams p;
        p.max_ngram = 1 + uint32_t(rng() % 4);
        p.min_ngram = 1 + uint32_t(rng() % p.max_ngram);
        p.window = 1 + uint32_t(rng() % 70);
        const uint32_t k = uint32_t(rng() % 9);
        const auto got = ngram_draft(t, k, p);
        INFO("trial " << trial << " len " << t.size() << " n " << p.min_ngram << ".." << p.max_ngram
                      << " window " << p.window << " k " << k);
        REQUIRE(got == reference_draft(t, k, p));
        proposed += !got.empty();
    }
    CHECK(proposed > 1000);  // the comparison was not only of empty drafts
}

TEST_CASE("ngram_draft on a quoted text, and the bounds of its input") {
    const std::vector<int32_t> t{5, 6, 7, 8, 9, 1, 2, 5, 6, 7};
    CHECK(ngram_draft(t, 2) == std::vector<int32_t>{8, 9});
    CHECK(ngram_draft(t, 8) == std::vector<int32_t>{8, 9, 1, 2, 5, 6, 7});
    CHECK(ngram_draft(t, 0).empty());
    CHECK(ngram_draft(std::vector<int32_t>{4}, 3).empty());
    CHECK(ngram_draft(std::vector<int32_t>{4, 4}, 3) == std::vector<int32_t>{4});
    NgramDraftParams narrow;
    narrow.window = 3;  // the earlier 5 6 7 is out of reach
    CHECK(ngram_draft(t, 2, narrow).empty());
}

TEST_CASE("the draft length doubles on full acceptance, halves on none, within 1..max") {
    CHECK(adapt_draft_length(4, 8, 4, 4) == 8);
    CHECK(adapt_draft_length(8, 8, 8, 8) == 8);
    CHECK(adapt_draft_length(4, 8, 4, 0) == 2);
    CHECK(adapt_draft_length(1, 8, 1, 0) == 1);
    CHECK(adapt_draft_length(4, 8, 4, 2) == 4);
    CHECK(adapt_draft_length(4, 8, 0, 0) == 4);
}

TEST_CASE("speculative greedy decoding gives plain decoding's text, alone and among 15 others") {
    std::mt19937_64 rng(test::test_seed(20261207));
    const size_t memory = GENERATE(size_t(1), size_t(2), size_t(0));
    INFO("the fake's memory " << memory);
    std::vector<Ask> asks;
    for (int i = 0; i < 16; ++i) {
        Ask a;
        // At most 16 prompt tokens, so that every call, prefill or decode,
        // must hold at most 16 rows.
        a.prompt = letters(rng, 3 + rng() % 14);
        a.max_tokens = 20 + uint32_t(rng() % 40);
        a.draft = 8;
        asks.push_back(a);
    }
    std::vector<Ask> plain = asks;
    for (auto& a : plain) a.draft = 0;

    Rig plain_rig(16, memory);
    const auto want = run_all(plain_rig, plain);
    CHECK(plain_rig.metrics.spec_drafted_tokens == 0);
    CHECK(widest_rows(*plain_rig.ctx) > 1);  // prompts: several rows of one sequence

    SECTION("alone") {
        uint64_t accepted = 0;
        for (size_t i = 0; i < asks.size(); ++i) {
            Rig rig(1, memory);
            const auto got = run_all(rig, {asks[i]});
            CHECK(got[0].text == want[i].text);
            CHECK(got[0].done.finish == want[i].done.finish);
            CHECK(got[0].done.completion_tokens == want[i].done.completion_tokens);
            CHECK(got[0].done.accepted_tokens <= got[0].done.drafted_tokens);
            CHECK(rig.metrics.spec_accepted_tokens == got[0].done.accepted_tokens);
            CHECK(rig.metrics.spec_drafted_tokens == got[0].done.drafted_tokens);
            CHECK(rig.metrics.generation_tokens == got[0].done.completion_tokens);
            accepted += got[0].done.accepted_tokens;
            // Every token emitted was a verified row's: the cache holds the
            // prompt and all generated tokens but the last, nothing rejected.
            CHECK(rig.ctx->cells_of(0) ==
                  asks[i].prompt.size() + got[0].done.completion_tokens - 1);
        }
        // A model that repeats itself gets its drafts accepted.
        if (memory > 0) CHECK(accepted > 100);
    }
    SECTION("among 15 others, in 16 sequences") {
        // 16 decoding sequences fill the call: drafts only once some ended.
        Rig rig(16, memory);
        const auto got = run_all(rig, asks);
        for (size_t i = 0; i < asks.size(); ++i) {
            CHECK(got[i].text == want[i].text);
            CHECK(got[i].done.completion_tokens == want[i].done.completion_tokens);
        }
        for (const auto& call : rig.ctx->decodes) CHECK(call.size() <= 16);
        if (memory > 0) CHECK(rig.metrics.spec_accepted_tokens > 0);
    }
    SECTION("among 15 others, in 4 sequences") {
        // 4 sequences leave 12 rows of each call to the drafts.
        Rig rig(4, memory);
        const auto got = run_all(rig, asks);
        for (size_t i = 0; i < asks.size(); ++i) CHECK(got[i].text == want[i].text);
        for (const auto& call : rig.ctx->decodes) CHECK(call.size() <= 16);
        CHECK(widest_rows(*rig.ctx) > 1);
    }
}

TEST_CASE("speculation stops where plain decoding stops: max_tokens and stop strings") {
    std::mt19937_64 rng(test::test_seed(20261208));
    for (int trial = 0; trial < 40; ++trial) {
        Ask a;
        a.prompt = letters(rng, 4 + rng() % 10);
        a.max_tokens = 1 + uint32_t(rng() % 30);
        a.draft = 1 + uint32_t(rng() % 15);
        Rig probe(1, 1);
        Ask longer = a;
        longer.draft = 0;
        longer.max_tokens = 60;
        const std::string text = run_all(probe, {longer})[0].text;
        // A stop string from inside the plain text, so that it is met.
        if (trial % 2 == 0 && text.size() > 12) a.stop = {text.substr(5 + rng() % 6, 2)};
        Ask plain = a;
        plain.draft = 0;
        Rig plain_rig(1, 1), spec_rig(1, 1);
        const auto want = run_all(plain_rig, {plain})[0];
        const auto got = run_all(spec_rig, {a})[0];
        INFO("trial " << trial << " max_tokens " << a.max_tokens << " draft " << a.draft);
        CHECK(got.text == want.text);
        CHECK(got.done.finish == want.done.finish);
        CHECK(got.done.stop_string == want.done.stop_string);
        CHECK(got.done.completion_tokens == want.done.completion_tokens);
        CHECK(got.done.completion_tokens <= a.max_tokens);
    }
}

TEST_CASE("seeded sampling with speculation draws plain sampling's tokens for the seed") {
    std::mt19937_64 rng(test::test_seed(20261209));
    std::vector<Ask> asks;
    for (int i = 0; i < 6; ++i) {
        Ask a;
        a.prompt = letters(rng, 5 + rng() % 10);
        a.max_tokens = 50;
        a.draft = 6;
        a.temperature = 3.0f;  // the fake's peak is not always drawn
        a.seed = rng();
        asks.push_back(a);
    }
    std::vector<Ask> plain = asks;
    for (auto& a : plain) a.draft = 0;
    Rig plain_rig(6, 1), spec_rig(6, 1);
    const auto want = run_all(plain_rig, plain);
    const auto got = run_all(spec_rig, asks);
    for (size_t i = 0; i < asks.size(); ++i) CHECK(got[i].text == want[i].text);
    CHECK(spec_rig.metrics.spec_accepted_tokens > 0);
    // The draws did differ from greedy somewhere (else this tested greedy).
    std::vector<Ask> greedy = plain;
    for (auto& a : greedy) a.temperature = 0;
    Rig greedy_rig(6, 1);
    const auto g = run_all(greedy_rig, greedy);
    size_t differ = 0;
    for (size_t i = 0; i < asks.size(); ++i) differ += g[i].text != want[i].text;
    CHECK(differ > 0);
}

TEST_CASE("a draft model's drafts give plain decoding's text, alone and among others") {
    std::mt19937_64 rng(test::test_seed(20261210));
    // The target depends on its last 2 tokens; the draft on 2 (the target
    // itself: every draft right), on 1 (sometimes right) or on all (never).
    const size_t draft_memory = GENERATE(size_t(2), size_t(1), size_t(50));
    INFO("the draft's memory " << draft_memory);
    std::vector<Ask> asks;
    for (int i = 0; i < 12; ++i) {
        Ask a;
        a.prompt = letters(rng, 3 + rng() % 14);
        a.max_tokens = 20 + uint32_t(rng() % 40);
        a.draft = 1 + uint32_t(rng() % 15);
        asks.push_back(a);
    }
    std::vector<Ask> plain = asks;
    for (auto& a : plain) a.draft = 0;
    Rig plain_rig(12, 2);
    const auto want = run_all(plain_rig, plain);

    SECTION("alone") {
        uint64_t drafted = 0, accepted = 0;
        for (size_t i = 0; i < asks.size(); ++i) {
            Rig rig(1, 2, 4096, draft_memory);
            const auto got = run_all(rig, {asks[i]});
            CHECK(got[0].text == want[i].text);
            CHECK(got[0].done.completion_tokens == want[i].done.completion_tokens);
            CHECK(rig.metrics.spec_drafted_tokens == got[0].done.drafted_tokens);
            CHECK(rig.metrics.spec_accepted_tokens == got[0].done.accepted_tokens);
            drafted += got[0].done.drafted_tokens;
            accepted += got[0].done.accepted_tokens;
            // The target's cells: exactly the emitted history; the draft's:
            // a prefix of it (its rejected guesses dropped), past the prompt.
            CHECK(rig.ctx->cells_of(0) ==
                  asks[i].prompt.size() + got[0].done.completion_tokens - 1);
            CHECK(rig.draft->cells_of(0) <= rig.ctx->cells_of(0) + 1);
            CHECK(rig.draft->cells_of(0) >= asks[i].prompt.size());
        }
        CHECK(drafted > 100);
        if (draft_memory == 2) CHECK(accepted == drafted);
        if (draft_memory == 1) CHECK((accepted > 0 && accepted < drafted));
    }
    SECTION("12 requests in 4 sequences, and in 12") {
        for (const uint32_t n_seq : {4u, 12u}) {
            Rig rig(n_seq, 2, 4096, draft_memory);
            const auto got = run_all(rig, asks);
            for (size_t i = 0; i < asks.size(); ++i) CHECK(got[i].text == want[i].text);
            for (const auto& call : rig.ctx->decodes) CHECK(call.size() <= 16);
            CHECK(rig.metrics.spec_drafted_tokens > 0);
        }
    }
    SECTION("a draft context too small for every slot's cells: drafts go, text stays") {
        Rig rig(4, 2, 4096, draft_memory, 40);
        const auto got = run_all(rig, asks);
        for (size_t i = 0; i < asks.size(); ++i) CHECK(got[i].text == want[i].text);
        // 4 slots' histories (20 tokens or more each) cannot all fit 40
        // cells, so shared calls found the cells full; drafting went on.
        CHECK(rig.metrics.spec_drafted_tokens > 0);
    }
}

TEST_CASE("a draft model's seeded drafts: the plain draws for the seed") {
    std::mt19937_64 rng(test::test_seed(20261211));
    std::vector<Ask> asks;
    for (int i = 0; i < 6; ++i) {
        Ask a;
        a.prompt = letters(rng, 5 + rng() % 10);
        a.max_tokens = 50;
        a.draft = 6;
        a.temperature = 3.0f;
        a.seed = rng();
        asks.push_back(a);
    }
    std::vector<Ask> plain = asks;
    for (auto& a : plain) a.draft = 0;
    Rig plain_rig(6, 2), spec_rig(6, 2, 4096, 2);
    const auto want = run_all(plain_rig, plain);
    const auto got = run_all(spec_rig, asks);
    for (size_t i = 0; i < asks.size(); ++i) CHECK(got[i].text == want[i].text);
    CHECK(spec_rig.metrics.spec_accepted_tokens > 0);
    CHECK(spec_rig.metrics.spec_accepted_tokens < spec_rig.metrics.spec_drafted_tokens);
}

TEST_CASE("a draft model's proposals for 8 slots share one draft call per step") {
    std::mt19937_64 rng(test::test_seed(20261212));
    // The draft is the target itself: every guess is right, so the drafts
    // stay long and every step's proposals have a catch-up of 2 rows.
    // Prompts of 17 tokens or more: the draft decodes each one alone (a
    // call of more than 16 rows), apart from the steps' shared calls. Short
    // drafts, so that several of the 8 slots draft in the same step.
    std::vector<Ask> asks;
    for (int i = 0; i < 8; ++i) {
        Ask a;
        a.prompt = letters(rng, 17 + rng() % 20);
        a.max_tokens = 30 + uint32_t(rng() % 30);
        a.draft = 1 + uint32_t(rng() % 3);
        asks.push_back(a);
    }
    std::vector<Ask> plain = asks;
    for (auto& a : plain) a.draft = 0;
    Rig plain_rig(8, 2);
    const auto want = run_all(plain_rig, plain);

    Rig rig(8, 2, 4096, 2);
    size_t seen = 0, steps_of_many = 0, shared_calls = 0, per_slot_calls = 0;
    const auto got = run_all(rig, asks, [&] {
        // This step's draft calls: a prompt's catch-up alone, or a shared
        // call with one row group per drafting slot. A slot takes part in
        // one call per token it drafts (its catch-up, then each guess but
        // the last); shared, the step's calls number its longest draft.
        std::map<int32_t, size_t> calls_of;
        size_t shared = 0;
        for (; seen < rig.draft->decodes.size(); ++seen) {
            const auto& call = rig.draft->decodes[seen];
            std::set<int32_t> seqs;
            for (const auto& row : call) seqs.insert(row.seq);
            if (call.size() > 16) {
                CHECK(seqs.size() == 1);
                continue;
            }
            ++shared;
            for (const int32_t s : seqs) ++calls_of[s];
        }
        size_t longest = 0, sum = 0;
        for (const auto& [seq, n] : calls_of) longest = std::max(longest, n), sum += n;
        CHECK(shared == longest);
        steps_of_many += calls_of.size() > 1;
        shared_calls += shared;
        per_slot_calls += sum;
    });
    for (size_t i = 0; i < asks.size(); ++i) {
        CHECK(got[i].text == want[i].text);
        CHECK(got[i].done.completion_tokens == want[i].done.completion_tokens);
    }
    // Every draft token was guessed in one call of its slot's, and right.
    CHECK(per_slot_calls == rig.metrics.spec_drafted_tokens);
    CHECK(rig.metrics.spec_accepted_tokens == rig.metrics.spec_drafted_tokens);
    // Several slots drafted together in many steps, in far fewer calls than
    // one slot at a time would take.
    CHECK(steps_of_many > 10);
    CHECK(shared_calls * 2 < per_slot_calls);
    // Each slot's draft cells: a prefix of its target cells' history.
    for (int32_t seq = 0; seq < 8; ++seq) {
        CHECK(rig.draft->cells_of(seq) > 17);
        CHECK(rig.draft->cells_of(seq) <= rig.ctx->cells_of(seq) + 1);
    }
}

TEST_CASE("a draft model's shared calls hold at most 16 rows: short prompts' catch-ups split") {
    std::mt19937_64 rng(test::test_seed(20261213));
    // Prompts under 16 tokens: each slot's first proposal decodes its whole
    // prompt with the step's other rows, 8 x up to 16 rows. With both fakes
    // answering otherwise for a cell computed in a call of more than 16
    // rows, the draft (the target itself) guesses right only if no shared
    // call went past 16. Drafts of 1: the 8 slots' rows and drafts fill the
    // target's call, so every slot drafts every step (a slot left without a
    // draft for a while catches up past 16 rows alone, in a shape of its own).
    std::vector<Ask> asks;
    for (int i = 0; i < 8; ++i) {
        Ask a;
        a.prompt = letters(rng, 8 + rng() % 7);
        a.max_tokens = 20 + uint32_t(rng() % 20);
        a.draft = 1;
        asks.push_back(a);
    }
    std::vector<Ask> plain = asks;
    for (auto& a : plain) a.draft = 0;
    Rig plain_rig(8, 2);
    plain_rig.ctx->few_rows = 16;
    const auto want = run_all(plain_rig, plain);
    Rig rig(8, 2, 4096, 2);
    rig.ctx->few_rows = 16;
    rig.draft->few_rows = 16;
    const auto got = run_all(rig, asks);
    for (size_t i = 0; i < asks.size(); ++i) CHECK(got[i].text == want[i].text);
    for (const auto& call : rig.draft->decodes) CHECK(call.size() <= 16);
    CHECK(rig.metrics.spec_drafted_tokens > 50);
    CHECK(rig.metrics.spec_accepted_tokens == rig.metrics.spec_drafted_tokens);
}
