// The Responses and Messages dialects (issue 34 item 4) in engine terms: what
// a body becomes (the messages the chat template sees, the budget, the
// sampling), the whole answer, the order and fields of the stream's events,
// the refusals by name, and each path's error shape. The field names are
// those of the `openai` and `anthropic` SDKs' types; tests/server/
// test_agent_clients.py runs the SDKs themselves against `ferrox serve`.
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "error_shape.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "letter_tokenizer.h"
#include "messages_dialect.h"
#include "openai_api.h"
#include "random_data.h"
#include "responses_dialect.h"

using namespace ferrox;
using namespace ferrox::server;
using nlohmann::ordered_json;

namespace {

// <unk> <s> </s>, then "a".."z".
std::unique_ptr<Tokenizer> letters() { return test::letter_tokenizer(false); }

// A template stand-in: the contents joined, and the messages it was given kept.
struct Fixture {
    std::unique_ptr<Tokenizer> tok = letters();
    ordered_json seen;  // the messages the template was asked to render
    RequestLimits limits;
    std::string tenant = "7";
    uint32_t max_positions = 64;

    ChatRenderFn render() {
        return [this](const ordered_json& messages) -> Expected<RenderedChat> {
            seen = messages;
            std::string text;
            for (const auto& m : messages) text += m["content"].get<std::string>();
            return RenderedChat{text, tok->encode(text, false, false)};
        };
    }
    GenerationRequest parse(Dialect& d, const char* body) {
        const ChatRenderFn fn = render();
        GenerationRequest g;
        d.parse(ordered_json::parse(body), ParseInput{*tok, fn, max_positions, limits, tenant}, g);
        return g;
    }
    // The ApiError a body is refused with.
    ApiError refusal(Dialect& d, const char* body) {
        try {
            (void)parse(d, body);
        } catch (const ApiError& e) {
            return e;
        }
        FAIL("accepted: " << body);
        return {};
    }
};

Event text_event(std::string text) {
    Event e;
    e.text = std::move(text);
    return e;
}

Event done_event(FinishReason why, std::string stop = "") {
    Event e;
    e.kind = Event::Kind::Done;
    e.finish = why;
    e.prompt_tokens = 9;
    e.completion_tokens = 4;
    e.cached_tokens = 3;
    e.stop_string = std::move(stop);
    return e;
}

// One SSE chunk: "event: <type>\ndata: <json>\n\n", the type twice.
ordered_json event_data(const std::string& chunk) {
    REQUIRE(chunk.rfind("event: ", 0) == 0);
    const size_t newline = chunk.find('\n');
    REQUIRE(newline != std::string::npos);
    const std::string name = chunk.substr(7, newline - 7);
    REQUIRE(chunk.compare(newline + 1, 6, "data: ") == 0);
    REQUIRE(chunk.size() > newline + 9);
    REQUIRE(chunk.substr(chunk.size() - 2) == "\n\n");
    auto j = ordered_json::parse(chunk.substr(newline + 7, chunk.size() - newline - 9));
    if (name != "error") CHECK(j["type"] == name);
    return j;
}

std::vector<ordered_json> events(const Dialect::Chunks& chunks) {
    std::vector<ordered_json> out;
    for (const auto& c : chunks) out.push_back(event_data(c));
    return out;
}

// A random lowercase text cut into 1..4-letter pieces.
std::vector<std::string> random_pieces(std::mt19937_64& rng) {
    std::vector<std::string> pieces(2 + rng() % 6);
    for (auto& p : pieces)
        for (size_t i = 0, n = 1 + rng() % 4; i < n; ++i) p += char('a' + rng() % 26);
    return pieces;
}

}  // namespace

