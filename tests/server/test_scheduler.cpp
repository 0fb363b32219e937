// The scheduler driven step by step over a fake context (fake_context.h), no
// model: admission and the queue, chunked prefill between decode steps,
// prefix sharing within one cache scope, cancellation, eviction and the
// no-room end, timeouts and shutdown. Each answer is checked against the
// fake model's own continuation of the prompt, so a scheduler that feeds a
// sequence the wrong cells or positions gets a different text.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fake_context.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "letter_tokenizer.h"
#include "random_data.h"
#include "scheduler.h"

using namespace ferrox;
using namespace ferrox::server;
using ferrox::test::FakeContext;

namespace {

using test::kFirstLetter;

std::unique_ptr<Tokenizer> letters() { return test::letter_tokenizer(); }

SchedulerOptions options(uint32_t max_queue, uint32_t chunk = 128, uint32_t budget = 256) {
    SchedulerOptions o;
    o.max_queue = max_queue;
    o.prefill_chunk = chunk;
    o.prefill_budget = budget;
    return o;
}

struct Rig {
    std::unique_ptr<Tokenizer> tok = letters();
    FakeContext* ctx = nullptr;  // owned by the scheduler
    Metrics metrics;
    std::unique_ptr<Scheduler> scheduler;
    std::mt19937_64 rng{ferrox::test::test_seed(20261206)};

    Rig(uint32_t n_ctx, uint32_t n_seq, SchedulerOptions options) {
        auto fake =
            std::make_unique<FakeContext>(n_ctx, n_seq, uint32_t(tok->vocab_size()), kFirstLetter);
        ctx = fake.get();
        options.sequences = n_seq;
        scheduler = std::make_unique<Scheduler>(*tok, std::move(fake), options, metrics);
    }

    std::vector<int32_t> prompt(size_t n) {
        std::uniform_int_distribution<int32_t> letter(kFirstLetter, kFirstLetter + 25);
        std::vector<int32_t> p(n);
        for (auto& t : p) t = letter(rng);
        return p;
    }
    std::string expected(const std::vector<int32_t>& prompt, size_t n) const {
        return tok->decode(ctx->continuation(prompt, n));
    }
    std::shared_ptr<Job> submit(std::vector<int32_t> prompt, uint32_t max_tokens,
                                std::string scope = "tenant") {
        GenerationRequest r;
        r.prompt = std::move(prompt);
        r.max_tokens = max_tokens;
        r.sampling.base.temperature = 0;  // greedy: the fake's peak
        r.cache_scope = std::move(scope);
        auto s = scheduler->submit(std::move(r));
        REQUIRE(s.refusal == Scheduler::Refusal::None);
        return s.job;
    }
};

// What a job said so far, read without waiting.
struct Said {
    std::string text;
    std::optional<Event> done;
};
void read(Job& job, Said& said) {
    while (auto e = job.next(std::chrono::milliseconds(0))) {
        REQUIRE_FALSE(said.done);  // nothing after Done
        if (e->kind == Event::Kind::Text)
            said.text += e->text;
        else
            said.done = std::move(*e);
    }
}

// Steps until every job ended (at most `limit` steps), reading their events.
std::vector<Said> run(Rig& rig, const std::vector<std::shared_ptr<Job>>& jobs, int limit = 500) {
    std::vector<Said> said(jobs.size());
    for (int step = 0; step < limit; ++step) {
        bool all = true;
        for (size_t i = 0; i < jobs.size(); ++i) {
            read(*jobs[i], said[i]);
            all = all && said[i].done.has_value();
        }
        if (all) return said;
        rig.scheduler->step();
    }
    FAIL("the jobs did not all end within " << limit << " steps");
    return said;
}

// The decode calls (by index) that hold a row of `seq`, from call `from` on.
std::vector<size_t> calls_of(const FakeContext& ctx, int32_t seq, size_t from = 0) {
    std::vector<size_t> out;
    for (size_t i = from; i < ctx.decodes.size(); ++i)
        for (const auto& row : ctx.decodes[i])
            if (row.seq == seq) {
                out.push_back(i);
                break;
            }
    return out;
}

}  // namespace

