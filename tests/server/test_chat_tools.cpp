// Chat Completions with tools and reasoning: the request's tool fields
// checked and rendered, and the answer split by the template's family into
// content, reasoning_content and tool_calls -- streamed deltas that fold into
// the same message as the whole answer. The answers here are hand-written
// model outputs in each family's own spelling.
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "ferrox/chat_format/answer.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "letter_tokenizer.h"
#include "openai_api.h"
#include "openai_dialects.h"
#include "tool_call_grammar.h"

using namespace ferrox;
using namespace ferrox::server;
using nlohmann::ordered_json;

namespace {

struct Parsed {
    std::unique_ptr<Dialect> dialect;
    GenerationRequest request;
    ordered_json rendered_tools, rendered_kwargs, rendered_messages;
};

// A render that records what the template would see, for `family`.
Parsed parse(ChatFamily family, const char* body, bool supports_tools = true) {
    static const auto tok = test::letter_tokenizer(false);
    auto p = std::make_unique<Parsed>();
    Parsed* seen = p.get();
    const ChatRenderFn render(
        [seen](const ordered_json& messages, const ordered_json& tools,
               const ordered_json& kwargs) -> Expected<RenderedChat> {
            seen->rendered_messages = messages;
            seen->rendered_tools = tools;
            seen->rendered_kwargs = kwargs;
            return RenderedChat{"abc", tok->encode("abc", false, false)};
        },
        DetectedChatFamily{family, supports_tools});
    const RequestLimits limits;
    const std::string tenant = "t";
    p->dialect = chat_completions({"r", "m"});
    p->dialect->parse(ordered_json::parse(body), ParseInput{*tok, render, 64, limits, tenant},
                      p->request);
    return std::move(*p);
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

ApiError refusal(ChatFamily family, const char* body, bool supports_tools = true) {
    try {
        parse(family, body, supports_tools);
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("accepted: " << body);
    return {};
}

// The whole answer's message for `pieces` fed as text events.
ordered_json whole(Parsed& p, const std::vector<std::string>& pieces, FinishReason end) {
    for (const auto& piece : pieces) p.dialect->collect(text_event(piece));
    return ordered_json::parse(p.dialect->answer(done_event(end)));
}

// The streamed chunks' deltas folded the way the openai client folds them.
ordered_json streamed(Parsed& p, const std::vector<std::string>& pieces, FinishReason end,
                      std::string& finish) {
    std::vector<std::string> chunks;
    for (auto& c : p.dialect->stream_start()) chunks.push_back(c);
    for (const auto& piece : pieces)
        for (auto& c : p.dialect->stream_text(text_event(piece))) chunks.push_back(c);
    for (auto& c : p.dialect->stream_end(done_event(end))) chunks.push_back(c);
    ordered_json message{{"role", "assistant"}, {"content", nullptr}};
    std::string content, reasoning;
    ordered_json calls = ordered_json::array();
    for (const std::string& c : chunks) {
        REQUIRE(c.rfind("data: ", 0) == 0);
        if (c == "data: [DONE]\n\n") continue;
        const auto j = ordered_json::parse(c.substr(6));
        if (j["choices"].empty()) continue;
        const auto& choice = j["choices"][0];
        if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
        const auto& d = choice["delta"];
        if (d.contains("content")) content += d["content"].get<std::string>();
        if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
        if (d.contains("tool_calls"))
            for (const auto& t : d["tool_calls"]) {
                const size_t i = t["index"];
                if (i == calls.size()) {
                    REQUIRE(t.contains("id"));
                    calls.push_back(
                        {{"id", t["id"]},
                         {"type", t["type"]},
                         {"function", {{"name", t["function"]["name"]}, {"arguments", ""}}}});
                }
                REQUIRE(i < calls.size());
                calls[i]["function"]["arguments"] =
                    calls[i]["function"]["arguments"].get<std::string>() +
                    t["function"]["arguments"].get<std::string>();
            }
    }
    if (!content.empty() || calls.empty()) message["content"] = content;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!calls.empty()) message["tool_calls"] = calls;
    return message;
}

// Random cuts of `text`: the scheduler sends a token's text at a time.
std::vector<std::string> cut(const std::string& text, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::string> out;
    for (size_t at = 0; at < text.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(1, 5)(rng);
        out.push_back(text.substr(at, n));
        at += n;
    }
    return out;
}

constexpr const char* kWeatherTools = R"([{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])";

std::string with_tools(const std::string& rest) {
    return R"({"messages": [{"role": "user", "content": "a"}], "tools": )" +
           std::string(kWeatherTools) + rest + "}";
}

}  // namespace

TEST_CASE("a Hermes answer's tool calls come back as tool_calls, streamed and whole alike") {
    const std::string answer =
        "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
        "{}}\n</tool_call>";
    const std::string body = with_tools("");
    auto w = parse(ChatFamily::Hermes, body.c_str());
    REQUIRE(w.rendered_tools.is_array());
    CHECK(w.rendered_tools.size() == 2);
    CHECK(w.rendered_tools[0]["function"]["parameters"]["required"][0] == "city");
    const ordered_json answer_json = whole(w, cut(answer, 1), FinishReason::EndOfGeneration);
    const auto& choice = answer_json["choices"][0];
    CHECK(choice["finish_reason"] == "tool_calls");
    const auto& m = choice["message"];
    CHECK(m["content"] == "Let me look.\n");  // blanks before a call are content
    REQUIRE(m["tool_calls"].size() == 2);
    CHECK(m["tool_calls"][0]["type"] == "function");
    CHECK(m["tool_calls"][0]["function"]["name"] == "get_weather");
    CHECK(ordered_json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()) ==
          ordered_json({{"city", "Paris"}}));
    CHECK(m["tool_calls"][1]["function"]["name"] == "get_time");
    CHECK(m["tool_calls"][0]["id"] != m["tool_calls"][1]["id"]);

