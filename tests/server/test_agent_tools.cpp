// Tools, structured output and reasoning on the Responses and Messages
// dialects (issue 34 item 4), in engine terms: what the template is given
// (tools in its shape, earlier calls and results as tool_calls and tool
// messages, reasoning as reasoning_content, template variables), and how a
// Hermes answer -- <think> reasoning, text, a <tool_call> -- becomes output
// items / content blocks and their stream events, fed in random pieces. The
// field and event names are those of the `openai` and `anthropic` SDKs'
// types; tests/server/test_agent_sdk_clients.py runs the SDKs themselves.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "ferrox/tokenizer/tokenizer.h"
#include "letter_tokenizer.h"
#include "messages_dialect.h"
#include "openai_dialects.h"
#include "random_data.h"
#include "responses_dialect.h"

using namespace ferrox;
using namespace ferrox::server;
using nlohmann::ordered_json;

namespace {

// <unk> <s> </s>, then "a".."z".
const Tokenizer& letters() {
    static const auto tok = test::letter_tokenizer(false);
    return *tok;
}

// A Hermes template stand-in that keeps what it was given.
struct Seen {
    ordered_json messages, tools, kwargs;
};

struct Parsed {
    std::unique_ptr<Dialect> dialect;
    GenerationRequest request;
    Seen seen;
};

std::unique_ptr<Parsed> parse(std::unique_ptr<Dialect> dialect, const char* body,
                              const char* rendered = "abc") {
    const Tokenizer* tok = &letters();
    auto p = std::make_unique<Parsed>();
    Seen* seen = &p->seen;
    const std::string text = rendered;
    const ChatRenderFn render(
        [seen, text, tok](const ordered_json& messages, const ordered_json& tools,
                          const ordered_json& kwargs) -> Expected<RenderedChat> {
            *seen = {messages, tools, kwargs};
            return RenderedChat{text, tok->encode(text, false, false)};
        },
        DetectedChatFamily{ChatFamily::Hermes, true});
    const RequestLimits limits;
    const std::string tenant = "t";
    p->dialect = std::move(dialect);
    p->dialect->parse(ordered_json::parse(body), ParseInput{*tok, render, 64, limits, tenant},
                      p->request);
    return p;
}

// Whether `g` takes `text` (as the start of an answer, or `whole`).
bool grammar_takes(const std::shared_ptr<const grammar::Grammar>& g, const std::string& text,
                   bool whole) {
    auto vocab = std::make_shared<const grammar::TokenTrie>(std::vector<std::string>{"x"},
                                                            std::vector<bool>{false});
    grammar::GrammarMatcher m(g, vocab);
    return m.accept_bytes(text) && (!whole || m.complete());
}

Event text_event(std::string text) {
    Event e;
    e.text = std::move(text);
    return e;
}

Event done_event(FinishReason why) {
    Event e;
    e.kind = Event::Kind::Done;
    e.finish = why;
    e.prompt_tokens = 3;
    e.completion_tokens = 9;
    return e;
}

ordered_json event_data(const std::string& chunk) {
    const size_t data = chunk.find("\ndata: ");
    REQUIRE(data != std::string::npos);
    return ordered_json::parse(chunk.substr(data + 7));
}

// `text` cut into random pieces of 1..5 bytes.
std::vector<std::string> pieces_of(const std::string& text, std::mt19937_64& rng) {
    std::vector<std::string> out;
    for (size_t at = 0; at < text.size();) {
        const size_t n = std::min<size_t>(1 + rng() % 5, text.size() - at);
        out.push_back(text.substr(at, n));
        at += n;
    }
    return out;
}

// A whole stream of `d` for `answer` fed in random pieces, as events.
std::vector<ordered_json> stream(Dialect& d, const std::string& answer, FinishReason end,
                                 std::mt19937_64& rng) {
    std::vector<std::string> chunks = d.stream_start();
    for (const std::string& piece : pieces_of(answer, rng))
        for (std::string& c : d.stream_text(text_event(piece))) chunks.push_back(std::move(c));
    for (std::string& c : d.stream_end(done_event(end))) chunks.push_back(std::move(c));
    std::vector<ordered_json> out;
    for (const auto& c : chunks) out.push_back(event_data(c));
    return out;
}

std::vector<std::string> collapsed_types(const std::vector<ordered_json>& events) {
    std::vector<std::string> types;
    for (const auto& e : events)
        if (types.empty() || types.back() != e["type"])
            types.push_back(e["type"].get<std::string>());
    return types;
}

// Reasoning, text, then a call, as a Hermes model writes them.
constexpr const char* kAnswer =
    "<think>why so</think>sunny<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
    "{\"city\": \"Oslo\", \"unit\": \"C\"}}\n</tool_call>";
constexpr const char* kArguments = R"({"city":"Oslo","unit":"C"})";

}  // namespace