TEST_CASE("up to n_seq jobs run at once, max_queue more wait, and the rest are refused") {
    Rig rig(256, 2, options(1));
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < 3; ++i) {
        prompts.push_back(rig.prompt(5 + size_t(i)));
        jobs.push_back(rig.submit(prompts.back(), 6));
    }
    GenerationRequest fourth;
    fourth.prompt = rig.prompt(4);
    fourth.max_tokens = 2;
    const auto refused = rig.scheduler->submit(fourth);
    CHECK(refused.refusal == Scheduler::Refusal::QueueFull);
    CHECK_FALSE(refused.job);

    rig.scheduler->step();
    CHECK(rig.metrics.running == 2);
    CHECK(rig.metrics.waiting == 1);
    for (const auto& call : rig.ctx->decodes)
        for (const auto& row : call) CHECK(row.seq < 2);

    const auto said = run(rig, jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
        CHECK(said[i].done->finish == FinishReason::Length);
        CHECK(said[i].done->completion_tokens == 6);
        CHECK(said[i].text == rig.expected(prompts[i], 6));
    }

    SECTION("a request the context cannot hold, or an empty prompt, is refused as too long") {
        GenerationRequest big;
        big.prompt = rig.prompt(250);
        big.max_tokens = 7;
        CHECK(rig.scheduler->submit(big).refusal == Scheduler::Refusal::TooLong);
        CHECK(rig.scheduler->submit(GenerationRequest{}).refusal == Scheduler::Refusal::TooLong);
    }
}

TEST_CASE("a long prompt is prefilled in prefill_chunk pieces between the running decode steps") {
    Rig rig(256, 2, options(0, 4, 4));
    const auto short_prompt = rig.prompt(3);
    auto a = rig.submit(short_prompt, 30);
    rig.scheduler->step();  // A's prompt in, its first token sampled
    const size_t before = rig.ctx->decodes.size();
    const auto long_prompt = rig.prompt(18);
    auto b = rig.submit(long_prompt, 3);
    const auto said = run(rig, {a, b});

    // B (sequence 1) is computed in calls of its own, 4 tokens each ending
    // at a multiple of 4, the last one the 2 left; A decodes between them.
    const auto b_calls = calls_of(*rig.ctx, 1, before);
    REQUIRE(b_calls.size() >= 5);
    std::vector<int32_t> prefill_positions;
    for (size_t k = 0; k < 5; ++k) {
        const auto& call = rig.ctx->decodes[b_calls[k]];
        for (const auto& row : call) {
            CHECK(row.seq == 1);  // a prompt chunk runs alone
            prefill_positions.push_back(row.pos);
        }
        CHECK(call.size() == (k < 4 ? 4u : 2u));
        if (k > 0) {
            const auto a_calls = calls_of(*rig.ctx, 0, b_calls[k - 1]);
            REQUIRE_FALSE(a_calls.empty());
            CHECK(a_calls.front() < b_calls[k]);  // A's token came between two chunks
        }
    }
    std::vector<int32_t> all(18);
    for (int32_t i = 0; i < 18; ++i) all[size_t(i)] = i;
    CHECK(prefill_positions == all);
    CHECK(said[0].text == rig.expected(short_prompt, 30));
    CHECK(said[1].text == rig.expected(long_prompt, 3));
}