TEST_CASE("a responses body becomes the template's messages, instructions first") {
    Fixture fx;
    auto d = responses({"r1", "m"});
    const auto g = fx.parse(*d, R"({"model": "any", "instructions": "be", "input": [
        {"role": "developer", "content": "x"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ab"},
                                                         {"type": "input_text", "text": "c"}]},
        {"type": "message", "id": "msg_0", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "d", "annotations": []}]},
        {"role": "user", "content": "ef"}],
        "max_output_tokens": 5, "temperature": 0.5, "top_p": 0.5, "store": false,
        "reasoning": null, "metadata": {"k": "v"}, "prompt_cache_key": "s"})");
    const ordered_json want = ordered_json::parse(R"([
        {"role": "system", "content": "be"}, {"role": "system", "content": "x"},
        {"role": "user", "content": "abc"}, {"role": "assistant", "content": "d"},
        {"role": "user", "content": "ef"}])");
    CHECK(fx.seen.dump() == want.dump());
    CHECK(g.prompt == fx.tok->encode("bexabcdef", false, false));
    CHECK(g.max_tokens == 5);
    CHECK(g.sampling.base.temperature == 0.5f);
    CHECK(g.sampling.base.top_p == 0.5f);
    CHECK(g.cache_scope == "7\ns");
    CHECK_FALSE(d->streamed());

    auto plain = responses({"r1", "m"});
    const auto h = fx.parse(*plain, R"({"input": "hello"})");
    CHECK(fx.seen.dump() == R"([{"role":"user","content":"hello"}])");
    CHECK(h.max_tokens == 64 - 5);  // the room left
    CHECK(h.cache_scope == "7\n");
}

TEST_CASE("a whole response is the SDK's Response: one message item, status and usage") {
    Fixture fx;
    auto d = responses({"r2", "m"});
    (void)fx.parse(*d, R"({"input": "hi", "max_output_tokens": 4, "metadata": {"k": "v"}})");
    d->collect(text_event("ab"));
    d->collect(text_event("c"));
    auto whole = ordered_json::parse(d->answer(done_event(FinishReason::EndOfGeneration)));
    CHECK(whole["created_at"].is_number_integer());
    whole.erase("created_at");
    const ordered_json want = ordered_json::parse(R"({
        "id": "resp_r2", "object": "response", "status": "completed", "background": false,
        "error": null, "incomplete_details": null, "instructions": null, "max_output_tokens": 4,
        "metadata": {"k": "v"}, "model": "m",
        "output": [{"type": "message", "id": "msg_r2", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "abc", "annotations": []}]}],
        "parallel_tool_calls": true, "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null}, "store": false, "temperature": 0.8,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 0.95,
        "truncation": "disabled",
        "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 3,
                                                              "cache_write_tokens": 0},
                  "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 13}})");
    CHECK(whole.dump() == want.dump());

    auto cut = responses({"r3", "m"});
    (void)fx.parse(*cut, R"({"input": "hi"})");
    cut->collect(text_event("ab"));
    const auto incomplete = ordered_json::parse(cut->answer(done_event(FinishReason::Length)));
    CHECK(incomplete["status"] == "incomplete");
    CHECK(incomplete["incomplete_details"].dump() == R"({"reason":"max_output_tokens"})");
    CHECK(incomplete["output"][0]["status"] == "incomplete");
    // A stop string is a whole answer too (the dialect has none to set, but the engine may).
    auto stopped = responses({"r4", "m"});
    (void)fx.parse(*stopped, R"({"input": "hi"})");
    CHECK(ordered_json::parse(stopped->answer(done_event(FinishReason::StopString)))["status"] ==
          "completed");
}

