// The scheduler's recurrent-state checkpoints (server/state_checkpoints.h)
// over a fake context in recurrent mode (fake_context.h): a prompt that
// extends a cached one resumes from the last checkpoint inside the shared
// prefix, from an idle sequence or, sharing it whole, from a busy one; the
// checkpoints stay within their budget, least recently used evicted; without
// a budget every prompt is computed whole. Each answer is checked against
// the fake model's own continuation, so resuming from the wrong place shows.
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

    Hybrid(uint64_t budget, uint32_t n_seq = 2, uint64_t checkpoint_size = 64) {
        auto fake = std::make_unique<FakeContext>(512, n_seq, uint32_t(tok->vocab_size()),
                                                  test::kFirstLetter);
        fake->recurrent = true;
        fake->checkpoint_size = checkpoint_size;
        ctx = fake.get();
        SchedulerOptions o;
        o.sequences = n_seq;
        o.max_queue = 8;
        o.prefill_chunk = kChunk;
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

TEST_CASE(
    "a hybrid prompt that extends a cached one resumes from its last whole-chunk checkpoint") {
    Hybrid h(1 << 20);
    const auto first = h.letters(21);
    auto [text1, done1] = h.finish(*h.submit(first, 3));
    CHECK(text1 == h.expected(first, 3));
    CHECK(done1.cached_tokens == 0);
    // Cached: 21 prompt tokens and 2 of the answer; whole chunks end at 8 and 16.
    const auto second = extended(h, first, 3, 6);
    auto [text2, done2] = h.finish(*h.submit(second, 4));
    CHECK(done2.cached_tokens == 16);
    CHECK(h.ctx->rewinds == 1);
    CHECK(text2 == h.expected(second, 4));
    CHECK(h.metrics.checkpoint_resumes == 1);
    CHECK(h.metrics.checkpoints_taken == 2 + 1);  // 8, 16; then 24 of the second prompt
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
    h.scheduler->step();                      // publishes the gauges
    CHECK(h.metrics.checkpoints_taken == 5);  // 8 .. 40
    CHECK(h.metrics.checkpoints_evicted == 3);
    CHECK(h.metrics.checkpoint_bytes > 0);
    CHECK(uint64_t(h.metrics.checkpoint_bytes) <= budget);
    // The most recent ones (32, 40) are kept: the next turn resumes at 40.
    const auto second = extended(h, first, 2, 5);
    auto [text, done] = h.finish(*h.submit(second, 3));
    CHECK(done.cached_tokens == 40);
    CHECK(text == h.expected(second, 3));
    // One checkpoint alone over the budget is never taken.
    Hybrid tiny(100, 2, size);
    const auto p = tiny.letters(20);
    auto [t, d] = tiny.finish(*tiny.submit(p, 2));
    CHECK(tiny.metrics.checkpoints_taken == 0);
    CHECK(t == tiny.expected(p, 2));
}
