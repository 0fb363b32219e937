// The lazy grammar stage (armed by a trigger in the generated text) and the
// thinking-budget stage (forces the reasoning's close): docs/grammar.md,
// "Lazy grammars", and docs/server.md, "Thinking budget".
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ferrox/grammar/gbnf.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/sampler_chain.h"

using namespace ferrox;
using namespace ferrox::grammar;

namespace {

// Token 0 ends generation; 14 is a control token (no text), as Llama 3's
// <|python_tag|> is in the trie.
const std::vector<std::string> kPieces{
    "",        "a",        "b", "<tool",         "_call>", "<tool_call>",
    "{",       "}",        "x", "a<tool_call>{", " ",      "{\"name\"",
    "<think>", "</think>", "",  "ab<tool_",      "call>{", "c"};
enum : int32_t {
    kEnd = 0,
    kA = 1,
    kB = 2,
    kToolOpen = 3,
    kCallClose = 4,
    kToolCall = 5,
    kBrace = 6,
    kClose = 7,
    kX = 8,
    kMidToken = 9,
    kSpace = 10,
    kName = 11,
    kThink = 12,
    kThinkEnd = 13,
    kControl = 14,
    kSplitA = 15,
    kSplitB = 16,
    kC = 17
};

std::shared_ptr<const TokenTrie> vocab() {
    std::vector<bool> eog(kPieces.size(), false);
    eog[kEnd] = true;
    return std::make_shared<const TokenTrie>(kPieces, eog);
}

std::shared_ptr<const Grammar> parse_ok(const std::string& source) {
    auto g = parse_gbnf(source);
    INFO(source);
    if (!g) FAIL(g.error().message());
    return *g;
}

const char* kCall = "root ::= \"<tool_call>\" \"{\" \"x\"* \"}\"";

ChainParams lazy_params(const std::string& grammar, std::vector<LazyTrigger> triggers,
                        float temperature = 0) {
    ChainParams p;
    p.base.temperature = temperature;
    p.base.top_k = 0;
    p.base.top_p = 1;
    p.base.min_p = 0;
    p.grammar_vocab = vocab();
    p.lazy.grammar = parse_ok(grammar);
    p.lazy.triggers = std::move(triggers);
    return p;
}

// Logits that prefer `best`, then `next`; every other token low.
std::vector<float> prefer(int32_t best, int32_t next = -1) {
    std::vector<float> l(kPieces.size(), 0.0f);
    l[static_cast<size_t>(best)] = 9;
    if (next >= 0) l[static_cast<size_t>(next)] = 5;
    return l;
}

void accept_all(SamplerChain& chain, std::initializer_list<int32_t> tokens) {
    for (int32_t t : tokens) chain.accept(t);
}

uint64_t test_seed() {
    const char* s = std::getenv("FERROX_TEST_SEED");
    return s ? std::strtoull(s, nullptr, 10) : std::random_device{}();
}

}  // namespace

TEST_CASE("lazy grammar: free until the trigger, then the grammar, with the trigger matched") {
    SamplerChain chain = SamplerChain::from_params(lazy_params(kCall, {{"<tool_call>", false}}));
    REQUIRE(chain.stage(0).name() == std::string("lazy-grammar"));
    // Not armed: "{" is drawn though the grammar would refuse it here.
    CHECK(chain.sample(prefer(kBrace)) == kBrace);
    accept_all(chain, {kBrace, kA});
    CHECK(chain.sample(prefer(kB)) == kB);
    chain.accept(kToolCall);
    // Armed, "<tool_call>" already matched: only "{" continues.
    CHECK(chain.sample(prefer(kB, kBrace)) == kBrace);
    chain.accept(kBrace);
    CHECK(chain.sample(prefer(kEnd, kX)) == kX);  // not complete: no end yet
    chain.accept(kClose);
    CHECK(chain.sample(prefer(kA, kEnd)) == kEnd);  // complete: only the end
    CHECK(chain.error().empty());
}

TEST_CASE("lazy grammar: a trigger split across tokens arms it") {
    SamplerChain chain = SamplerChain::from_params(lazy_params(kCall, {{"<tool_call>", false}}));
    accept_all(chain, {kA, kToolOpen});
    CHECK(chain.sample(prefer(kB)) == kB);  // "<tool" alone is not the trigger
    chain.accept(kCallClose);               // "_call>": now it is
    CHECK(chain.sample(prefer(kB, kBrace)) == kBrace);
    // Split in the middle of both tokens: "ab<tool_" + "call>{".
    SamplerChain split = SamplerChain::from_params(lazy_params(kCall, {{"<tool_call>", false}}));
    accept_all(split, {kSplitA, kSplitB});
    // "<tool_call>{" matched: the bytes after the trigger count too.
    CHECK(split.sample(prefer(kBrace, kX)) == kX);
}