TEST_CASE("a streamed response sends the typed events in order, numbered from 0") {
    Fixture fx;
    std::mt19937_64 rng(test::test_seed(34));
    for (const FinishReason end : {FinishReason::EndOfGeneration, FinishReason::Length}) {
        auto d = responses({"r5", "m"});
        (void)fx.parse(*d, R"({"input": "hi", "stream": true})");
        REQUIRE(d->streamed());
        auto all = events(d->stream_start());
        std::string text;
        for (const auto& piece : random_pieces(rng)) {
            text += piece;
            // The message item opens with the first text; then one delta per piece.
            const auto delta = events(d->stream_text(text_event(piece)));
            REQUIRE(delta.size() == (text == piece ? 3u : 1u));
            CHECK(delta.back()["delta"] == piece);
            all.insert(all.end(), delta.begin(), delta.end());
        }
        const auto tail = events(d->stream_end(done_event(end)));
        all.insert(all.end(), tail.begin(), tail.end());

        std::vector<std::string> types;
        for (size_t i = 0; i < all.size(); ++i) {
            CHECK(all[i]["sequence_number"] == i);
            const auto type = all[i]["type"].get<std::string>();
            if (types.empty() || types.back() != type) types.push_back(type);
            if (all[i].contains("item_id")) CHECK(all[i]["item_id"] == "msg_r5");
            if (all[i].contains("output_index")) CHECK(all[i]["output_index"] == 0);
        }
        const bool whole = end != FinishReason::Length;
        const std::vector<std::string> want{"response.created",
                                            "response.in_progress",
                                            "response.output_item.added",
                                            "response.content_part.added",
                                            "response.output_text.delta",
                                            "response.output_text.done",
                                            "response.content_part.done",
                                            "response.output_item.done",
                                            whole ? "response.completed" : "response.incomplete"};
        CHECK(types == want);
        CHECK(all[0]["response"]["status"] == "in_progress");
        CHECK(all[0]["response"]["output"].empty());
        CHECK(all[2]["item"]["content"].empty());
        CHECK(all[all.size() - 4]["text"] == text);
        CHECK(all[all.size() - 3]["part"]["text"] == text);
        CHECK(all[all.size() - 2]["item"]["content"][0]["text"] == text);
        CHECK(all[all.size() - 2]["item"]["status"] == (whole ? "completed" : "incomplete"));
        const auto& last = all.back()["response"];
        CHECK(last["status"] == (whole ? "completed" : "incomplete"));
        CHECK(last["output"][0]["content"][0]["text"] == text);
        CHECK(last["usage"]["output_tokens"] == 4);
    }
}

TEST_CASE("a response stream cut short ends with response.failed carrying the error") {
    Fixture fx;
    auto d = responses({"r6", "m"});
    (void)fx.parse(*d, R"({"input": "hi", "stream": true})");
    size_t sent = d->stream_start().size();
    sent += d->stream_text(text_event("ab")).size();
    const auto failed = events(d->stream_error({504, "the request timed out", ""}));
    REQUIRE(failed.size() == 1);
    CHECK(failed[0]["type"] == "response.failed");
    CHECK(failed[0]["sequence_number"] == sent);
    CHECK(failed[0]["response"]["status"] == "failed");
    CHECK(failed[0]["response"]["error"].dump() ==
          R"({"code":"server_error","message":"the request timed out"})");
    CHECK(failed[0]["response"]["output"][0]["content"][0]["text"] == "ab");
}

TEST_CASE("the responses dialect refuses state, tools, schemas and reasoning by name") {
    Fixture fx;
    const std::pair<const char*, const char*> cases[] = {
        {R"({"input": "a", "store": true})", "store"},
        {R"({"input": "a", "previous_response_id": "resp_1"})", "previous_response_id"},
        {R"({"input": "a", "conversation": "c"})", "conversation"},
        {R"({"input": "a", "tools": [{"type": "web_search"}]})", "tools[0].type"},
        {R"({"input": "a", "tool_choice": "required"})", "tool_choice"},
        {R"({"input": "a", "tool_choice": {"type": "function", "name": "f"}})", "tool_choice.name"},
        {R"({"input": "a", "reasoning": {"effort": "extreme"}})", "reasoning.effort"},
        {R"({"input": "a", "text": {"format": {"type": "json_schema"}}})", "text.format.name"},
        {R"({"input": "a", "text": {"format": {"type": "xml"}}})", "text.format.type"},
        {R"({"input": "a", "text": {"verbosity": "low"}})", "text.verbosity"},
        {R"({"input": "a", "max_tool_calls": 2})", "max_tool_calls"},
        {R"({"input": [{"type": "custom_tool_call", "call_id": "c", "input": "x"}]})",
         "input[0].type"},
        {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})",
         "input[0].call_id"},
        {R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "x"}]})",
         "input[0].encrypted_content"},
        {R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})",
         "input[0].content[0].type"},
        {R"({"input": [{"role": "tool", "content": "x"}]})", "input[0].role"},
        {R"({"input": []})", "input"},
        {R"({"max_output_tokens": 3})", "input"},
        {R"({"input": "a", "max_output_tokens": 64})", "max_output_tokens"},
        {R"({"input": "a", "metadata": {"k": 1}})", "metadata.k"},
        {R"({"input": "a", "n": 2})", "n"},
        {R"({"input": "a", "stream_options": {}})", "stream_options"},
    };
    for (const auto& [body, param] : cases) {
        INFO(body);
        auto d = responses({"r", "m"});
        const ApiError e = fx.refusal(*d, body);
        CHECK(e.status == 400);
        CHECK(e.param == param);
        CHECK(e.message.find(param) != std::string::npos);  // the message names it too
    }
    // A template whose family has no tool calls ferrox reads: named.
    auto d = responses({"r", "m"});
    CHECK(fx.refusal(*d, R"({"input": "a", "tools": [{"type": "function", "name": "f"}]})")
              .message.rfind("'tools': this model's chat template (generic family) has no tool "
                             "calls ferrox reads",
                             0) == 0);
}