TEST_CASE("a cached prefix is reused in whole chunks, as cached_tokens, within one cache scope") {
    Rig rig(256, 2, options(4, 4, 64));
    const auto first = rig.prompt(10);
    auto a = rig.submit(first, 3, "tenant 1");
    auto a_said = run(rig, {a});
    CHECK(a_said[0].done->cached_tokens == 0);

    // 10 tokens in common: the two whole chunks (8) are shared, and the rest
    // is computed from position 8 on.
    auto second = first;
    second.resize(10);
    const auto tail = rig.prompt(2);
    second.insert(second.end(), tail.begin(), tail.end());
    const size_t before = rig.ctx->decodes.size();
    auto b = rig.submit(second, 3, "tenant 1");
    auto b_said = run(rig, {b});
    CHECK(b_said[0].done->cached_tokens == 8);
    CHECK(b_said[0].text == rig.expected(second, 3));
    const auto& b_first = rig.ctx->decodes[before];
    REQUIRE_FALSE(b_first.empty());
    CHECK(b_first.front().pos == 8);
    CHECK(rig.metrics.prefix_tokens == 8);

    // The same prompt from another scope computes everything.
    const size_t before_c = rig.ctx->decodes.size();
    auto c = rig.submit(second, 3, "tenant 2");
    auto c_said = run(rig, {c});
    CHECK(c_said[0].done->cached_tokens == 0);
    CHECK(rig.ctx->decodes[before_c].front().pos == 0);
    CHECK(c_said[0].text == rig.expected(second, 3));
}

TEST_CASE("a running sequence's prefix is shared with a new one by sharing its cells") {
    Rig rig(256, 2, options(0, 4, 64));
    const auto first = rig.prompt(9);
    auto a = rig.submit(first, 40);
    for (int i = 0; i < 4; ++i) rig.scheduler->step();  // A's prompt in; A generating
    Said a_said;
    read(*a, a_said);
    REQUIRE_FALSE(a_said.done);

    auto second = first;
    second.resize(8);
    const auto tail = rig.prompt(3);
    second.insert(second.end(), tail.begin(), tail.end());
    const size_t before = rig.ctx->decodes.size();
    auto b = rig.submit(second, 4);
    const auto said = run(rig, {a, b});
    CHECK(said[1].done->cached_tokens == 8);
    CHECK(said[1].text == rig.expected(second, 4));
    // A's cells were not disturbed (its first tokens were read above).
    CHECK(a_said.text + said[0].text == rig.expected(first, 40));
    const auto b_calls = calls_of(*rig.ctx, 1, before);
    REQUIRE_FALSE(b_calls.empty());
    CHECK(rig.ctx->decodes[b_calls.front()].front().pos == 8);
}

TEST_CASE("a cancelled job frees its sequence at the next step and ends cancelled") {
    Rig rig(256, 1, options(1));
    const auto pa = rig.prompt(6), pb = rig.prompt(5);
    auto a = rig.submit(pa, 100);
    auto b = rig.submit(pb, 4);
    for (int i = 0; i < 3; ++i) rig.scheduler->step();
    CHECK(rig.metrics.running == 1);
    CHECK(rig.metrics.waiting == 1);
    Said a_said;
    read(*a, a_said);
    CHECK_FALSE(a_said.done);

    a->cancel();
    rig.scheduler->step();
    read(*a, a_said);
    REQUIRE(a_said.done);
    CHECK(a_said.done->finish == FinishReason::Cancelled);
    CHECK(rig.ctx->cells_of(0) == 0);  // its cells went with it
    const auto b_said = run(rig, {b});
    CHECK(b_said[0].done->finish == FinishReason::Length);
    CHECK(b_said[0].text == rig.expected(pb, 4));
}

TEST_CASE("a full cache evicts idle cached prefixes least recently used first") {
    // 24 cells: two finished requests keep 10 cells each for reuse; a third
    // needs 10 more, so one of them must go, the older.
    Rig rig(24, 3, options(0, 4, 64));
    const auto pa = rig.prompt(9), pb = rig.prompt(9), pc = rig.prompt(9);
    run(rig, {rig.submit(pa, 2)});  // sequence 0
    run(rig, {rig.submit(pb, 2)});  // sequence 1, used later than 0
    REQUIRE(rig.ctx->cells_of(0) == 10);
    REQUIRE(rig.ctx->cells_of(1) == 10);
    const auto c_said = run(rig, {rig.submit(pc, 2)});
    CHECK(c_said[0].text == rig.expected(pc, 2));
    CHECK(rig.ctx->cells_of(0) == 0);   // A, the least recently used, was evicted
    CHECK(rig.ctx->cells_of(1) == 10);  // B kept its prefix
    const auto b_again = run(rig, {rig.submit(pb, 2)});
    CHECK(b_again[0].done->cached_tokens == 8);
}

