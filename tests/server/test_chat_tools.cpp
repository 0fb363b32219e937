// Chat Completions with tools and reasoning: the request's tool fields
// checked and rendered, and the answer split by the template's family into
// content, reasoning_content and tool_calls -- streamed deltas that fold into
// the same message as the whole answer. The answers here are hand-written
// model outputs in each family's own spelling.
#include <catch2/catch.hpp>
#include <cctype>
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
#include "random_data.h"
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
        DetectedChatFamily{family, supports_tools, false});
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

namespace {

DetectedChatFamily detected(ChatFamily family, bool fenced = false) {
    return DetectedChatFamily{family, true, fenced};
}

ChatParseOptions options_for(ChatFamily family, const ChatToolFields& tools) {
    ChatParseOptions o;
    o.text_parameters = text_parameters(family, tools);
    return o;
}

}  // namespace

TEST_CASE("a forced call's grammar takes exactly the family's calls, which its parser reads") {
    struct Case {
        DetectedChatFamily family;
        std::string good, wrong_name, missing_argument;
    };
    // In each family's own spelling (the templates' renders of a past call).
    const std::string ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>";
    const std::string ds_end = "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    const Case cases[] = {
        {detected(ChatFamily::Hermes),
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
         "\"Oslo\"}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_rain\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"},
        {detected(ChatFamily::Llama3),
         "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
         "{\"name\": \"get_rain\", \"parameters\": {\"city\": \"Oslo\"}}",
         "{\"name\": \"get_weather\", \"parameters\": {}}"},
        {detected(ChatFamily::Mistral),
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
         "[TOOL_CALLS][{\"name\": \"get_rain\", \"arguments\": {\"city\": \"Oslo\"}}]",
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}}]"},
        {detected(ChatFamily::Qwen3Coder),
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
         "</tool_call>",
         "<tool_call>\n<function=get_rain>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
         "</tool_call>",
         "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>"},
        {detected(ChatFamily::Glm),
         "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
         "</tool_call>",
         "<tool_call>get_rain\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
         "</tool_call>",
         "<tool_call>get_weather\n</tool_call>"},
        {detected(ChatFamily::Harmony),
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
         "\"Oslo\"}",
         "<|channel|>commentary to=functions.get_rain <|constrain|>json<|message|>{\"city\": "
         "\"Oslo\"}",
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}"},
        {detected(ChatFamily::DeepSeek),  // V3 / V3.1
         ds + "get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}" + ds_end,
         ds + "get_rain<｜tool▁sep｜>{\"city\": \"Oslo\"}" + ds_end,
         ds + "get_weather<｜tool▁sep｜>{}" + ds_end},
        {detected(ChatFamily::DeepSeek, true),  // R1
         ds + "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```" + ds_end,
         ds + "function<｜tool▁sep｜>get_rain\n```json\n{\"city\": \"Oslo\"}\n```" + ds_end,
         ds + "function<｜tool▁sep｜>get_weather\n```json\n{}\n```" + ds_end},
    };
    const ChatToolFields tools = weather_tools(ToolChoice::Mode::Required, false);
    for (const Case& c : cases) {
        INFO(family_info(c.family.family).name << (c.family.fenced_call_arguments ? " R1" : ""));
        const auto g = tool_call_grammar(c.family, tools, false);
        CHECK(grammar_takes(g, c.good));
        CHECK_FALSE(grammar_takes(g, c.wrong_name));
        CHECK_FALSE(grammar_takes(g, c.missing_argument));
        CHECK_FALSE(grammar_takes(g, "Sure! " + c.good));  // nothing but the call
        auto parsed = parse_answer(c.family.family, c.good, options_for(c.family.family, tools));
        REQUIRE(parsed);
        CHECK(parsed->content.empty());
        REQUIRE(parsed->tool_calls.size() == 1);
        CHECK(parsed->tool_calls[0].name == "get_weather");
        CHECK(ordered_json::parse(parsed->tool_calls[0].arguments) ==
              ordered_json({{"city", "Oslo"}}));
    }
    // DeepSeek's two spellings are not interchangeable: each follows its template.
    CHECK_FALSE(grammar_takes(tool_call_grammar(detected(ChatFamily::DeepSeek, true), tools, false),
                              cases[6].good));
    CHECK_FALSE(grammar_takes(tool_call_grammar(detected(ChatFamily::DeepSeek), tools, false),
                              cases[7].good));
    const std::string two =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Oslo\"}}\n</tool_call>";
    CHECK(grammar_takes(tool_call_grammar(detected(ChatFamily::Hermes),
                                          weather_tools(ToolChoice::Mode::Required, true), false),
                        two));
    CHECK_FALSE(grammar_takes(tool_call_grammar(detected(ChatFamily::Hermes), tools, false), two));
    const auto named =
        tool_call_grammar(detected(ChatFamily::Hermes),
                          weather_tools(ToolChoice::Mode::Named, false, "get_time"), false);
    CHECK(grammar_takes(named,
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(grammar_takes(named, cases[0].good));
    // A prompt that opened <think> (DeepSeek R1's): the grammar closes it first.
    const auto closing = tool_call_grammar(detected(ChatFamily::Hermes), tools, true);
    CHECK(grammar_takes(closing, "</think>\n\n" + cases[0].good));
    CHECK_FALSE(grammar_takes(closing, cases[0].good));
    const auto r1 = tool_call_grammar(detected(ChatFamily::DeepSeek, true), tools, true);
    CHECK(grammar_takes(r1, "</think>\n\n" + cases[7].good));
}

TEST_CASE("tagged parameters: a string is written bare and read back as text, never as JSON") {
    ChatToolFields t = weather_tools(ToolChoice::Mode::Required, true);
    t.tools[0]["function"]["parameters"]["properties"]["days"] = {
        {"type", "integer"}, {"minimum", 1}, {"maximum", 9}};
    t.tools[0]["function"]["parameters"]["properties"]["unit"] = {{"enum", {"C", "F"}}};
    for (const ChatFamily family : {ChatFamily::Qwen3Coder, ChatFamily::Glm}) {
        INFO(family_info(family).name);
        const bool qwen = family == ChatFamily::Qwen3Coder;
        const auto param = [&](const std::string& k, const std::string& v) {
            return qwen ? "<parameter=" + k + ">\n" + v + "\n</parameter>\n"
                        : "<arg_key>" + k + "</arg_key>\n<arg_value>" + v + "</arg_value>\n";
        };
        const auto call = [&](const std::string& name, const std::string& params) {
            return qwen ? "<tool_call>\n<function=" + name + ">\n" + params +
                              "</function>\n</tool_call>"
                        : "<tool_call>" + name + "\n" + params + "</tool_call>";
        };
        const auto g = tool_call_grammar(detected(family), t, false);
        // "42" and "true" are text here: the schema says string.
        const std::string answer =
            call("get_weather", param("city", "42") + param("days", "3") + param("unit", "F")) +
            "\n" + call("get_time", "");
        CHECK(grammar_takes(g, answer));
        auto parsed = parse_answer(family, answer, options_for(family, t));
        REQUIRE(parsed);
        REQUIRE(parsed->tool_calls.size() == 2);
        CHECK(parsed->tool_calls[0].arguments == R"({"city":"42","days":3,"unit":"F"})");
        CHECK(parsed->tool_calls[1].name == "get_time");
        // Without the tools' schemas the parser reads "42" as JSON: the server
        // always passes them (text_parameters).
        auto untyped = parse_answer(family, answer);
        REQUIRE(untyped);
        CHECK(untyped->tool_calls[0].arguments == R"({"city":42,"days":3,"unit":"F"})");
        // Optional parameters may be left out, required ones not; the order is the schema's.
        CHECK(grammar_takes(g, call("get_weather", param("city", "Oslo"))));
        CHECK_FALSE(grammar_takes(g, call("get_weather", param("days", "3"))));
        CHECK_FALSE(
            grammar_takes(g, call("get_weather", param("days", "3") + param("city", "Oslo"))));
        // Non-string values are JSON within their schema; an enum of strings is bare.
        CHECK_FALSE(
            grammar_takes(g, call("get_weather", param("city", "a") + param("days", "10"))));
        CHECK_FALSE(grammar_takes(g, call("get_weather", param("city", "a") + param("unit", "K"))));
        CHECK_FALSE(
            grammar_takes(g, call("get_weather", param("city", "a") + param("unit", "\"C\""))));
        // A bare value never holds what ends it, or what ends the call.
        const std::string value_end = qwen ? "</parameter>" : "</arg_value>";
        CHECK_FALSE(grammar_takes(g, call("get_weather", param("city", "a" + value_end + "b"))));
        CHECK_FALSE(grammar_takes(g, call("get_weather", param("city", "a</tool_call>b"))));
        CHECK(grammar_takes(g, call("get_weather", param("city", "a</tool_cal>b</param<<"))));
        // A long value costs no stack depth (each character a tail call).
        const std::string long_city(20000, 'x');
        CHECK(grammar_takes(g, call("get_weather", param("city", long_city))));
    }
}

namespace {

// Random answers of a grammar: a walk over a small vocabulary (printable
// ASCII, a few multi-byte characters, the family's markers and value ends as
// whole tokens, an end token), each step a random allowed token; markers
// and the end are favoured so that walks end. Empty when a walk runs long.
struct GrammarWalker {
    std::vector<std::string> pieces;
    std::shared_ptr<const grammar::TokenTrie> vocab;
    size_t eog;

    explicit GrammarWalker(const std::vector<std::string>& markers) {
        for (char c = ' '; c <= '~'; ++c) pieces.emplace_back(1, c);
        // DeepSeek's markers' full-width bar and block, so that every text
        // the grammar takes can be spelled.
        for (const char* s : {"\n", "\t", "é", "☃", "𝄞", "｜", "▁", "\"Oslo\"", "Oslo"})
            pieces.emplace_back(s);
        for (const auto& m : markers) pieces.push_back(m);
        eog = pieces.size();
        pieces.emplace_back("");  // the end token has no bytes
        std::vector<bool> end(pieces.size(), false);
        end[eog] = true;
        vocab = std::make_shared<const grammar::TokenTrie>(pieces, end);
    }

    std::optional<std::string> walk(const std::shared_ptr<const grammar::Grammar>& g,
                                    std::mt19937_64& rng) const {
        grammar::GrammarMatcher m(g, vocab);
        std::vector<uint64_t> mask;
        std::string text;
        for (int step = 0; step < 3000; ++step) {
            REQUIRE(m.allowed(mask));
            std::vector<size_t> single, multi;
            for (size_t id = 0; id < pieces.size(); ++id)
                if ((mask[id / 64] >> (id % 64)) & 1)
                    (pieces[id].size() > 1 ? multi : single).push_back(id);
            const bool can_end = (mask[eog / 64] >> (eog % 64)) & 1;
            std::uniform_real_distribution<double> u(0, 1);
            std::erase(single, eog);
            if (can_end && ((single.empty() && multi.empty()) || u(rng) < 0.5)) return text;
            std::vector<size_t>& from =
                (!multi.empty() && (single.empty() || u(rng) < 0.3)) ? multi : single;
            REQUIRE_FALSE(from.empty());
            const size_t id = from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
            REQUIRE(m.accept(static_cast<int32_t>(id)));
            text += pieces[id];
        }
        return std::nullopt;
    }
};

// A tool whose parameters take every kind of value a tagged family writes:
// bare text, a bare enum, and JSON (integer bounds, number, boolean, array,
// nested object, a string with a pattern), some optional.
constexpr const char* kRichTools = R"([{"type": "function", "function": {
    "name": "plan", "parameters": {"type": "object", "properties": {
      "note": {"type": "string", "description": "free text"},
      "mode": {"enum": ["fast", "slow"]},
      "count": {"type": "integer", "minimum": -5, "maximum": 40},
      "ratio": {"type": "number"},
      "loud": {"type": "boolean"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
      "where": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
                "additionalProperties": false},
      "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
      "maybe": {"type": ["string", "null"]}},
    "required": ["note", "mode", "count", "code"]}}},
  {"type": "function", "function": {"name": "ping"}}])";