TEST_CASE("a messages body: system, turns, and a last assistant turn continued") {
    Fixture fx;
    auto d = anthropic_messages({"r7", "m"});
    const auto g = fx.parse(*d, R"({"model": "claude-x", "max_tokens": 6,
        "system": [{"type": "text", "text": "be", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "ab"},
                     {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
                     {"role": "user", "content": [{"type": "text", "text": "d"},
                                                  {"type": "text", "text": "e"}]},
                     {"role": "assistant", "content": "fg"}],
        "stop_sequences": ["x", "yz"], "temperature": 0.25, "top_p": 0.5, "top_k": 7,
        "metadata": {"user_id": "u"}, "stream": true})");
    const ordered_json want = ordered_json::parse(R"([
        {"role": "system", "content": "be"}, {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "c"}, {"role": "user", "content": "de"}])");
    CHECK(fx.seen.dump() == want.dump());
    // The prefill "fg" follows the rendered turns: the answer continues it.
    CHECK(g.prompt == fx.tok->encode("beabcdefg", false, false));
    CHECK(g.max_tokens == 6);
    CHECK(g.stop == std::vector<std::string>{"x", "yz"});
    CHECK(g.sampling.base.temperature == 0.25f);
    CHECK(g.sampling.base.top_p == 0.5f);
    CHECK(g.sampling.base.top_k == 7);
    CHECK(d->streamed());
    CHECK(count_message_tokens(ordered_json::parse(R"({"model": "m", "system": "be", "messages": [
                  {"role": "user", "content": "ab"}, {"role": "assistant", "content": "c"},
                  {"role": "user", "content": "de"}, {"role": "assistant", "content": "fg"}]})"),
                               ParseInput{*fx.tok, fx.render(), fx.max_positions, fx.limits,
                                          fx.tenant}) == g.prompt.size());
}

TEST_CASE("a whole message names its stop reason, the stop sequence and the cached tokens") {
    Fixture fx;
    const std::tuple<FinishReason, std::string, const char*, ordered_json> ends[] = {
        {FinishReason::EndOfGeneration, "", "end_turn", nullptr},
        {FinishReason::Length, "", "max_tokens", nullptr},
        {FinishReason::StopString, "yz", "stop_sequence", "yz"}};
    for (const auto& [why, stop, reason, sequence] : ends) {
        auto d = anthropic_messages({"r8", "m"});
        (void)fx.parse(*d, R"({"max_tokens": 4, "messages": [{"role": "user", "content": "a"}]})");
        d->collect(text_event("b"));
        d->collect(text_event("c"));
        const auto whole = ordered_json::parse(d->answer(done_event(why, stop)));
        ordered_json want = ordered_json::parse(R"({"id": "msg_r8", "type": "message",
            "role": "assistant", "model": "m", "content": [{"type": "text", "text": "bc"}],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 6, "cache_read_input_tokens": 3, "output_tokens": 4}})");
        want["stop_reason"] = reason;
        want["stop_sequence"] = sequence;
        CHECK(whole.dump() == want.dump());
    }
}

