// The OpenAI layer's half of "the server in engine terms": the HTTP status
// each engine end maps to, the transport's error body, and the two dialects'
// shapes (parse a body into a GenerationRequest; chunks and the whole answer
// from events), checked against the JSON written out here by hand.
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/tokenizer/tokenizer.h"
#include "letter_tokenizer.h"
#include "openai_api.h"
#include "openai_dialects.h"

using namespace ferrox;
using namespace ferrox::server;
using nlohmann::ordered_json;

namespace {

// <unk> <s> </s>, then "a".."z".
std::unique_ptr<Tokenizer> letters() { return test::letter_tokenizer(false); }

Event text_event(std::string text) {
    Event e;
    e.text = std::move(text);
    return e;
}

Event done_event(FinishReason why) {
    Event e;
    e.kind = Event::Kind::Done;
    e.finish = why;
    e.why = "because";
    e.prompt_tokens = 3;
    e.completion_tokens = 2;
    e.cached_tokens = 1;
    return e;
}

struct Parsed {
    std::unique_ptr<Dialect> dialect;
    GenerationRequest request;
};

Parsed parse(std::unique_ptr<Dialect> d, const Tokenizer& tok, const char* body) {
    const ChatRenderFn render = [&tok](const ordered_json& messages) -> Expected<RenderedChat> {
        std::string text;
        for (const auto& m : messages) text += m["content"].get<std::string>();
        return RenderedChat{text, tok.encode(text, false, false)};
    };
    const RequestLimits limits;
    const std::string tenant = "7";
    Parsed p{std::move(d), {}};
    p.dialect->parse(ordered_json::parse(body), ParseInput{tok, render, 64, limits, tenant},
                     p.request);
    return p;
}

const ordered_json kUsage = {{"prompt_tokens", 3},
                             {"completion_tokens", 2},
                             {"total_tokens", 5},
                             {"prompt_tokens_details", {{"cached_tokens", 1}}}};

}  // namespace

TEST_CASE("each end the scheduler reports maps to one HTTP status, or to none when whole") {
    CHECK_FALSE(cut_short(done_event(FinishReason::EndOfGeneration)));
    CHECK_FALSE(cut_short(done_event(FinishReason::StopString)));
    CHECK_FALSE(cut_short(done_event(FinishReason::Length)));
    const std::pair<FinishReason, int> cut[] = {{FinishReason::Cancelled, 499},
                                                {FinishReason::Timeout, 504},
                                                {FinishReason::NoRoom, 503},
                                                {FinishReason::Failed, 500},
                                                {FinishReason::Shutdown, 503}};
    for (const auto& [why, status] : cut) {
        const auto e = cut_short(done_event(why));
        REQUIRE(e);
        CHECK(e->status == status);
        CHECK(e->message == "because");
    }
}

TEST_CASE("the transport's errors are shaped by the OpenAI layer, typed by status") {
    const auto busy = openai_error_body(503, "full");
    CHECK(busy.content_type == "application/json");
    CHECK(busy.body == R"({"error":{"message":"full","type":"unavailable"}})");
    CHECK(openai_error_body(413, "big").body ==
          R"({"error":{"message":"big","type":"invalid_request_error"}})");
    CHECK(openai_error_body(500, "none").body ==
          R"({"error":{"message":"none","type":"server_error"}})");
}