TEST_CASE("responses: tools, earlier calls, results and reasoning reach the template") {
    const auto p = parse(responses({"r1", "m"}), R"({"input": [
        {"role": "user", "content": "weather?"},
        {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "s"}],
         "content": [{"type": "reasoning_text", "text": "think"}]},
        {"type": "function_call", "id": "fc_0", "call_id": "call_1", "name": "get_weather",
         "arguments": "{\"city\": \"Oslo\"}", "status": "completed"},
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
        {"type": "function_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "noon"}]}],
        "tools": [{"type": "function", "name": "get_weather", "description": "w",
                   "parameters": {"type": "object"}, "strict": true},
                  {"type": "function", "name": "get_time"}],
        "tool_choice": "auto", "parallel_tool_calls": false,
        "reasoning": {"effort": "low", "summary": "auto"}})");
    CHECK(p->seen.messages.dump() == ordered_json::parse(R"([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time",
                                                              "arguments": {}}}],
         "reasoning_content": "think"},
        {"role": "tool", "content": "rain", "tool_call_id": "call_1"},
        {"role": "tool", "content": "noon", "tool_call_id": "call_2"}])")
                                         .dump());
    CHECK(p->seen.tools.dump() == ordered_json::parse(R"([
        {"type": "function", "function": {"name": "get_weather", "description": "w",
                                          "parameters": {"type": "object"}, "strict": true}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {}}}}])")
                                      .dump());
    CHECK(p->seen.kwargs.dump() == R"({"reasoning_effort":"low","enable_thinking":true})");
    CHECK_FALSE(p->request.sampling.grammar);  // auto: nothing forced

    // The response echoes the tools in the Responses shape, and the choices.
    p->dialect->collect(text_event("hi"));
    const auto whole = ordered_json::parse(p->dialect->answer(done_event(FinishReason::Length)));
    CHECK(
        whole["tools"][1].dump() ==
        R"({"type":"function","name":"get_time","parameters":{"type":"object","properties":{}},"strict":null})");
    CHECK(whole["tool_choice"] == "auto");
    CHECK(whole["parallel_tool_calls"] == false);
    CHECK(whole["reasoning"].dump() == R"({"effort":"low","summary":"auto"})");
}

