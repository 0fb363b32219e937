// The scheduler's recurrent-state checkpoints (server/state_checkpoints.h)
// over a fake context in recurrent mode (fake_context.h): a prompt that
// extends a cached one resumes from the last checkpoint inside the shared
// prefix, from an idle sequence or, sharing it whole, from a busy one; the
// checkpoints stay within their budget, least recently used evicted; without
// a budget every prompt is computed whole. Each answer is checked against
// the fake model's own continuation, so resuming from the wrong place shows.
// A prompt resumes at an earlier prompt's end only where every position it
// computes takes the path it takes from scratch (prefill_plan.h): the fake
// then tells the paths apart, the answers are compared with a scheduler that
// keeps no checkpoint, and the plan's fault must show.
#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fake_context.h"
#include "letter_tokenizer.h"
#include "random_data.h"
#include "scheduler.h"

using namespace ferrox;
using namespace ferrox::server;
using ferrox::test::FakeContext;

namespace {

constexpr uint32_t kChunk = 8;

struct Hybrid {
    std::unique_ptr<Tokenizer> tok = test::letter_tokenizer();
    FakeContext* ctx = nullptr;  // owned by the scheduler
    Metrics metrics;
    std::unique_ptr<Scheduler> scheduler;
    std::mt19937_64 rng{ferrox::test::test_seed(20261207)};

    // `paths`: calls of up to 16 rows and longer ones give different cells.
    Hybrid(uint64_t budget, uint32_t n_seq = 2, uint64_t checkpoint_size = 64,
           uint32_t chunk = kChunk, uint32_t batch = 0, bool paths = false) {
        auto fake = std::make_unique<FakeContext>(512, n_seq, uint32_t(tok->vocab_size()),
                                                  test::kFirstLetter);
        fake->recurrent = true;
        fake->checkpoint_size = checkpoint_size;
        fake->few_rows = paths ? PrefillShape::kFewRows : 0;
        ctx = fake.get();
        SchedulerOptions o;
        o.sequences = n_seq;
        o.max_queue = 8;
        o.prefill_chunk = chunk;
        o.batch = batch;
        o.checkpoint_memory = budget;
        scheduler = std::make_unique<Scheduler>(*tok, std::move(fake), o, metrics);
    }
    std::vector<int32_t> letters(size_t n) {
        std::uniform_int_distribution<int32_t> letter(test::kFirstLetter, test::kFirstLetter + 25);
        std::vector<int32_t> p(n);
        for (auto& t : p) t = letter(rng);
        return p;
    }
    std::shared_ptr<Job> submit(std::vector<int32_t> prompt, uint32_t max_tokens) {
        GenerationRequest r;
        r.prompt = std::move(prompt);
        r.max_tokens = max_tokens;
        r.sampling.base.temperature = 0;
        auto s = scheduler->submit(std::move(r));
        REQUIRE(s.refusal == Scheduler::Refusal::None);
        return s.job;
    }
    // Steps until `job` ends; its text and Done.
    std::pair<std::string, Event> finish(Job& job) {
        std::string text;
        for (int step = 0; step < 1000; ++step) {
            while (auto e = job.next(std::chrono::milliseconds(0))) {
                if (e->kind == Event::Kind::Done) return {text, *e};
                text += e->text;
            }
            scheduler->step();
        }
        FAIL("the job did not end");
        return {};
    }
    std::string expected(const std::vector<int32_t>& prompt, size_t n) const {
        return tok->decode(ctx->continuation(prompt, n));
    }
};

// The next turn of a chat: the prompt, the answer, then `more` new tokens.
std::vector<int32_t> extended(Hybrid& h, std::vector<int32_t> prompt, size_t answer, size_t more) {
    const auto said = h.ctx->continuation(prompt, answer);
    prompt.insert(prompt.end(), said.begin(), said.end());
    const auto next = h.letters(more);
    prompt.insert(prompt.end(), next.begin(), next.end());
    return prompt;
}

}  // namespace

TEST_CASE("a hybrid prompt that extends a cached one resumes from the previous prompt's end") {
    Hybrid h(1 << 20);
    const auto first = h.letters(21);
    auto [text1, done1] = h.finish(*h.submit(first, 3));
    CHECK(text1 == h.expected(first, 3));
    CHECK(done1.cached_tokens == 0);
    // Cached: 21 prompt tokens and 2 of the answer; checkpoints at the chunk
    // ends 8 and 16 and at the prompt's end, 21 (chunks of 8 rows all take
    // the single-row path, so resuming there is exact).
    const auto second = extended(h, first, 3, 6);
    auto [text2, done2] = h.finish(*h.submit(second, 4));
    CHECK(done2.cached_tokens == 21);
    CHECK(h.ctx->rewinds == 1);
    CHECK(text2 == h.expected(second, 4));
    CHECK(h.metrics.checkpoint_resumes == 1);
    CHECK(h.metrics.checkpoints_taken == 3 + 2);  // 8, 16, 21; then 24 and 30 of the second
}

