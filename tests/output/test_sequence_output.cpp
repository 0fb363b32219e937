// One sequence's output stage over a hand-built SentencePiece vocabulary:
// UTF-8 split across tokens, stop strings spanning tokens, the held-back
// text at the end, end of generation, max_tokens, and logprobs against a
// log-softmax computed here in long double.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ferrox/output/sequence_output.h"
#include "random_data.h"
#include "tokenizer_test_support.h"

using namespace ferrox;
using namespace ferrox::output;
using ferrox::test::id_of;

namespace {

// <unk> <s> </s> (eos), the bytes of "€" (E2 82 AC) as byte tokens, then words.
std::unique_ptr<Tokenizer> tokenizer() {
    VocabSpec spec;
    spec.model = "llama";
    const std::vector<std::pair<std::string, TokenType>> tokens{
        {"<unk>", TokenType::unknown}, {"<s>", TokenType::control}, {"</s>", TokenType::control},
        {"<0xE2>", TokenType::byte},   {"<0x82>", TokenType::byte}, {"<0xAC>", TokenType::byte},
        {"ab", TokenType::normal},     {"cd", TokenType::normal},   {"abc", TokenType::normal},
        {"d", TokenType::normal},      {"x", TokenType::normal},    {"User:", TokenType::normal}};
    for (const auto& [text, type] : tokens) {
        spec.tokens.push_back(text);
        spec.types.push_back(type);
    }
    spec.scores.assign(spec.tokens.size(), 0.0f);
    spec.bos = 1;
    spec.eos = 2;
    spec.add_space_prefix = false;
    return ferrox::test::make_tokenizer(std::move(spec));
}

struct Shown {
    std::string text;
    FinishReason finish = FinishReason::None;
};

Shown run(SequenceOutput& out, const std::vector<int32_t>& tokens) {
    Shown shown;
    for (int32_t t : tokens) {
        auto step = out.push(t);
        shown.text += step.text;
        shown.finish = step.finish;
        if (step.finish != FinishReason::None) return shown;
    }
    return shown;
}

}  // namespace

TEST_CASE("a character split across tokens is shown only when its last byte arrives") {
    const auto tok = tokenizer();
    SequenceOutput out(*tok, {});
    CHECK(out.push(id_of(*tok, "ab")).text == "ab");
    CHECK(out.push(id_of(*tok, "<0xE2>")).text.empty());
    CHECK(out.push(id_of(*tok, "<0x82>")).text.empty());
    CHECK(out.push(id_of(*tok, "<0xAC>")).text == "\xE2\x82\xAC");
    // An unfinished character at the end comes out as is.
    CHECK(out.push(id_of(*tok, "<0xE2>")).text.empty());
    const auto end = out.finish(FinishReason::Cancelled);
    CHECK(end.text == "\xE2");
    CHECK(end.finish == FinishReason::Cancelled);
}

TEST_CASE("a stop string spanning tokens ends the output where it begins") {
    const auto tok = tokenizer();
    OutputOptions o;
    o.stop = {"bc"};
    SequenceOutput out(*tok, o);
    // "ab" + "cd": "b" may begin the stop, so only "a" is shown, then the stop completes.
    CHECK(out.push(id_of(*tok, "ab")).text == "a");
    const auto step = out.push(id_of(*tok, "cd"));
    CHECK(step.text.empty());
    CHECK(step.finish == FinishReason::StopString);
    CHECK(out.push(id_of(*tok, "x")).text.empty());  // finished: nothing more
    CHECK(out.tokens() == 2);
}

TEST_CASE("the earliest end decides between stops inside one token") {
    const auto tok = tokenizer();
    OutputOptions o;
    o.stop = {"abcd", "bc"};
    SequenceOutput one(*tok, o), two(*tok, o);
    // One token "abc" then "d", or "ab" then "cd": "bc" ends first both times.
    CHECK(run(one, {id_of(*tok, "abc"), id_of(*tok, "d")}).text == "a");
    const auto shown = run(two, {id_of(*tok, "ab"), id_of(*tok, "cd")});
    CHECK(shown.text == "a");
    CHECK(shown.finish == FinishReason::StopString);
}

TEST_CASE("a stop string at the start of the output leaves no text") {
    const auto tok = tokenizer();
    OutputOptions o;
    o.stop = {"User:"};
    SequenceOutput out(*tok, o);
    const auto step = out.push(id_of(*tok, "User:"));
    CHECK(step.text.empty());
    CHECK(step.finish == FinishReason::StopString);
}

TEST_CASE("text held back for a stop that never completes comes out at the end") {
    const auto tok = tokenizer();
    OutputOptions o;
    o.stop = {"xyz"};
    SequenceOutput eog(*tok, o), length(*tok, o);
    CHECK(eog.push(id_of(*tok, "ab")).text == "ab");
    CHECK(eog.push(id_of(*tok, "x")).text.empty());  // "x" may begin "xyz"
    const auto end = eog.push(2);                    // </s>
    CHECK(end.text == "x");
    CHECK(end.finish == FinishReason::EndOfGeneration);
    CHECK(eog.tokens() == 2);  // the end-of-generation token is not output

    o.max_tokens = 2;
    SequenceOutput capped(*tok, o);
    CHECK(capped.push(id_of(*tok, "ab")).finish == FinishReason::None);
    const auto last = capped.push(id_of(*tok, "x"));
    CHECK(last.text == "x");
    CHECK(last.finish == FinishReason::Length);
}

TEST_CASE("an end-of-generation token shows nothing of its own") {
    const auto tok = tokenizer();
    SequenceOutput out(*tok, {});
    const auto step = out.push(2);
    CHECK(step.text.empty());
    CHECK(step.finish == FinishReason::EndOfGeneration);
    CHECK(out.finished() == FinishReason::EndOfGeneration);
}

TEST_CASE("logprobs are the log-softmax of the logits, the top ones best first") {
    const auto tok = tokenizer();
    std::mt19937_64 rng(ferrox::test::test_seed(33));
    auto logits = ferrox::test::gaussian(tok->vocab_size(), rng, 3.0f);
    logits[7] = logits[8] = 20.0f;  // tied at the top: the lower id first
    OutputOptions o;
    o.logprobs = true;
    o.top_logprobs = 4;
    SequenceOutput out(*tok, o);
    const int32_t token = id_of(*tok, "cd");
    const auto step = out.push(token, logits);
    REQUIRE(step.logprob);
    long double z = 0;
    for (float v : logits) z += std::exp(static_cast<long double>(v));
    const auto want = [&](int32_t id) {
        return static_cast<double>(static_cast<long double>(logits[size_t(id)]) - std::log(z));
    };
    CHECK(step.logprob->token == token);
    CHECK(step.logprob->piece == "cd");
    CHECK(step.logprob->logprob == Approx(want(token)).margin(1e-5));
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    REQUIRE(step.logprob->top.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        INFO("rank " << i);
        CHECK(step.logprob->top[i].first == tok->token_to_piece(order[i]));
        CHECK(step.logprob->top[i].second == Approx(want(order[i])).margin(1e-5));
    }
    // An end-of-generation token has no logprob to report.
    CHECK_FALSE(out.push(2, logits).logprob);
}