    for (uint32_t seed = 0; seed < 20; ++seed) {
        auto s = parse(ChatFamily::Hermes, (with_tools(R"(, "stream": true)")).c_str());
        std::string finish;
        const ordered_json folded =
            streamed(s, cut(answer, seed), FinishReason::EndOfGeneration, finish);
        CHECK(finish == "tool_calls");
        CHECK(folded.dump() == m.dump());
    }
}

TEST_CASE("reasoning goes to reasoning_content, counted in usage, never left in content") {
    const std::string answer = "<think>\nabc def</think>\n\nThe answer.";
    auto w = parse(ChatFamily::ThinkOnly,
                   R"({"messages": [{"role": "user", "content": "a"}],
                       "reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": true}})");
    CHECK(w.rendered_kwargs ==
          ordered_json({{"enable_thinking", true}, {"reasoning_effort", "low"}}));
    const auto j = whole(w, cut(answer, 3), FinishReason::EndOfGeneration);
    const auto& m = j["choices"][0]["message"];
    CHECK(m["content"] == "The answer.");
    CHECK(m["reasoning_content"].get<std::string>().find("abc def") != std::string::npos);
    CHECK(j["choices"][0]["finish_reason"] == "stop");
    // "abc def" and the newline: the letters tokenizer spells 6 letters, and
    // the blank and the newline fall back to <unk> each.
    const auto reasoning_tokens = j["usage"]["completion_tokens_details"]["reasoning_tokens"];
    CHECK(reasoning_tokens.get<int>() >= 6);

    auto s = parse(ChatFamily::ThinkOnly,
                   R"({"messages": [{"role": "user", "content": "a"}], "stream": true})");
    std::string finish;
    CHECK(streamed(s, cut(answer, 4), FinishReason::EndOfGeneration, finish).dump() == m.dump());
}

TEST_CASE("without tools, or with tool_choice none, call markup stays content") {
    const std::string answer =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    for (const std::string& body :
         {std::string(R"({"messages": [{"role": "user", "content": "a"}]})"),
          with_tools(R"(, "tool_choice": "none")")}) {
        auto w = parse(ChatFamily::Hermes, body.c_str());
        const auto j = whole(w, {answer}, FinishReason::EndOfGeneration);
        CHECK(j["choices"][0]["finish_reason"] == "stop");
        CHECK(j["choices"][0]["message"]["content"] == answer);
        CHECK_FALSE(j["choices"][0]["message"].contains("tool_calls"));
    }
}