TEST_CASE("without a checkpoint budget a hybrid prompt is computed whole, with the same answer") {
    Hybrid h(0);
    const auto first = h.letters(21);
    (void)h.finish(*h.submit(first, 3));
    const auto second = extended(h, first, 3, 6);
    auto [text, done] = h.finish(*h.submit(second, 4));
    CHECK(done.cached_tokens == 0);
    CHECK(h.ctx->rewinds == 0);
    CHECK(text == h.expected(second, 4));
}

TEST_CASE("a busy sequence's prefix is shared whole and the copy rewound to its checkpoint") {
    Hybrid h(1 << 20);
    const auto first = h.letters(20);
    auto busy = h.submit(first, 40);
    for (int i = 0; i < 6; ++i) h.scheduler->step();  // prefilled, generating
    // Shares 18 tokens with the busy one: its checkpoint at 16 applies.
    auto second = std::vector<int32_t>(first.begin(), first.begin() + 18);
    const auto more = h.letters(7);
    second.insert(second.end(), more.begin(), more.end());
    auto other = h.submit(second, 5);
    auto [text2, done2] = h.finish(*other);
    CHECK(done2.cached_tokens == 16);
    CHECK(text2 == h.expected(second, 5));
    auto [text1, done1] = h.finish(*busy);
    CHECK(text1 == h.expected(first, 40));  // the original went on untouched
}

TEST_CASE("checkpoints stay within their budget, least recently used evicted first") {
    // Room for two checkpoints of a 40-token prefix (state, tokens, bookkeeping).
    const uint64_t size = 1000, budget = 2 * (size + 40 * 4 + 128);
    Hybrid h(budget, 2, size);
    const auto first = h.letters(41);
    (void)h.finish(*h.submit(first, 2));
    h.scheduler->step();                        // publishes the gauges
    CHECK(h.metrics.checkpoints_taken == 6);    // 8 .. 40 and the prompt's end, 41
    CHECK(h.metrics.checkpoints_evicted == 5);  // 40 and 41 together are just over
    CHECK(h.metrics.checkpoint_bytes > 0);
    CHECK(uint64_t(h.metrics.checkpoint_bytes) <= budget);
    // The most recent one (41) is kept: the next turn resumes there.
    const auto second = extended(h, first, 2, 5);
    auto [text, done] = h.finish(*h.submit(second, 3));
    CHECK(done.cached_tokens == 41);
    CHECK(text == h.expected(second, 3));
    // One checkpoint alone over the budget is never taken.
    Hybrid tiny(100, 2, size);
    const auto p = tiny.letters(20);
    auto [t, d] = tiny.finish(*tiny.submit(p, 2));
    CHECK(tiny.metrics.checkpoints_taken == 0);
    CHECK(t == tiny.expected(p, 2));
}

namespace {

// Two turns of a chat on schedulers with chunks of 40 and calls of up to 64
// rows whose fake tells the row paths apart: the first prompt of `first`
// tokens, 3 answered, `more` new ones. The second turn's cached tokens
// with checkpoints, and whether both answers equal those of a scheduler
// that keeps none.
std::pair<uint32_t, bool> second_turn(size_t first, size_t more) {
    constexpr uint32_t chunk = 40, batch = 64;
    Hybrid with(1 << 20, 2, 64, chunk, batch, true), without(0, 2, 64, chunk, batch, true);
    const auto p1 = with.letters(first);
    auto [a1, d1] = with.finish(*with.submit(p1, 3));
    auto [b1, e1] = without.finish(*without.submit(p1, 3));
    auto p2 = p1;
    for (char c : a1) p2.push_back(test::kFirstLetter + (c - 'a'));  // one token a letter
    const auto next = with.letters(more);
    p2.insert(p2.end(), next.begin(), next.end());
    auto [a2, d2] = with.finish(*with.submit(p2, 4));
    auto [b2, e2] = without.finish(*without.submit(p2, 4));
    CHECK(e2.cached_tokens == 0);
    return {d2.cached_tokens, a1 == b1 && a2 == b2};
}

}  // namespace

TEST_CASE("a next turn resumes at the previous prompt's end only where that is exact") {
    struct Case {
        const char* what;
        size_t first, more;
        uint32_t cached;  // the second turn's
        bool fault_shows;
    };
    // Chunks of 40: calls of up to 16 rows take the single-row path, longer
    // ones the panel path, as from scratch they must.
    const Case cases[] = {
        {"the rest of the chunk (20 rows) is one call", 60, 30, 60, false},
        {"the chunk's last 10 rows go with the next chunk (33 rows)", 70, 30, 70, true},
        {"the previous prompt's last chunk took the single-row path", 50, 40, 40, true},
        {"no exact call: the next chunk is a 5-row one", 70, 12, 40, true},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        set_prefill_plan_fault(false);
        const auto [cached, same] = second_turn(c.first, c.more);
        CHECK(cached == c.cached);
        CHECK(same);
        if (!c.fault_shows) continue;  // there the fault's call is the right one
        // The fault resumes at the prompt's end and cuts at the chunk end
        // regardless: some position takes the other path, and it shows.
        set_prefill_plan_fault(true);
        const auto [bad_cached, bad_same] = second_turn(c.first, c.more);
        set_prefill_plan_fault(false);
        CHECK(bad_cached == c.first);
        CHECK_FALSE(bad_same);
    }
}