TEST_CASE("responses: a Hermes answer is reasoning, message and function_call items") {
    std::mt19937_64 rng(test::test_seed(341));
    for (int round = 0; round < 8; ++round) {
        const char* body = R"({"input": "weather?", "stream": true, "tools": [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]})";
        const auto streamed = parse(responses({"r2", "m"}), body);
        const auto events = stream(*streamed->dialect, kAnswer, FinishReason::EndOfGeneration, rng);
        CHECK(collapsed_types(events) ==
              std::vector<std::string>{
                  "response.created", "response.in_progress", "response.output_item.added",
                  "response.content_part.added", "response.reasoning_text.delta",
                  "response.reasoning_text.done", "response.content_part.done",
                  "response.output_item.done", "response.output_item.added",
                  "response.content_part.added", "response.output_text.delta",
                  "response.output_text.done", "response.content_part.done",
                  "response.output_item.done", "response.output_item.added",
                  "response.function_call_arguments.delta", "response.function_call_arguments.done",
                  "response.output_item.done", "response.completed"});
        std::string reasoning, text, arguments;
        for (size_t i = 0; i < events.size(); ++i) {
            const auto& e = events[i];
            CHECK(e["sequence_number"] == i);
            const std::string type = e["type"].get<std::string>();
            if (type == "response.reasoning_text.delta") {
                reasoning += e["delta"].get<std::string>();
                CHECK(e["item_id"] == "rs_r2");
                CHECK(e["output_index"] == 0);
            }
            if (type == "response.output_text.delta") {
                text += e["delta"].get<std::string>();
                CHECK(e["item_id"] == "msg_r2_1");
                CHECK(e["output_index"] == 1);
            }
            if (type == "response.function_call_arguments.delta") {
                arguments += e["delta"].get<std::string>();
                CHECK(e["item_id"] == "fc_r2_2");
                CHECK(e["output_index"] == 2);
            }
            if (type == "response.output_item.added" && e["item"]["type"] == "function_call") {
                CHECK(e["item"]["name"] == "get_weather");
                CHECK(e["item"]["arguments"] == "");
                CHECK(e["item"]["call_id"].get<std::string>().rfind("call_", 0) == 0);
            }
        }
        CHECK(reasoning == "why so");
        CHECK(text == "sunny");
        CHECK(arguments == kArguments);
        const auto& last = events.back()["response"];
        CHECK(last["status"] == "completed");
        REQUIRE(last["output"].size() == 3);
        CHECK(
            last["output"][0].dump() ==
            R"({"type":"reasoning","id":"rs_r2","status":"completed","summary":[],"content":[{"type":"reasoning_text","text":"why so"}]})");
        CHECK(last["output"][1]["content"][0]["text"] == "sunny");
        CHECK(last["output"][2]["arguments"] == kArguments);
        // The tokens of the reasoning's text.
        CHECK(last["usage"]["output_tokens_details"]["reasoning_tokens"] ==
              letters().encode("why so", false, false).size());

        // The same answer whole: the same output.
        const auto whole_p = parse(responses({"r2", "m"}), body);
        for (const std::string& piece : pieces_of(kAnswer, rng))
            whole_p->dialect->collect(text_event(piece));
        const auto whole = ordered_json::parse(
            whole_p->dialect->answer(done_event(FinishReason::EndOfGeneration)));
        CHECK(whole["output"].dump() == last["output"].dump());
    }
}

TEST_CASE("responses: a forced call and a JSON format each set the grammar stage") {
    const Tokenizer* tok = &letters();
    const std::shared_ptr<const grammar::TokenTrie> trie = grammar::TokenTrie::from_tokenizer(*tok);
    const ChatRenderFn render(
        [tok](const ordered_json&, const ordered_json&,
              const ordered_json&) -> Expected<RenderedChat> {
            return RenderedChat{"abc", tok->encode("abc", false, false)};
        },
        DetectedChatFamily{ChatFamily::Hermes, true});
    const RequestLimits limits;
    const std::string tenant = "t";
    const auto run = [&](const char* body) {
        GenerationRequest g;
        auto d = responses({"r", "m"});
        d->parse(ordered_json::parse(body), ParseInput{*tok, render, 64, limits, tenant, trie}, g);
        return g;
    };
    const auto json = run(R"({"input": "a", "text": {"format": {"type": "json_schema",
        "name": "n", "schema": {"type": "object", "properties": {"k": {"enum": ["x"]}},
                                "required": ["k"]}}}})");
    REQUIRE(json.sampling.grammar);
    CHECK(json.sampling.grammar_vocab == trie);
    CHECK(grammar_takes(json.sampling.grammar, R"({"k":"x"})", true));
    CHECK_FALSE(grammar_takes(json.sampling.grammar, R"({"k":"y"})", true));
    const auto object = run(R"({"input": "a", "text": {"format": {"type": "json_object"}}})");
    REQUIRE(object.sampling.grammar);
    CHECK(grammar_takes(object.sampling.grammar, R"({"any": [1]})", true));
    CHECK_FALSE(grammar_takes(object.sampling.grammar, "[1]", true));
    const auto forced = run(R"({"input": "a", "tool_choice": "required", "tools": [
        {"type": "function", "name": "f", "parameters": {"type": "object"}}]})");
    REQUIRE(forced.sampling.grammar);
    CHECK(grammar_takes(forced.sampling.grammar, "<tool_call>", false));
    CHECK_FALSE(grammar_takes(forced.sampling.grammar, "{", false));
    // Both: the call is forced, not the format.
    const auto both = run(R"({"input": "a", "tool_choice": "required", "tools": [
        {"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "text": {"format": {"type": "json_object"}}})");
    REQUIRE(both.sampling.grammar);
    CHECK(grammar_takes(both.sampling.grammar, "<tool_call>", false));
    CHECK_FALSE(grammar_takes(both.sampling.grammar, "{", false));
    // A schema keyword not enforced: its pointer under text.format.schema.
    try {
        (void)run(R"({"input": "a", "text": {"format": {"type": "json_schema", "name": "n",
            "schema": {"type": "number", "multipleOf": 2}}}})");
        FAIL("accepted");
    } catch (const ApiError& e) {
        CHECK(e.param == "text.format.schema/multipleOf");
    }
}

