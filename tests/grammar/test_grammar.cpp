// The GBNF parser, the matcher and the grammar stage of the sampler chain.
// Acceptance against llama.cpp itself is test_grammar_parity.py; here: errors
// by name, limits, the matcher against std::regex on regular grammars, and the
// trie walk's masks against matching each token alone.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ferrox/grammar/gbnf.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/sampler_chain.h"

using namespace ferrox;
using namespace ferrox::grammar;

namespace {

std::shared_ptr<const Grammar> parse_ok(const std::string& source, const GrammarLimits& l = {}) {
    auto g = parse_gbnf(source, l);
    INFO(source);
    if (!g) FAIL(g.error().message());
    return *g;
}

std::string parse_error(const std::string& source, const GrammarLimits& l = {}) {
    auto g = parse_gbnf(source, l);
    INFO(source);
    REQUIRE_FALSE(g);
    return g.error().message();
}

std::shared_ptr<const TokenTrie> no_vocab() {
    return std::make_shared<const TokenTrie>(std::vector<std::string>{}, std::vector<bool>{});
}

// Whole-text acceptance, byte by byte.
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarMatcher m(g, no_vocab());
    return m.accept_bytes(text) && m.complete();
}

bool bit(const std::vector<uint64_t>& mask, size_t id) { return (mask[id / 64] >> (id % 64)) & 1; }

uint64_t seed_from_env() {
    const char* s = std::getenv("FERROX_TEST_SEED");
    return s ? std::strtoull(s, nullptr, 10) : 0x5eed2026;
}

}  // namespace

TEST_CASE("every grammar llama.cpp ships parses") {
    const std::filesystem::path sdist = FERROX_LLAMA_SDIST;
    if (!std::filesystem::exists(sdist)) {
        WARN("skipped: the llama-cpp-python sdist is not cached at " << sdist);
        return;
    }
    const auto dir = std::filesystem::temp_directory_path() / "ferrox_test_grammars";
    std::filesystem::create_directories(dir);
    const std::string cmd =
        "tar -xzf '" + sdist.string() + "' -C '" + dir.string() +
        "' --strip-components=4 --wildcards '*/vendor/llama.cpp/grammars/*.gbnf'";
    REQUIRE(std::system(cmd.c_str()) == 0);
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".gbnf") continue;
        std::ifstream in(entry.path(), std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        INFO(entry.path());
        parse_ok(text.str());
        ++n;
    }
    CHECK(n >= 8);
}

TEST_CASE("syntax errors name the line and column") {
    CHECK(parse_error("root ::= \"a\"\nfoo ::= \"b\" @") ==
          "grammar:2:13: unexpected '@': expected a newline or the end of the rule");
    CHECK(parse_error("root ::= [a-") == "grammar:1:13: unexpected end of the grammar");
    CHECK(parse_error("root ::= \"abc") == "grammar:1:10: unterminated literal");
    CHECK(parse_error("root = \"a\"") == "grammar:1:6: expected '::=' after the rule name 'root'");
    CHECK(parse_error("root ::= (\"a\" | \"b\"") ==
          "grammar:1:20: expected ')' to close the '(' at 1:10");
    CHECK(parse_error("root ::= \"\\q\"") == "grammar:1:11: unknown escape '\\q'");
    CHECK(parse_error("root ::= [z-a]") == "grammar:1:13: range end U+61 is below its start U+7A");
    CHECK(parse_error("root ::= \"a\"{3,2}") ==
          "grammar:1:17: repetition {3,2}: the most is below the least");
    CHECK(parse_error("root ::= * \"a\"") == "grammar:1:10: '*' with nothing before it to repeat");
    CHECK(parse_error("root ::= \"\\xZZ\"") == "grammar:1:13: expected 2 hex digits");
    CHECK(parse_error("root ::= \"\xff\"") == "grammar:1:11: malformed UTF-8");
}

TEST_CASE("what the subset leaves out is refused by name") {
    CHECK(parse_error("root ::= <think> \"x\"") ==
          "grammar:1:10: token references (<...>, !<...>) are not supported");
    CHECK(parse_error("root ::= !<[12]>") ==
          "grammar:1:10: token references (<...>, !<...>) are not supported");
    CHECK(parse_error("root ::= item\n") == "grammar:1:10: rule 'item' is used but never defined");
    CHECK(parse_error("item ::= \"a\"\n") == "grammar: no 'root' rule");
    CHECK(parse_error("root ::= \"a\"\nroot ::= \"b\"") ==
          "grammar:2:1: rule 'root' is defined twice (first at 1:1)");
}