TEST_CASE("a completion is parsed into a request and answered in the legacy shape") {
    const auto tok = letters();
    auto p = parse(completions({"r1", "m"}), *tok,
                   R"({"prompt": "abc", "max_tokens": 4, "temperature": 0, "stop": ["x"],
                       "logprobs": 1, "seed": 5, "cache_salt": "s"})");
    CHECK(p.request.prompt == tok->encode("abc", false, false));
    CHECK(p.request.max_tokens == 4);
    CHECK(p.request.stop == std::vector<std::string>{"x"});
    CHECK(p.request.logprobs);
    CHECK(p.request.top_logprobs == 1);
    CHECK(p.request.sampling.base.seed == 5);
    CHECK(p.request.cache_scope == "7\ns");
    CHECK_FALSE(p.dialect->streamed());

    Event t = text_event("de");
    t.logprobs.push_back({4, "d", -0.5f, {{"d", -0.5f}}});
    t.logprobs.push_back({5, "e", -0.25f, {{"e", -0.25f}}});
    p.dialect->collect(t);
    auto answer = ordered_json::parse(p.dialect->answer(done_event(FinishReason::Length)));
    answer.erase("created");
    const ordered_json want = {{"id", "cmpl-r1"},
                               {"object", "text_completion"},
                               {"model", "m"},
                               {"choices",
                                {{{"text", "de"},
                                  {"index", 0},
                                  {"logprobs",
                                   {{"tokens", {"d", "e"}},
                                    {"token_logprobs", {-0.5, -0.25}},
                                    {"top_logprobs", {{{"d", -0.5}}, {{"e", -0.25}}}},
                                    {"text_offset", {3, 4}}}},  // counted from the prompt's end
                                  {"finish_reason", "length"}}}},
                               {"usage", kUsage}};
    CHECK(answer.dump() == want.dump());
}

TEST_CASE("a streamed chat opens with the role, sends deltas, and ends with usage and [DONE]") {
    const auto tok = letters();
    auto p = parse(chat_completions({"r2", "m"}), *tok,
                   R"({"messages": [{"role": "user", "content": "ab"}], "max_tokens": 3,
                       "max_completion_tokens": 2, "stream": true,
                       "stream_options": {"include_usage": true}})");
    CHECK(p.request.prompt == tok->encode("ab", false, false));
    CHECK(p.request.max_tokens == 2);  // max_completion_tokens wins
    CHECK(p.dialect->streamed());

    const auto data = [](const std::string& chunk) {
        REQUIRE(chunk.rfind("data: ", 0) == 0);
        REQUIRE(chunk.size() > 8);
        REQUIRE(chunk.substr(chunk.size() - 2) == "\n\n");
        auto j = ordered_json::parse(chunk.substr(6, chunk.size() - 8));
        j.erase("created");
        return j;
    };
    const auto start = p.dialect->stream_start();
    REQUIRE(start.size() == 1);
    CHECK(data(start[0])["choices"][0]["delta"] ==
          ordered_json({{"role", "assistant"}, {"content", ""}}));
    const auto delta = p.dialect->stream_text(text_event("hi"));
    REQUIRE(delta.size() == 1);
    const auto d = data(delta[0]);
    CHECK(d["id"] == "chatcmpl-r2");
    CHECK(d["object"] == "chat.completion.chunk");
    CHECK(d["choices"][0].dump() ==
          R"({"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null})");
    const auto end = p.dialect->stream_end(done_event(FinishReason::StopString));
    REQUIRE(end.size() == 3);
    const auto last = data(end[0]);
    CHECK(last["choices"][0]["finish_reason"] == "stop");
    CHECK(last["usage"].is_null());
    const auto usage = data(end[1]);
    CHECK(usage["choices"].empty());
    ordered_json chat_usage = kUsage;
    chat_usage["completion_tokens_details"] = {{"reasoning_tokens", 0}};
    CHECK(usage["usage"].dump() == chat_usage.dump());
    CHECK(end[2] == "data: [DONE]\n\n");
}

TEST_CASE("a dialect refuses a field it does not know, naming it") {
    const auto tok = letters();
    try {
        parse(chat_completions({"r3", "m"}), *tok,
              R"({"messages": [{"role": "user", "content": "a"}], "audio": {}})");
        FAIL("audio was accepted");
    } catch (const ApiError& e) {
        CHECK(e.status == 400);
        CHECK(e.param == "audio");
        CHECK(e.message == "'audio' is not supported by ferrox");
    }
}