TEST_CASE("chat completions: a JSON response_format gives way to a forced call, GBNF does not") {
    const Tokenizer* tok = &letters();
    const std::shared_ptr<const grammar::TokenTrie> trie = grammar::TokenTrie::from_tokenizer(*tok);
    const ChatRenderFn render(
        [tok](const ordered_json&, const ordered_json&,
              const ordered_json&) -> Expected<RenderedChat> {
            return RenderedChat{"abc", tok->encode("abc", false, false)};
        },
        DetectedChatFamily{ChatFamily::Hermes, true});
    const RequestLimits limits;
    const std::string tenant = "t";
    const auto run = [&](const char* extra) {
        GenerationRequest g;
        auto d = chat_completions({"r", "m"});
        const std::string body = std::string(R"({"messages": [{"role": "user", "content": "a"}],
            "tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object"}}}], )") +
                                 extra + "}";
        d->parse(ordered_json::parse(body), ParseInput{*tok, render, 64, limits, tenant, trie}, g);
        return g;
    };
    const auto g = run(R"("response_format": {"type": "json_object"})");
    REQUIRE(g.sampling.grammar);
    CHECK(grammar_takes(g.sampling.grammar, "<tool_call>", false));
    try {
        (void)run(R"("grammar": "root ::= \"x\"")");
        FAIL("accepted");
    } catch (const ApiError& e) {
        CHECK(e.param == "tool_choice");
        CHECK(e.message == "'tool_choice' forcing a call and a grammar exclude each other");
    }
}

TEST_CASE("messages: tools, tool_use, tool_result and thinking reach the template") {
    const auto p = parse(anthropic_messages({"r3", "m"}), R"({"max_tokens": 4,
        "system": "be", "tools": [{"name": "get_weather", "description": "w",
            "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "let me see"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": [{"type": "text", "text": "rain"}]},
                {"type": "text", "text": "and?"}]}]})");
    CHECK(p->seen.messages.dump() == ordered_json::parse(R"([
        {"role": "system", "content": "be"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "let me see", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
         "reasoning_content": "hm"},
        {"role": "tool", "content": "rain", "tool_call_id": "toolu_1"},
        {"role": "user", "content": "and?"}])")
                                         .dump());
    CHECK(
        p->seen.tools.dump() ==
        R"([{"type":"function","function":{"name":"get_weather","description":"w","parameters":{"type":"object"}}}])");
    CHECK(p->seen.kwargs.dump() == R"({"enable_thinking":true})");
    // No token trie in this fixture (and letters cannot spell <think>): the
    // budget is taken unenforced, never a 400 (Anthropic requires the field).
    CHECK(p->request.sampling.reasoning_budget.budget < 0);
    CHECK_FALSE(p->request.sampling.grammar);

    // count_tokens reads the same prompt, tools included.
    const auto disabled = parse(anthropic_messages({"r3", "m"}), R"({"max_tokens": 4,
        "thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": "a"}]})");
    CHECK(disabled->seen.kwargs.dump() == R"({"enable_thinking":false})");
    CHECK(disabled->request.sampling.reasoning_budget.budget < 0);
}