TEST_CASE("a prompt that cannot fit while nothing running will free cells ends with no room") {
    // Two 12-token prompts prefilled side by side in 16 cells, two chunks of
    // 4 each fill them: the older cannot get its third chunk, and no
    // generating sequence will free any, so it ends; the other then fits.
    Rig rig(16, 2, options(0, 4, 8));
    const auto pa = rig.prompt(12), pb = rig.prompt(12);
    auto a = rig.submit(pa, 1);
    auto b = rig.submit(pb, 1);
    const auto said = run(rig, {a, b});
    CHECK(said[0].done->finish == FinishReason::NoRoom);
    CHECK_FALSE(said[0].done->why.empty());
    CHECK(said[0].text.empty());
    CHECK(said[1].done->finish == FinishReason::Length);
    CHECK(said[1].text == rig.expected(pb, 1));
}

TEST_CASE("a job past its deadline ends with timeout, whether it waited or ran") {
    Rig rig(256, 1, options(2));
    SECTION("waiting") {
        // A finished request leaves its cells for reuse; a request whose
        // deadline passed while it waited must not take the sequence (and drop them).
        run(rig, {rig.submit(rig.prompt(6), 3)});
        const size_t cached = rig.ctx->cells_of(0);
        const size_t calls = rig.ctx->decodes.size();
        const uint64_t prompt_tokens = rig.metrics.prompt_tokens;
        REQUIRE(cached == 8);
        GenerationRequest r;
        r.prompt = rig.prompt(5);
        r.max_tokens = 3;
        r.deadline = Clock::now() - std::chrono::milliseconds(1);
        auto job = rig.scheduler->submit(r).job;
        REQUIRE(job);
        const auto said = run(rig, {job});
        CHECK(said[0].done->finish == FinishReason::Timeout);
        CHECK(said[0].text.empty());
        CHECK(rig.ctx->decodes.size() == calls);  // never computed
        CHECK(rig.ctx->cells_of(0) == cached);    // nor admitted
        CHECK(rig.metrics.prompt_tokens == prompt_tokens);
    }
    SECTION("running") {
        GenerationRequest r;
        r.prompt = rig.prompt(5);
        r.max_tokens = 200;
        r.sampling.base.temperature = 0;
        r.deadline = Clock::now() + std::chrono::milliseconds(300);
        auto job = rig.scheduler->submit(r).job;
        REQUIRE(job);
        rig.scheduler->step();
        rig.scheduler->step();
        Said said;
        read(*job, said);
        CHECK_FALSE(said.done);
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        rig.scheduler->step();
        read(*job, said);
        REQUIRE(said.done);
        CHECK(said.done->finish == FinishReason::Timeout);
        CHECK(rig.ctx->cells_of(0) == 0);
    }
}

TEST_CASE("stop ends running and waiting jobs with shutdown, and a failed decode with failed") {
    Rig rig(256, 1, options(1));
    auto a = rig.submit(rig.prompt(5), 100);
    auto b = rig.submit(rig.prompt(5), 100);
    rig.scheduler->step();
    SECTION("shutdown") {
        rig.scheduler->stop();
        const auto said = run(rig, {a, b}, 1);
        CHECK(said[0].done->finish == FinishReason::Shutdown);
        CHECK(said[1].done->finish == FinishReason::Shutdown);
    }
    SECTION("failed") {
        rig.ctx->fail_next = model::DecodeCode::Failed;
        const auto said = run(rig, {a});
        CHECK(said[0].done->finish == FinishReason::Failed);
        CHECK(said[0].done->why.find("injected") != std::string::npos);
    }
}