// Whether `args` fits kRichTools' schema for `name` (what jsonschema checks in
// the end-to-end tests, for this one schema).
bool fits_rich_schema(const std::string& name, const ordered_json& args) {
    if (!args.is_object()) return false;
    if (name == "ping") return true;
    if (name != "plan") return false;
    for (const char* k : {"note", "mode", "count", "code"})
        if (!args.contains(k)) return false;
    for (auto it = args.begin(); it != args.end(); ++it) {
        const auto& v = it.value();
        const std::string& k = it.key();
        bool ok = false;
        if (k == "note") ok = v.is_string();
        if (k == "mode") ok = v == "fast" || v == "slow";
        if (k == "count") ok = v.is_number_integer() && v >= -5 && v <= 40;
        if (k == "ratio") ok = v.is_number();
        if (k == "loud") ok = v.is_boolean();
        if (k == "tags") {
            ok = v.is_array() && v.size() <= 3;
            for (const auto& t : v)
                ok = ok && t.is_string() && t.get<std::string>().size() <= 4 * 4;
        }
        if (k == "where")
            ok = v.is_object() && v.size() == 1 && v.contains("x") && v["x"].is_number_integer();
        if (k == "code") {
            const std::string c = v.is_string() ? v.get<std::string>() : "";
            ok = c.size() == 3 && std::isupper(c[0]) && std::isupper(c[1]) && std::isdigit(c[2]);
        }
        if (k == "maybe") ok = v.is_string() || v.is_null();
        if (!ok) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("random answers of each forced-call grammar parse back into calls that fit the schema") {
    std::mt19937_64 rng(test::test_seed(3402));
    ChatToolFields t;
    t.tools = ordered_json::parse(kRichTools);
    t.choice = {ToolChoice::Mode::Required, ""};
    struct Family {
        DetectedChatFamily family;
        std::vector<std::string> markers;
    };
    const std::vector<Family> families = {
        {detected(ChatFamily::Hermes), {"<tool_call>\n", "\n</tool_call>", "</tool_call>"}},
        {detected(ChatFamily::Mistral), {"[TOOL_CALLS]"}},
        {detected(ChatFamily::Qwen3Coder),
         {"<tool_call>\n<function=", "<parameter=", "\n</parameter>\n", "</parameter>",
          "</function>\n</tool_call>", "</tool_call>"}},
        {detected(ChatFamily::Glm),
         {"<tool_call>", "<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n", "</arg_value>",
          "</tool_call>"}},
        {detected(ChatFamily::Harmony),
         {"<|channel|>commentary to=functions.", " <|constrain|>json<|message|>", "<|call|>"}},
        {detected(ChatFamily::DeepSeek),
         {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
          "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"}},
        {detected(ChatFamily::DeepSeek, true),
         {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n",
          "\n```<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"}},
    };
    for (const Family& f : families) {
        const ChatFamily family = f.family.family;
        INFO(family_info(family).name << (f.family.fenced_call_arguments ? " R1" : ""));
        for (const bool parallel : {false, true}) {
            t.parallel = parallel;
            const auto g = tool_call_grammar(f.family, t, false);
            std::vector<std::string> markers = f.markers;
            for (const char* n : {"plan", "ping", "note", "mode", "count", "code", "fast"})
                markers.emplace_back(n);
            const GrammarWalker walker(markers);
            const ChatParseOptions options = options_for(family, t);
            size_t walked = 0, calls = 0;
            for (int sample = 0; sample < 40; ++sample) {
                const auto text = walker.walk(g, rng);
                if (!text) continue;
                ++walked;
                INFO("answer: " << *text);
                const auto parsed = parse_answer(family, *text, options);
                REQUIRE(parsed);
                CHECK(parsed->content.empty());
                CHECK(parsed->reasoning.empty());
                REQUIRE_FALSE(parsed->tool_calls.empty());
                if (!parallel || family == ChatFamily::Harmony)
                    CHECK(parsed->tool_calls.size() == 1);
                for (const auto& c : parsed->tool_calls) {
                    INFO("call " << c.name << " " << c.arguments);
                    CHECK(fits_rich_schema(c.name, ordered_json::parse(c.arguments)));
                    ++calls;
                }
            }
            CHECK(walked >= 30);
            CHECK(calls >= walked);
        }
    }
}

TEST_CASE("a forced call is refused where no call can be written, and for bad schemas") {
    for (const ChatFamily family : {ChatFamily::Generic, ChatFamily::ThinkOnly}) {
        try {
            tool_call_grammar(detected(family), weather_tools(ToolChoice::Mode::Required, false),
                              false);
            FAIL("accepted");
        } catch (const ApiError& e) {
            CHECK(e.param == "tool_choice");
            CHECK(e.message.find(family_info(family).name) != std::string::npos);
        }
    }
    const auto refused = [](ChatFamily family, const ChatToolFields& t) -> ApiError {
        try {
            tool_call_grammar(detected(family), t, false);
        } catch (const ApiError& e) {
            return e;
        }
        FAIL("accepted");
        return {};
    };
    ChatToolFields t = weather_tools(ToolChoice::Mode::Required, false);
    t.tools[0]["function"]["parameters"]["properties"]["city"]["multipleOf"] = 3;
    for (const ChatFamily family : {ChatFamily::Hermes, ChatFamily::Qwen3Coder, ChatFamily::Glm,
                                    ChatFamily::Harmony, ChatFamily::DeepSeek}) {
        INFO(family_info(family).name);
        const ApiError e = refused(family, t);
        CHECK(e.status == 400);
        CHECK(e.param == "tools");
        CHECK(e.message.find("multipleOf") != std::string::npos);
    }
    // The tagged families name the property or keyword they cannot write.
    ChatToolFields angled = weather_tools(ToolChoice::Mode::Required, false);
    angled.tools[0]["function"]["parameters"]["properties"]["a>b"] = {{"type", "string"}};
    const ApiError name = refused(ChatFamily::Qwen3Coder, angled);
    CHECK(name.message.find("tools[0].function.parameters/properties") != std::string::npos);
    CHECK(name.message.find("a>b") != std::string::npos);
    ChatToolFields counted = weather_tools(ToolChoice::Mode::Required, false);
    counted.tools[0]["function"]["parameters"]["minProperties"] = 1;
    const ApiError keyword = refused(ChatFamily::Glm, counted);
    CHECK(keyword.message.find("tools[0].function.parameters/minProperties: not enforced") !=
          std::string::npos);
    // A property named like the grammar's own rules is a name like any other.
    ChatToolFields rooted = weather_tools(ToolChoice::Mode::Required, false);
    rooted.tools[0]["function"]["parameters"]["properties"]["root"] = {{"type", "integer"}};
    rooted.tools[0]["function"]["parameters"]["required"] = {"root"};
    CHECK(grammar_takes(tool_call_grammar(detected(ChatFamily::Hermes), rooted, false),
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"root\": "
                        "7}}\n</tool_call>"));
}