TEST_CASE("messages: a Hermes answer is thinking, text and tool_use blocks") {
    std::mt19937_64 rng(test::test_seed(342));
    for (int round = 0; round < 8; ++round) {
        const char* body = R"({"max_tokens": 40, "stream": true, "tools": [
            {"name": "get_weather", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "weather?"}]})";
        const auto streamed = parse(anthropic_messages({"r4", "m"}), body);
        const auto events = stream(*streamed->dialect, kAnswer, FinishReason::EndOfGeneration, rng);
        const std::vector<std::string> block{"content_block_start", "content_block_delta",
                                             "content_block_stop"};
        std::vector<std::string> want{"message_start", "ping"};
        for (int i = 0; i < 3; ++i) want.insert(want.end(), block.begin(), block.end());
        want.insert(want.end(), {"message_delta", "message_stop"});
        CHECK(collapsed_types(events) == want);
        std::string thinking, text, json;
        std::vector<std::string> starts;
        for (const auto& e : events) {
            if (e["type"] == "content_block_start") starts.push_back(e["content_block"].dump());
            if (e["type"] != "content_block_delta") continue;
            const auto& d = e["delta"];
            if (d["type"] == "thinking_delta") {
                CHECK(e["index"] == 0);
                thinking += d["thinking"].get<std::string>();
            } else if (d["type"] == "text_delta") {
                CHECK(e["index"] == 1);
                text += d["text"].get<std::string>();
            } else {
                CHECK(d["type"] == "input_json_delta");
                CHECK(e["index"] == 2);
                json += d["partial_json"].get<std::string>();
            }
        }
        CHECK(thinking == "why so");
        CHECK(text == "sunny");
        CHECK(json == kArguments);
        REQUIRE(starts.size() == 3);
        CHECK(starts[0] == R"({"type":"thinking","thinking":"","signature":""})");
        CHECK(starts[1] == R"({"type":"text","text":""})");
        const auto tool_start = ordered_json::parse(starts[2]);
        CHECK(tool_start["type"] == "tool_use");
        CHECK(tool_start["name"] == "get_weather");
        CHECK(tool_start["input"].dump() == "{}");
        CHECK(events[events.size() - 2]["delta"]["stop_reason"] == "tool_use");

        const auto whole_p = parse(anthropic_messages({"r4", "m"}), body);
        for (const std::string& piece : pieces_of(kAnswer, rng))
            whole_p->dialect->collect(text_event(piece));
        const auto whole = ordered_json::parse(
            whole_p->dialect->answer(done_event(FinishReason::EndOfGeneration)));
        CHECK(whole["stop_reason"] == "tool_use");
        REQUIRE(whole["content"].size() == 3);
        CHECK(whole["content"][0].dump() ==
              R"({"type":"thinking","thinking":"why so","signature":""})");
        CHECK(whole["content"][1].dump() == R"({"type":"text","text":"sunny"})");
        CHECK(whole["content"][2]["id"] == tool_start["id"]);
        CHECK(whole["content"][2]["input"].dump() == kArguments);
    }
    // Out of budget, the answer's end is max_tokens even after a call.
    const auto cut = parse(anthropic_messages({"r5", "m"}), R"({"max_tokens": 40, "tools": [
        {"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "weather?"}]})");
    cut->dialect->collect(text_event(kAnswer));
    CHECK(ordered_json::parse(cut->dialect->answer(
              done_event(FinishReason::Length)))["stop_reason"] == "max_tokens");
}

TEST_CASE("messages: a prefill is read as the answer's start, not repeated in it") {
    // The prefill ends in "<", which may start a marker: the parser holds it
    // back, and it must not come out again as the answer's first byte.
    const auto p = parse(anthropic_messages({"r6", "m"}), R"({"max_tokens": 8,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}], "messages": [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "x <"}]})");
    p->dialect->collect(text_event("b> y"));
    const auto whole = ordered_json::parse(p->dialect->answer(done_event(FinishReason::Length)));
    CHECK(whole["content"].dump() == R"([{"type":"text","text":"b> y"}])");
    // A prefill that opens a reasoning block: the answer goes on as thinking.
    const auto q = parse(anthropic_messages({"r7", "m"}), R"({"max_tokens": 8, "messages": [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>so"}]})");
    q->dialect->collect(text_event(" on</think>done"));
    const auto thought = ordered_json::parse(q->dialect->answer(done_event(FinishReason::Length)));
    CHECK(thought["content"].dump() ==
          R"([{"type":"thinking","thinking":" on","signature":""},{"type":"text","text":"done"}])");
}