TEST_CASE(
    "a grammar constrains each draw: cut by max_tokens it ends as length, at a dead end as "
    "failed") {
    Rig rig(256, 2, options(4));
    const auto trie = grammar::TokenTrie::from_tokenizer(*rig.tok);
    const auto with_grammar = [&](const char* gbnf, uint32_t max_tokens) {
        auto parsed = grammar::parse_gbnf(gbnf);
        REQUIRE(parsed);
        GenerationRequest r;
        r.prompt = rig.prompt(5);
        r.max_tokens = max_tokens;
        r.sampling.base.temperature = 0;
        r.sampling.grammar = *parsed;
        r.sampling.grammar_vocab = trie;
        r.cache_scope = "t";
        auto s = rig.scheduler->submit(std::move(r));
        REQUIRE(s.refusal == Scheduler::Refusal::None);
        return s.job;
    };
    // The fake model's own continuation is random letters: only the grammar spells these.
    const auto said =
        run(rig, {with_grammar(R"(root ::= "abcdef")", 3), with_grammar(R"(root ::= "xyz")", 10)});
    CHECK(said[0].text == "abc");
    CHECK(said[0].done->finish == FinishReason::Length);  // never reported as complete
    CHECK(said[1].text == "xyz");
    CHECK(said[1].done->finish == FinishReason::EndOfGeneration);
    // No token spells U+00E9: after "a" the grammar allows nothing.
    const auto dead = run(rig, {with_grammar(R"(root ::= "a" [\u00e9])", 10)});
    CHECK(dead[0].text == "a");
    CHECK(dead[0].done->finish == FinishReason::Failed);
    CHECK_THAT(dead[0].done->why, Catch::Contains("no token of the vocabulary can continue"));
}

TEST_CASE("a lazy grammar leaves the draws alone until its trigger and then constrains them") {
    Rig rig(256, 2, options(4));
    const auto trie = grammar::TokenTrie::from_tokenizer(*rig.tok);
    const std::vector<int32_t> prompt = rig.prompt(5);
    // The fake model's own greedy letters; the trigger is two of them, as
    // first written at positions 4-5 (earlier pairs differ, or the test picks
    // a later prompt's pair: the fake's letters are a hash of the history).
    const std::string own = rig.expected(prompt, 12);
    size_t at = 4;
    while (own.substr(0, at + 1).find(own.substr(at, 2)) < at) ++at;
    REQUIRE(at + 2 <= 12);
    const std::string trigger = own.substr(at, 2);
    const auto with_lazy = [&](bool lazy) {
        GenerationRequest r;
        r.prompt = prompt;
        r.max_tokens = 20;
        r.sampling.base.temperature = 0;
        r.cache_scope = "t";
        if (lazy) {
            auto parsed = grammar::parse_gbnf("root ::= \"" + trigger + "\" \"xyz\"");
            REQUIRE(parsed);
            r.sampling.lazy.grammar = *parsed;
            r.sampling.lazy.triggers.push_back({trigger, false});
            r.sampling.grammar_vocab = trie;
        }
        auto s = rig.scheduler->submit(std::move(r));
        REQUIRE(s.refusal == Scheduler::Refusal::None);
        return s.job;
    };
    const auto said = run(rig, {with_lazy(true), with_lazy(false)});
    // Up to and with the trigger, the same letters as without the grammar;
    // then only what the grammar spells, and the end once it is complete.
    CHECK(said[0].text == own.substr(0, at + 2) + "xyz");
    CHECK(said[0].done->finish == FinishReason::EndOfGeneration);
    CHECK(said[1].text.substr(0, at + 2) == own.substr(0, at + 2));
    CHECK(said[1].text.find("xyz") == std::string::npos);
}