TEST_CASE("a streamed message sends Anthropic's events in order, text deltas in block 0") {
    Fixture fx;
    std::mt19937_64 rng(test::test_seed(35));
    auto d = anthropic_messages({"r9", "m"});
    const auto g = fx.parse(
        *d,
        R"({"max_tokens": 4, "stream": true, "messages": [{"role": "user", "content": "abc"}]})");
    auto all = events(d->stream_start());
    std::string text;
    for (const auto& piece : random_pieces(rng)) {
        text += piece;
        // Block 0 opens with the first text; then one delta per piece.
        const auto delta = events(d->stream_text(text_event(piece)));
        REQUIRE(delta.size() == (text == piece ? 2u : 1u));
        CHECK(delta.back().dump() ==
              ordered_json({{"type", "content_block_delta"},
                            {"index", 0},
                            {"delta", {{"type", "text_delta"}, {"text", piece}}}})
                  .dump());
        all.insert(all.end(), delta.begin(), delta.end());
    }
    const auto tail = events(d->stream_end(done_event(FinishReason::StopString, "x")));
    all.insert(all.end(), tail.begin(), tail.end());
    std::vector<std::string> types;
    for (const auto& e : all)
        if (types.empty() || types.back() != e["type"])
            types.push_back(e["type"].get<std::string>());
    CHECK(types == std::vector<std::string>{"message_start", "ping", "content_block_start",
                                            "content_block_delta", "content_block_stop",
                                            "message_delta", "message_stop"});
    const auto& start = all[0]["message"];
    CHECK(start["id"] == "msg_r9");
    CHECK(start["content"].empty());
    CHECK(start["stop_reason"].is_null());
    CHECK(start["usage"]["input_tokens"] == g.prompt.size());
    CHECK(all[2]["content_block"].dump() == R"({"type":"text","text":""})");
    const auto& delta = all[all.size() - 2];
    CHECK(delta["delta"].dump() == R"({"stop_reason":"stop_sequence","stop_sequence":"x"})");
    CHECK(delta["usage"].dump() ==
          R"({"input_tokens":6,"cache_read_input_tokens":3,"output_tokens":4})");
}

TEST_CASE("a message stream cut short ends with an Anthropic error event") {
    Fixture fx;
    auto d = anthropic_messages({"r10", "m"});
    (void)fx.parse(*d, R"({"max_tokens": 4, "stream": true, "messages": [{"role": "user",
                         "content": "a"}]})");
    const auto chunks = d->stream_error({503, "the server is shutting down", ""});
    REQUIRE(chunks.size() == 1);
    CHECK(chunks[0] ==
          "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
          "\"message\":\"the server is shutting down\"}}\n\n");
}