TEST_CASE("a call cut by max_tokens ends as length, its text returned as content") {
    const std::string answer = "<tool_call>\n{\"name\": \"get_weather\", \"argu";
    auto w = parse(ChatFamily::Hermes, with_tools("").c_str());
    const auto j = whole(w, {answer}, FinishReason::Length);
    CHECK(j["choices"][0]["finish_reason"] == "length");
    CHECK(j["choices"][0]["message"]["content"] == answer);
}

TEST_CASE("earlier calls and tool results reach the template checked") {
    auto w = parse(ChatFamily::Hermes,
                   with_tools("")
                       .replace(with_tools("").find(R"([{"role": "user", "content": "a"}])"),
                                std::string(R"([{"role": "user", "content": "a"}])").size(),
                                R"([{"role": "user", "content": "a"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rain"}])")
                       .c_str());
    const auto& m = w.rendered_messages;
    REQUIRE(m.size() == 3);
    CHECK(m[1]["tool_calls"][0]["function"]["arguments"] == ordered_json({{"city", "Oslo"}}));
    CHECK(m[2]["role"] == "tool");
    CHECK(m[2]["tool_call_id"] == "call_1");
    CHECK(m[2]["content"] == "rain");
}

TEST_CASE("past arguments nested past the body's depth stay text, never parsed") {
    const std::string deep = std::string(200, '[') + std::string(200, ']');
    ordered_json body = ordered_json::parse(with_tools(""));
    body["messages"].push_back(
        {{"role", "assistant"},
         {"tool_calls",
          {{{"id", "c"}, {"function", {{"name", "get_time"}, {"arguments", deep}}}}}}});
    auto w = parse(ChatFamily::Hermes, body.dump().c_str());
    CHECK(w.rendered_messages[1]["tool_calls"][0]["function"]["arguments"] == deep);
}

TEST_CASE("bad tool fields are refused, naming the field") {
    struct Case {
        std::string body;
        std::string param, says;
    };
    const std::string user = R"({"messages": [{"role": "user", "content": "a"}], )";
    const Case cases[] = {
        {with_tools(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"),
         "tool_choice.function.name", "names no tool"},
        {with_tools(R"(, "tool_choice": "sometimes")"), "tool_choice", "must be 'auto'"},
        {user + R"("tools": [{"type": "function", "function": {"name": "a b"}}]})",
         "tools[0].function.name", "1 to 64 characters"},
        {user + R"("tools": [{"type": "function", "function": {"name": "f"}},
                              {"type": "function", "function": {"name": "f"}}]})",
         "tools[1].function.name", "earlier tool"},
        {user + R"("tools": [{"type": "retrieval"}]})", "tools[0].type", "must be 'function'"},
        {user + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})",
         "tools[0].function.parameters", "JSON schema object"},
        {user + R"("tool_choice": "required"})", "tool_choice", "needs 'tools'"},
        {user + R"("reasoning_effort": "extreme"})", "reasoning_effort", "must be"},
        {R"({"messages": [{"role": "user", "content": "a", "tool_call_id": "x"}]})",
         "messages[0].tool_call_id", "role 'tool'"},
    };
    for (const Case& c : cases) {
        const ApiError e = refusal(ChatFamily::Hermes, c.body.c_str());
        CHECK(e.status == 400);
        CHECK(e.param == c.param);
        CHECK(e.message.find(c.says) != std::string::npos);
    }
    const ApiError none = refusal(ChatFamily::Generic, with_tools("").c_str(), false);
    CHECK(none.param == "tools");
    CHECK(none.message.find("generic family") != std::string::npos);
}