TEST_CASE("lazy grammar: a trigger in the middle of a token, with bytes after it") {
    SamplerChain chain = SamplerChain::from_params(lazy_params(kCall, {{"<tool_call>", false}}));
    chain.accept(kMidToken);  // "a<tool_call>{"
    CHECK(chain.sample(prefer(kBrace, kClose)) == kClose);
    // A token whose bytes after the trigger break the grammar: the chain says so.
    SamplerChain bad = SamplerChain::from_params(
        lazy_params("root ::= \"<tool_call>\" \"x\"", {{"<tool_call>", false}}));
    bad.accept(kMidToken);
    CHECK(bad.sample(prefer(kX)) == -1);
    CHECK_THAT(bad.error(), Catch::Contains("lazy grammar"));
}

TEST_CASE("lazy grammar: an anchored trigger counts only at the answer's start") {
    const std::string g = "root ::= \"{\\\"name\\\"\" \"x\"* \"}\"";
    SamplerChain late = SamplerChain::from_params(lazy_params(g, {{"{\"name\"", true}}));
    accept_all(late, {kA, kName});
    CHECK(late.sample(prefer(kA)) == kA);  // not armed
    SamplerChain first = SamplerChain::from_params(lazy_params(g, {{"{\"name\"", true}}));
    accept_all(first, {kSpace, kName});  // blanks before it are still the start
    CHECK(first.sample(prefer(kA, kX)) == kX);
    // Unanchored, the same text arms it anywhere.
    SamplerChain anywhere = SamplerChain::from_params(lazy_params(g, {{"{\"name\"", false}}));
    accept_all(anywhere, {kA, kName});
    CHECK(anywhere.sample(prefer(kA, kX)) == kX);
}

TEST_CASE("lazy grammar: a trigger token arms it with its text, clones and restarts disarm") {
    ChainParams p = lazy_params(kCall, {{"<tool_call>", false}});
    p.lazy.trigger_tokens = {{kControl, "<tool_call>"}};
    SamplerChain chain = SamplerChain::from_params(p);
    chain.accept(kControl);
    CHECK(chain.sample(prefer(kA, kBrace)) == kBrace);
    SamplerChain other = chain.clone_for(3);
    CHECK(other.sample(prefer(kA, kBrace)) == kA);
    chain.clear_history();
    CHECK(chain.sample(prefer(kA, kBrace)) == kA);
    CHECK(chain.sample(prefer(kA, kBrace)) == kA);
}

TEST_CASE("lazy grammar: a trigger inside the reasoning block does not count") {
    ChainParams p = lazy_params(kCall, {{"<tool_call>", false}});
    p.lazy.reasoning_start = "<think>";
    p.lazy.reasoning_end = "</think>";
    SamplerChain chain = SamplerChain::from_params(p);
    accept_all(chain, {kThink, kA, kToolCall});
    CHECK(chain.sample(prefer(kA)) == kA);
    accept_all(chain, {kThinkEnd, kB, kToolCall});
    CHECK(chain.sample(prefer(kA, kBrace)) == kBrace);
    // The prompt opened the block.
    p.lazy.starts_in_reasoning = true;
    SamplerChain opened = SamplerChain::from_params(p);
    opened.accept(kToolCall);
    CHECK(opened.sample(prefer(kA)) == kA);
    accept_all(opened, {kThinkEnd, kToolCall});
    CHECK(opened.sample(prefer(kA, kBrace)) == kBrace);
}

TEST_CASE("lazy grammar: without the trigger the draws are the chain's without the stage") {
    const uint64_t seed = test_seed();
    INFO("FERROX_TEST_SEED=" << seed);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    // "QQ" is in no piece: the stage never arms.
    ChainParams with = lazy_params(kCall, {{"QQ", false}}, 1.0f);
    with.base.seed = seed;
    ChainParams without = with;
    without.lazy = {};
    SamplerChain a = SamplerChain::from_params(with), b = SamplerChain::from_params(without);
    REQUIRE(a.size() == b.size() + 1);
    int distinct = 0;
    int32_t last = -1;
    for (int step = 0; step < 300; ++step) {
        std::vector<float> l(kPieces.size());
        for (float& x : l) x = logit(rng);
        const int32_t ta = a.sample(l), tb = b.sample(l);
        INFO("step " << step);
        REQUIRE(ta == tb);
        distinct += ta != last;
        last = ta;
        a.accept(ta);
        b.accept(tb);
    }
    CHECK(distinct > 100);  // the draws really vary
}