TEST_CASE("the messages dialect refuses tool use, thinking and images by name") {
    Fixture fx;
    const std::pair<const char*, const char*> cases[] = {
        {R"({"messages": [{"role": "user", "content": "a"}]})", "max_tokens"},
        {R"({"max_tokens": 2, "messages": []})", "messages"},
        {R"({"max_tokens": 2, "messages": [{"role": "system", "content": "a"}]})",
         "messages[0].role"},
        {R"({"max_tokens": 2, "messages": [{"role": "assistant", "content": [
             {"type": "tool_result", "tool_use_id": "t"}]}]})",
         "messages[0].content[0].type"},
        {R"({"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})",
         "messages[0].content[0].tool_use_id"},
        {R"({"max_tokens": 2, "messages": [{"role": "user", "content": [
             {"type": "redacted_thinking", "data": "x"}]}]})",
         "messages[0].content[0].type"},
        {R"({"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "image"}]}]})",
         "messages[0].content[0].type"},
        {R"({"max_tokens": 2, "tools": [{"type": "bash_20250124", "name": "bash"}],
             "messages": [{"role": "user", "content": "a"}]})",
         "tools[0].type"},
        {R"({"max_tokens": 2, "tools": [{"name": "f"}], "messages": [{"role": "user",
             "content": "a"}]})",
         "tools[0].input_schema"},
        {R"({"max_tokens": 2, "tool_choice": {"type": "any"}, "messages": [{"role": "user",
             "content": "a"}]})",
         "tool_choice"},
        {R"({"max_tokens": 2, "thinking": {"type": "adaptive"},
             "messages": [{"role": "user", "content": "a"}]})",
         "thinking.type"},
        {R"({"max_tokens": 2, "thinking": {"type": "enabled"},
             "messages": [{"role": "user", "content": "a"}]})",
         "thinking.budget_tokens"},
        {R"({"max_tokens": 2, "temperature": 1.5, "messages": [{"role": "user", "content": "a"}]})",
         "temperature"},
        {R"({"max_tokens": 2, "stop_sequences": "x", "messages": [{"role": "user",
             "content": "a"}]})",
         "stop_sequences"},
        {R"({"max_tokens": 2, "metadata": {"tag": "x"}, "messages": [{"role": "user",
             "content": "a"}]})",
         "metadata.tag"},
        {R"({"max_tokens": 64, "messages": [{"role": "user", "content": "a"}]})", "max_tokens"},
    };
    for (const auto& [body, param] : cases) {
        INFO(body);
        auto d = anthropic_messages({"r", "m"});
        const ApiError e = fx.refusal(*d, body);
        CHECK(e.status == 400);
        CHECK(e.param == param);
        CHECK(e.message.find(param) != std::string::npos);  // the message names it too
    }
    // A prefill (a last assistant turn) is text only: the answer continues it.
    auto d = anthropic_messages({"r", "m"});
    const ApiError prefill = fx.refusal(*d, R"({"max_tokens": 2, "messages": [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})");
    CHECK(prefill.param == "messages[1].content");
    CHECK(prefill.message.find("must be text only") != std::string::npos);
}

TEST_CASE("errors take the shape of their path's API, Anthropic's typed by status") {
    CHECK(error_shape_of("/v1/messages") == ErrorShape::Anthropic);
    CHECK(error_shape_of("/v1/messages/count_tokens") == ErrorShape::Anthropic);
    CHECK(error_shape_of("/v1/messages/batches") == ErrorShape::Anthropic);
    CHECK(error_shape_of("/v1/messagesx") == ErrorShape::OpenAI);
    CHECK(error_shape_of("/v1/responses") == ErrorShape::OpenAI);
    CHECK(error_shape_of("/v1/chat/completions") == ErrorShape::OpenAI);
    CHECK(error_json(ErrorShape::Anthropic, {401, "no key", ""}) ==
          R"({"type":"error","error":{"type":"authentication_error","message":"no key"}})");
    CHECK(
        error_json(ErrorShape::OpenAI, {400, "'x' bad", "x"}) ==
        R"({"error":{"message":"'x' bad","type":"invalid_request_error","param":"x","code":400}})");
    const std::pair<int, const char*> types[] = {
        {400, "invalid_request_error"}, {401, "authentication_error"},
        {403, "permission_error"},      {404, "not_found_error"},
        {405, "invalid_request_error"}, {413, "invalid_request_error"},
        {429, "rate_limit_error"},      {500, "api_error"},
        {503, "overloaded_error"},      {504, "timeout_error"}};
    for (const auto& [status, type] : types) {
        INFO(status);
        CHECK(std::string(anthropic_error_type(status)) == type);
    }
    // The transport's own refusals, by the target whose header it read.
    CHECK(transport_error_body(413, "big", "/v1/messages?beta=true").body ==
          R"({"type":"error","error":{"type":"invalid_request_error","message":"big"}})");
    CHECK(transport_error_body(413, "big", "/v1/responses").body ==
          openai_error_body(413, "big").body);
    CHECK(transport_error_body(503, "full", "").body == openai_error_body(503, "full").body);
}