namespace {

// Whether `g` takes `text` as a whole answer.
bool grammar_takes(const std::shared_ptr<const grammar::Grammar>& g, const std::string& text) {
    auto vocab = std::make_shared<const grammar::TokenTrie>(std::vector<std::string>{"x"},
                                                            std::vector<bool>{false});
    grammar::GrammarMatcher m(g, vocab);
    return m.accept_bytes(text) && m.complete();
}

ChatToolFields weather_tools(ToolChoice::Mode mode, bool parallel, std::string name = "") {
    ChatToolFields t;
    t.tools = ordered_json::parse(kWeatherTools);
    t.choice = {mode, std::move(name)};
    t.parallel = parallel;
    return t;
}

}  // namespace

TEST_CASE("a forced call's grammar takes exactly the family's calls, which its parser reads") {
    struct Case {
        ChatFamily family;
        std::string good, wrong_name, missing_argument;
    };
    const Case cases[] = {
        {ChatFamily::Hermes,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
         "\"Oslo\"}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_rain\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"},
        {ChatFamily::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
         "{\"name\": \"get_rain\", \"parameters\": {\"city\": \"Oslo\"}}",
         "{\"name\": \"get_weather\", \"parameters\": {}}"},
        {ChatFamily::Mistral,
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
         "[TOOL_CALLS][{\"name\": \"get_rain\", \"arguments\": {\"city\": \"Oslo\"}}]",
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}}]"},
    };
    for (const Case& c : cases) {
        INFO(family_info(c.family).name);
        const auto g =
            tool_call_grammar(c.family, weather_tools(ToolChoice::Mode::Required, false), false);
        CHECK(grammar_takes(g, c.good));
        CHECK_FALSE(grammar_takes(g, c.wrong_name));
        CHECK_FALSE(grammar_takes(g, c.missing_argument));
        CHECK_FALSE(grammar_takes(g, "Sure! " + c.good));  // nothing but the call
        auto parsed = parse_answer(c.family, c.good);
        REQUIRE(parsed);
        REQUIRE(parsed->tool_calls.size() == 1);
        CHECK(parsed->tool_calls[0].name == "get_weather");
        CHECK(ordered_json::parse(parsed->tool_calls[0].arguments) ==
              ordered_json({{"city", "Oslo"}}));
    }
    const std::string two =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Oslo\"}}\n</tool_call>";
    CHECK(grammar_takes(tool_call_grammar(ChatFamily::Hermes,
                                          weather_tools(ToolChoice::Mode::Required, true), false),
                        two));
    CHECK_FALSE(
        grammar_takes(tool_call_grammar(ChatFamily::Hermes,
                                        weather_tools(ToolChoice::Mode::Required, false), false),
                      two));
    const auto named = tool_call_grammar(
        ChatFamily::Hermes, weather_tools(ToolChoice::Mode::Named, false, "get_time"), false);
    CHECK(grammar_takes(named,
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(grammar_takes(named, cases[0].good));
    // A prompt that opened <think>: the grammar closes it first.
    const auto closing = tool_call_grammar(ChatFamily::Hermes,
                                           weather_tools(ToolChoice::Mode::Required, false), true);
    CHECK(grammar_takes(closing, "</think>\n\n" + cases[0].good));
    CHECK_FALSE(grammar_takes(closing, cases[0].good));
}

TEST_CASE("a forced call is refused for families whose calls are not JSON, and for bad schemas") {
    try {
        tool_call_grammar(ChatFamily::Qwen3Coder, weather_tools(ToolChoice::Mode::Required, false),
                          false);
        FAIL("qwen3-coder accepted");
    } catch (const ApiError& e) {
        CHECK(e.param == "tool_choice");
        CHECK(e.message.find("qwen3-coder") != std::string::npos);
    }
    ChatToolFields t = weather_tools(ToolChoice::Mode::Required, false);
    t.tools[0]["function"]["parameters"]["properties"]["city"]["multipleOf"] = 3;
    try {
        tool_call_grammar(ChatFamily::Hermes, t, false);
        FAIL("multipleOf accepted");
    } catch (const ApiError& e) {
        CHECK(e.param == "tools");
        CHECK(e.message.find("multipleOf") != std::string::npos);
    }
}