TEST_CASE("left recursion is refused with the rule named") {
    CHECK(parse_error("root ::= expr\nexpr ::= expr \"+\" [0-9] | [0-9]") ==
          "grammar:2:1: rule 'expr' is left-recursive (it can reach itself before matching a "
          "character)");
    // Through another rule, and through a rule that can match nothing.
    CHECK_THAT(parse_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\""),
               Catch::Contains("is left-recursive"));
    CHECK_THAT(parse_error("root ::= opt root \"x\" | \"y\"\nopt ::= \"z\"?"),
               Catch::Contains("rule 'root' is left-recursive"));
    // Repeating what can match nothing would loop for ever too.
    CHECK_THAT(parse_error("root ::= (\"a\"?)*"), Catch::Contains("left-recursive"));
    // Right recursion is fine.
    parse_ok("root ::= \"(\" root \")\" | \"\"");
}

TEST_CASE("every limit is an error that names it") {
    GrammarLimits l;
    l.max_source_bytes = 16;
    CHECK_THAT(parse_error("root ::= \"aaaaaaaaaaaaaaaa\"", l),
               Catch::Contains("max_source_bytes (16)"));
    l = {};
    l.max_rules = 3;
    CHECK_THAT(parse_error("root ::= a b c\na ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"", l),
               Catch::Contains("max_rules (3)"));
    l = {};
    l.max_nesting = 3;
    parse_ok("root ::= (((\"a\")))", l);
    CHECK_THAT(parse_error("root ::= ((((\"a\"))))", l), Catch::Contains("max_nesting (3)"));
    l = {};
    CHECK_THAT(parse_error("root ::= \"a\"{2001}", l), Catch::Contains("max_repetition (2000)"));
    CHECK_THAT(parse_error("root ::= \"a\"{1,99999999999999999999}", l),
               Catch::Contains("max_repetition (2000)"));
    // A 600-character literal 2000 times is 1.2 million symbols, past the default.
    CHECK_THAT(parse_error("root ::= \"" + std::string(600, 'a') + "\"{2000}", l),
               Catch::Contains("max_symbols (1048576)"));
    // Nested repetitions do not multiply: the inner one is one rule reference.
    parse_ok("root ::= (\"ab\"{2000}){2000}", l);
}

TEST_CASE("the live stacks are bounded: a grammar built to explode them fails by name, fast") {
    // Each "a" may be any of 20 optional items: the parses of a long run of
    // "a"s multiply (llama.cpp's README warns of x? x? x? ...).
    std::string src = "root ::=";
    for (int i = 0; i < 20; ++i) src += " x?";
    src += " \"b\"\nx ::= \"a\" | \"aa\"";
    GrammarLimits l;
    l.max_stacks = 32;
    auto g = parse_ok(src, l);
    GrammarMatcher m(g, no_vocab());
    const auto start = std::chrono::steady_clock::now();
    auto r = m.accept_bytes(std::string(12, 'a'));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains("max_stacks (32)"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
    // The same text fits the default bound.
    CHECK(matches(parse_ok(src), std::string(12, 'a') + "b"));
    // Stack depth: each "(" pushes; past the bound the text is refused by name.
    l = {};
    l.max_stack_depth = 50;
    GrammarMatcher deep(parse_ok("root ::= \"(\" root \")\" | \"x\"", l), no_vocab());
    auto d = deep.accept_bytes(std::string(100, '('));
    REQUIRE_FALSE(d);
    CHECK_THAT(d.error().message(), Catch::Contains("max_stack_depth (50)"));
}

// Regular grammars and the same language as an ECMAScript regex: an
// independent reference for whole-text acceptance over random strings.
TEST_CASE("whole-text acceptance equals std::regex on random strings") {
    struct Case {
        const char* gbnf;
        const char* regex;
        const char* alphabet;
    };
    const Case cases[] = {
        {"root ::= [a-c]+ (\"x\" | \"yz\")* [0-9]{1,3}", "[a-c]+(x|yz)*[0-9]{1,3}", "abcxyz019"},
        {"root ::= (\"ab\" | \"a\")* \"b\"? [^ab]", "(ab|a)*b?[^ab]", "abc"},
        {"root ::= w (\" \" w){0,2}\nw ::= [a-b]{2,} | \"c\"", "([a-b]{2,}|c)( ([a-b]{2,}|c)){0,2}",
         "abc "},
        {"root ::= \"-\"? ([0-9] | [1-9] [0-9]+) (\".\" [0-9]+)?\n# a number",
         "-?([0-9]|[1-9][0-9]+)(\\.[0-9]+)?", "-0123.9"},
        {"root ::= ([x-z] | \"\\\\\" [\\\\n]){3}", "([x-z]|\\\\[\\\\n]){3}", "xyz\\n"},
        {"root ::= . .? \"q\"", "[\\s\\S][\\s\\S]?q", "qab"},
        {"root ::= [^a-cx0-9\\n]+ \"!\"", "[^a-cx0-9\\n]+!", "yzyzyz!a0\n"},
    };
    const uint64_t seed = seed_from_env();
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    for (const Case& c : cases) {
        auto g = parse_ok(c.gbnf);
        const std::regex re(c.regex);
        const std::string alphabet = c.alphabet;
        int accepted = 0;
        for (int i = 0; i < 400; ++i) {
            std::string text;
            const size_t len = rng() % 9;
            for (size_t k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
            INFO(c.gbnf << " on '" << text << "'");
            const bool want = std::regex_match(text, re);
            CHECK(matches(g, text) == want);
            accepted += want;
        }
        INFO(c.gbnf);
        CHECK(accepted > 0);  // the strings reach the language, not only its complement
    }
}

// The trie walk, the state table and the mask cache against the plain
// question "does this one token's text continue the grammar?".
TEST_CASE("the allowed mask equals matching each token alone, step after step") {
    const uint64_t seed = seed_from_env() + 1;
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const std::string alphabet[] = {"{",        "}", "\"", ":",  ",", " ", "a",    "b",    "1",
                                    "0",        "-", ".",  "\\", "n", "é", "\xc3", "\xa9", "あ",
                                    "\xe3\x81", "t", "r",  "u",  "e", "[", "]"};
    std::vector<std::string> pieces{""};  // 0: end of generation
    for (int i = 0; i < 600; ++i) {
        std::string p;
        const size_t len = 1 + rng() % 4;
        for (size_t k = 0; k < len; ++k) p += alphabet[rng() % std::size(alphabet)];
        pieces.push_back(p);
    }
    pieces.push_back("");  // a control token: never allowed
    std::vector<bool> eog(pieces.size(), false);
    eog[0] = true;
    auto vocab = std::make_shared<const TokenTrie>(pieces, eog);
    const char* json =
        "root ::= value\n"
        "value ::= object | array | string | number | (\"true\" | \"null\") ws\n"
        "object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\" ws\n"
        "array ::= \"[\" ws (value (\",\" ws value)*)? \"]\" ws\n"
        "string ::= \"\\\"\" ([^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" [\"\\\\n])* \"\\\"\" ws\n"
        "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ws\n"
        "ws ::= | \" \"\n";
    auto g = parse_ok(json);
    GrammarMatcher m(g, vocab);
    std::vector<uint64_t> mask;
    int steps = 0, allowed_total = 0;
    for (; steps < 60; ++steps) {
        REQUIRE(m.allowed(mask));
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < pieces.size(); ++id) {
            GrammarMatcher alone = m;
            const bool want =
                eog[id] ? m.complete()
                        : !pieces[id].empty() && static_cast<bool>(alone.accept_bytes(pieces[id]));
            INFO("step " << steps << " token " << id << " '" << pieces[id] << "'");
            CHECK(bit(mask, id) == want);
            if (want) allowed.push_back(static_cast<int32_t>(id));
        }
        allowed_total += static_cast<int>(allowed.size());
        if (allowed.empty()) break;
        const int32_t next = allowed[rng() % allowed.size()];
        if (eog[static_cast<size_t>(next)]) break;
        REQUIRE(m.accept(next));
    }
    CHECK(allowed_total > steps);  // more than one choice per step on average
}

TEST_CASE(
    "the grammar stage masks the chain's draw, ends only when complete, restarts per sequence") {
    // Tokens: 0 end of generation, then pieces.
    const std::vector<std::string> pieces{"", "{", "}", "x", "{}", "}}", "a"};
    std::vector<bool> eog(pieces.size(), false);
    eog[0] = true;
    auto vocab = std::make_shared<const TokenTrie>(pieces, eog);
    auto g = parse_ok("root ::= \"{\" \"x\"* \"}\"");
    ChainParams p;
    p.base.temperature = 0;  // greedy
    p.grammar = g;
    p.grammar_vocab = vocab;
    SamplerChain chain = SamplerChain::from_params(p);
    REQUIRE(chain.stage(0).name() == std::string("grammar"));
    // The model prefers "a", then end of generation, then "}}": all refused at first.
    std::vector<float> logits{5, 1, 0.5f, 0.2f, 2, 4, 9};
    int32_t t = chain.sample(logits);
    CHECK(t == 4);  // "{}" is the best the grammar allows
    chain.accept(t);
    CHECK(chain.sample(logits) == 0);  // complete: only the end is left
    // A fresh sequence starts over.
    SamplerChain other = chain.clone_for(7);
    CHECK(other.sample(logits) == 4);
    // A token the grammar refuses, accepted anyway: the chain says why it draws nothing.
    SamplerChain bad = SamplerChain::from_params(p);
    bad.accept(6);
    CHECK(bad.sample(logits) == -1);
    CHECK_THAT(bad.error(), Catch::Contains("token 6"));
    // clear_history (a chat's next answer) restarts the grammar too.
    bad.clear_history();
    CHECK(bad.sample(logits) == 4);
}