TEST_CASE("lazy grammar: from the trigger on every answer is text the grammar accepts") {
    const uint64_t seed = test_seed();
    INFO("FERROX_TEST_SEED=" << seed);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> logit(0.0f, 1.5f);
    const std::string g = "root ::= \"<tool_call>\" \"{\" (\"x\" | \"a\")* \"}\"";
    auto grammar = parse_ok(g);
    auto v = vocab();
    int armed = 0, ended = 0;
    for (int run = 0; run < 200; ++run) {
        ChainParams p = lazy_params(g, {{"<tool_call>", false}}, 1.0f);
        p.base.seed = rng();
        SamplerChain chain = SamplerChain::from_params(p);
        std::string text;
        bool end = false;
        for (int step = 0; step < 40 && !end; ++step) {
            std::vector<float> l(kPieces.size());
            for (float& x : l) x = logit(rng);
            l[kToolCall] += 1.0f;  // a trigger now and then
            const int32_t t = chain.sample(l);
            REQUIRE(t >= 0);
            chain.accept(t);
            end = v->end_of_generation(t);
            text += kPieces[static_cast<size_t>(t)];
        }
        const size_t at = text.find("<tool_call>");
        if (at == std::string::npos) continue;
        ++armed;
        INFO("run " << run << " text " << text);
        GrammarMatcher m(grammar, v);
        CHECK(m.accept_bytes(text.substr(at)));
        if (end) {
            CHECK(m.complete());
            ++ended;
        }
    }
    CHECK(armed > 20);
    CHECK(ended > 5);
}

TEST_CASE("thinking budget: after N tokens inside the block the close is forced, then released") {
    ChainParams p;
    p.base.temperature = 0;
    p.grammar_vocab = vocab();
    p.reasoning_budget = {3, "<think>", "</think>", {kToolOpen, kCallClose}, false};
    SamplerChain chain = SamplerChain::from_params(p);
    REQUIRE(chain.stage(0).name() == std::string("reasoning-budget"));
    chain.accept(kThink);  // opens the block (at the answer's start)
    for (int i = 0; i < 3; ++i) {
        CHECK(chain.sample(prefer(kA)) == kA);
        chain.accept(kA);
    }
    // Spent: the close's tokens, in order, whatever the logits prefer.
    CHECK(chain.sample(prefer(kA)) == kToolOpen);
    chain.accept(kToolOpen);
    CHECK(chain.sample(prefer(kA)) == kCallClose);
    chain.accept(kCallClose);
    CHECK(chain.sample(prefer(kA)) == kA);  // released
    chain.accept(kA);
    CHECK(chain.sample(prefer(kB)) == kB);
}

TEST_CASE("thinking budget: a block closed in time, a late <think>, budget 0 in an open prompt") {
    ChainParams p;
    p.base.temperature = 0;
    p.grammar_vocab = vocab();
    p.reasoning_budget = {2, "<think>", "</think>", {kThinkEnd}, false};
    SamplerChain closed = SamplerChain::from_params(p);
    accept_all(closed, {kThink, kA, kThinkEnd});
    for (int i = 0; i < 4; ++i) {
        CHECK(closed.sample(prefer(kB)) == kB);
        closed.accept(kB);
    }
    SamplerChain late = SamplerChain::from_params(p);
    accept_all(late, {kA, kThink, kA, kA, kA});
    CHECK(late.sample(prefer(kB)) == kB);  // reasoning opens only at the start
    // Budget 0 with the prompt inside the block: the close comes first.
    p.reasoning_budget.budget = 0;
    p.reasoning_budget.starts_inside = true;
    SamplerChain none = SamplerChain::from_params(p);
    CHECK(none.sample(prefer(kB)) == kThinkEnd);
    none.accept(kThinkEnd);
    CHECK(none.sample(prefer(kB)) == kB);
    // A sequence's state is its own: a clone starts inside again.
    SamplerChain again = none.clone_for(1);
    CHECK(again.sample(prefer(kB)) == kThinkEnd);
}
