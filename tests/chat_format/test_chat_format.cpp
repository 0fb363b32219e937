// Parsing finished and streamed answers per tool-call family (issue 34 items
// 2 and 3): hand-written model outputs in each family's real format, the
// parse each must give, and the stream fed the same text in every split.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "ferrox/chat_format/answer.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/chat_format/stream_parser.h"

using ferrox::ChatEvent;
using ferrox::ChatFamily;
using ferrox::ChatParseOptions;
using ferrox::ChatStreamParser;
using ferrox::ParsedAnswer;

namespace {

struct Call {
    std::string name, arguments;
};

struct Case {
    const char* what;
    ChatFamily family;
    std::string text;
    std::string content, reasoning;
    std::vector<Call> calls;
    bool starts_in_reasoning = false;
};

const std::string kWeather =
    R"({"name": "get_weather", "arguments": {"location": "Paris", "days": 2}})";

std::vector<Case> cases() {
    return {
        {"hermes: reasoning, content, two calls (arguments as object and as a JSON string)",
         ChatFamily::Hermes,
         "<think>\nLet me check.\n</think>\n\nI'll look it up.\n<tool_call>\n" + kWeather +
             "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": "
             "\\\"CET\\\"}\"}\n</tool_call>",
         "I'll look it up.\n",
         "\nLet me check.\n",
         {{"get_weather", R"({"location":"Paris","days":2})"}, {"get_time", R"({"tz":"CET"})"}}},
        {"hermes: a malformed call stays content, verbatim",
         ChatFamily::Hermes,
         "Sure.<tool_call>{\"name\": \"x\", \"arguments\": {bad}}</tool_call> done",
         "Sure.<tool_call>{\"name\": \"x\", \"arguments\": {bad}}</tool_call> done",
         "",
         {}},
        {"hermes: text like a marker is content",
         ChatFamily::Hermes,
         "a < b, <tool and <think> inside; <tool_cal",
         "a < b, <tool and <think> inside; <tool_cal",
         "",
         {}},
        {"hermes: a call whose closing tag never came (a stop token) still parses",
         ChatFamily::Hermes,
         "<tool_call>{\"name\": \"f\", \"arguments\": {}}",
         "",
         "",
         {{"f", "{}"}}},
        {"hermes: an unfinished call is content",
         ChatFamily::Hermes,
         "Calling <tool_call>{\"name\": \"f\"",
         "Calling <tool_call>{\"name\": \"f\"",
         "",
         {}},
        {"hermes: content after the call",
         ChatFamily::Hermes,
         "<tool_call>{\"name\":\"a\",\"arguments\":{\"q\":\"ü 世界\"}}</tool_call>\nTrailing "
         "text",
         "\nTrailing text",
         "",
         {{"a", R"({"q":"ü 世界"})"}}},
        {"hermes: a call without a name is content",
         ChatFamily::Hermes,
         "<tool_call>{\"arguments\": {}}</tool_call>",
         "<tool_call>{\"arguments\": {}}</tool_call>",
         "",
         {}},
        {"qwen3: the prompt opened the reasoning",
         ChatFamily::Hermes,
         "thinking...</think>\n\nHello",
         "Hello",
         "thinking...",
         {},
         true},
        {"qwen3: reasoning never closed is reasoning",
         ChatFamily::Hermes,
         "<think>still going",
         "",
         "still going",
         {}},
        {"qwen3-coder: XML parameters, values typed when they are JSON",
         ChatFamily::Qwen3Coder,
         "Let me call.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nNew "
         "York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
         "Let me call.\n",
         "",
         {{"get_weather", R"({"location":"New York","days":3})"}}},
        {"qwen3-coder: a parameter left open is content",
         ChatFamily::Qwen3Coder,
         "<tool_call>\n<function=x>\n<parameter=a>1</function>\n</tool_call>",
         "<tool_call>\n<function=x>\n<parameter=a>1</function>\n</tool_call>",
         "",
         {}},
        {"llama3: a JSON call as the whole answer",
         ChatFamily::Llama3,
         R"({"name": "get_weather", "parameters": {"location": "Paris"}})",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"llama3: two calls separated by ';'",
         ChatFamily::Llama3,
         R"( {"type": "function", "name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": [1, 2]}})",
         "",
         "",
         {{"a", "{}"}, {"b", R"({"x":[1,2]})"}}},
        {"llama3: python_tag code is a call to python",
         ChatFamily::Llama3,
         "<|python_tag|>print(2 + 2)<|eom_id|>",
         "",
         "",
         {{"python", R"j({"code":"print(2 + 2)"})j"}}},
        {"llama3: JSON that is no call is content",
         ChatFamily::Llama3,
         R"({"answer": 42})",
         R"({"answer": 42})",
         "",
         {}},
        {"llama3: a call after text is content",
         ChatFamily::Llama3,
         R"(Hello {"name": "x", "parameters": {}})",
         R"(Hello {"name": "x", "parameters": {}})",
         "",
         {}},
        {"mistral: a JSON list of calls after content",
         ChatFamily::Mistral,
         R"(Checking.[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}}, {"name": "get_time", "arguments": {}}])",
         "Checking.",
         "",
         {{"get_weather", R"({"location":"Paris"})"}, {"get_time", "{}"}}},
        {"ministral: [THINK] reasoning and NAME[ARGS] calls",
         ChatFamily::Mistral,
         R"([THINK]hmm[/THINK]Answer.[TOOL_CALLS]get_weather[ARGS]{"location": "Oslo"}[TOOL_CALLS]get_time[ARGS]{})",
         "Answer.",
         "hmm",
         {{"get_weather", R"({"location":"Oslo"})"}, {"get_time", "{}"}}},
        {"mistral: a name with a blank is content",
         ChatFamily::Mistral,
         "[TOOL_CALLS]get weather[ARGS]{}",
         "[TOOL_CALLS]get weather[ARGS]{}",
         "",
         {}},
        {"harmony: analysis then a call to functions.get_weather",
         ChatFamily::Harmony,
         "<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>"
         "commentary to=functions.get_weather "
         "<|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>",
         "",
         "User wants weather.",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"harmony: analysis then the final answer",
         ChatFamily::Harmony,
         "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>"
         "The "
         "answer is 4.<|return|>",
         "The answer is 4.",
         "think",
         {}},
        {"harmony: bad arguments are content",
         ChatFamily::Harmony,
         "<|channel|>commentary to=functions.f<|message|>{oops<|call|>",
         "<|channel|>commentary to=functions.f<|message|>{oops<|call|>",
         "",
         {}},
        {"deepseek v3.1: reasoning, content and two calls",
         ChatFamily::DeepSeek,
         "<think>ok</think>Let me "
         "check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"
         "\"location\": "
         "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁"
         "end｜><｜tool▁calls▁end｜>",
         "Let me check.",
         "ok",
         {{"get_weather", R"({"location":"Paris"})"}, {"get_time", "{}"}}},
        {"deepseek r1: function<sep>NAME and a json fence",
         ChatFamily::DeepSeek,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"
         "\"location\": "
         "\"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"glm: arg_key / arg_value pairs",
         ChatFamily::Glm,
         "<think>plan</think>\n<tool_call>get_weather\n<arg_key>location</"
         "arg_key>\n<arg_value>Paris</"
         "arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
         "",
         "plan",
         {{"get_weather", R"({"location":"Paris","days":2})"}}},
        {"glm: a key without its value is content",
         ChatFamily::Glm,
         "<tool_call>f<arg_key>a</arg_key></tool_call>",
         "<tool_call>f<arg_key>a</arg_key></tool_call>",
         "",
         {}},
        {"granite 3: <response> is dropped, <|tool_call|> lists calls",
         ChatFamily::Granite,
         "<think>hmm</think><response>Use the tool.</response><|tool_call|>[{\"name\": "
         "\"get_weather\", "
         "\"arguments\": {\"location\": \"Paris\"}}]",
         "Use the tool.",
         "hmm",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"phi-4-mini: functools[...]",
         ChatFamily::Functools,
         R"(functools[{"name": "get_weather", "arguments": {"location": "Paris"}}])",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"phi-4-mini: the module functools in prose is content",
         ChatFamily::Functools,
         "Use functools.partial here.",
         "Use functools.partial here.",
         "",
         {}},
        {"smollm3: <think> and a <tool_call>",
         ChatFamily::SmolLM3,
         "<think>\nhm\n</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": "
         "\"ü\"}}\n</tool_call>",
         "",
         "\nhm\n",
         {{"f", R"({"a":"ü"})"}}},
        {"generic: nothing is parsed",
         ChatFamily::Generic,
         "<think>x</think> <tool_call>{}</tool_call>",
         "<think>x</think> <tool_call>{}</tool_call>",
         "",
         {}},
        {"think-only: reasoning, then the answer",
         ChatFamily::ThinkOnly,
         "  <think>r</think>\n\nanswer",
         "answer",
         "r",
         {}},
    };
}

ChatParseOptions options_for(const Case& c) {
    ChatParseOptions o;
    o.starts_in_reasoning = c.starts_in_reasoning;
    o.id_seed = 7;
    return o;
}

ParsedAnswer streamed(const Case& c, const std::vector<size_t>& cuts) {
    ChatStreamParser parser(c.family, options_for(c));
    std::vector<ChatEvent> events;
    size_t at = 0;
    for (size_t cut : cuts) {
        REQUIRE(parser.feed(std::string_view(c.text).substr(at, cut - at), events));
        at = cut;
    }
    REQUIRE(parser.feed(std::string_view(c.text).substr(at), events));
    REQUIRE(parser.finish(events));
    ParsedAnswer a;
    for (const auto& e : events) ferrox::apply_chat_event(a, e);
    return a;
}

void require_same(const ParsedAnswer& got, const ParsedAnswer& want) {
    REQUIRE(got.content == want.content);
    REQUIRE(got.reasoning == want.reasoning);
    REQUIRE(got.tool_calls.size() == want.tool_calls.size());
    for (size_t i = 0; i < got.tool_calls.size(); ++i) {
        REQUIRE(got.tool_calls[i].id == want.tool_calls[i].id);
        REQUIRE(got.tool_calls[i].name == want.tool_calls[i].name);
        REQUIRE(got.tool_calls[i].arguments == want.tool_calls[i].arguments);
    }
}

}  // namespace

TEST_CASE("each family's hand-written answers parse into content, reasoning and calls") {
    for (const Case& c : cases()) {
        INFO(c.what);
        auto a = ferrox::parse_answer(c.family, c.text, options_for(c));
        REQUIRE(a);
        CHECK(a->content == c.content);
        CHECK(a->reasoning == c.reasoning);
        REQUIRE(a->tool_calls.size() == c.calls.size());
        for (size_t i = 0; i < c.calls.size(); ++i) {
            CHECK(a->tool_calls[i].name == c.calls[i].name);
            CHECK(a->tool_calls[i].arguments == c.calls[i].arguments);
            CHECK(a->tool_calls[i].id.size() == 21);
            CHECK(a->tool_calls[i].id.rfind("call_", 0) == 0);
        }
    }
}

TEST_CASE("a stream cut at every byte gives the whole answer's parse") {
    for (const Case& c : cases()) {
        INFO(c.what);
        const auto whole = ferrox::parse_answer(c.family, c.text, options_for(c));
        REQUIRE(whole);
        for (size_t cut = 0; cut <= c.text.size(); ++cut) {
            INFO("cut at " << cut);
            require_same(streamed(c, {cut}), *whole);
        }
        std::vector<size_t> every;
        for (size_t i = 1; i < c.text.size(); ++i) every.push_back(i);
        INFO("one byte at a time");
        require_same(streamed(c, every), *whole);
    }
}

TEST_CASE("a stream cut at random places gives the whole answer's parse") {
    const uint32_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    for (const Case& c : cases()) {
        INFO(c.what);
        const auto whole = ferrox::parse_answer(c.family, c.text, options_for(c));
        REQUIRE(whole);
        for (int round = 0; round < 50; ++round) {
            std::vector<size_t> cuts;
            for (size_t i = 1; i < c.text.size(); ++i)
                if (rng() % 4 == 0) cuts.push_back(i);
            require_same(streamed(c, cuts), *whole);
        }
    }
}

TEST_CASE("text that may begin a marker is held back and released once it cannot") {
    ChatStreamParser parser(ChatFamily::Hermes);
    std::vector<ChatEvent> events;
    REQUIRE(parser.feed("Hello <tool_", events));
    REQUIRE(events.size() == 1);
    CHECK(events[0].text == "Hello ");
    events.clear();
    REQUIRE(parser.feed("x", events));
    REQUIRE(events.size() == 1);
    CHECK(events[0].text == "<tool_x");
    events.clear();
    REQUIRE(parser.feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}", events));
    CHECK(events.empty());  // a call is sent once it is known to be one
    REQUIRE(parser.feed("</tool_call>", events));
    REQUIRE(events.size() == 2);
    CHECK(events[0].kind == ChatEvent::Kind::ToolCallStart);
    CHECK(events[0].name == "f");
    CHECK(events[0].index == 0);
    CHECK(events[1].kind == ChatEvent::Kind::ToolCallArguments);
    CHECK(events[1].text == R"({"a":1})");
}

TEST_CASE("reasoning streams as it comes, short of a possible end marker") {
    ChatStreamParser parser(ChatFamily::Hermes);
    std::vector<ChatEvent> events;
    REQUIRE(parser.feed("<think>step one</thi", events));
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == ChatEvent::Kind::Reasoning);
    CHECK(events[0].text == "step one");
}

TEST_CASE("tool-call ids are deterministic per answer and seed, and distinct within one") {
    const std::string two =
        "<tool_call>" + kWeather + "</tool_call><tool_call>" + kWeather + "</tool_call>";
    ChatParseOptions seven, eight;
    seven.id_seed = 7;
    eight.id_seed = 8;
    const auto a = ferrox::parse_answer(ChatFamily::Hermes, two, seven);
    const auto b = ferrox::parse_answer(ChatFamily::Hermes, two, seven);
    const auto c = ferrox::parse_answer(ChatFamily::Hermes, two, eight);
    REQUIRE((a && b && c));
    REQUIRE(a->tool_calls.size() == 2);
    CHECK(a->tool_calls[0].id == b->tool_calls[0].id);
    CHECK(a->tool_calls[1].id == b->tool_calls[1].id);
    CHECK(a->tool_calls[0].id != a->tool_calls[1].id);
    CHECK(a->tool_calls[0].id != c->tool_calls[0].id);
}

TEST_CASE("bounds: calls past max_calls and calls past max_call_bytes are content, never dropped") {
    const std::string one = "<tool_call>" + kWeather + "</tool_call>";
    ChatParseOptions o;
    o.limits.max_calls = 1;
    auto a = ferrox::parse_answer(ChatFamily::Hermes, one + one, o);
    REQUIRE(a);
    CHECK(a->tool_calls.size() == 1);
    CHECK(a->content == one);

    ChatParseOptions small;
    small.limits.max_call_bytes = 16;
    auto b = ferrox::parse_answer(ChatFamily::Hermes, one, small);
    REQUIRE(b);
    CHECK(b->tool_calls.empty());
    CHECK(b->content == one);
    auto m =
        ferrox::parse_answer(ChatFamily::Mistral, "[TOOL_CALLS]" + std::string(64, '['), small);
    REQUIRE(m);
    CHECK(m->content == "[TOOL_CALLS]" + std::string(64, '['));

    ChatParseOptions deep;
    deep.limits.max_json_depth = 4;
    const std::string nested =
        R"(<tool_call>{"name": "f", "arguments": {"a": [[[[1]]]]}}</tool_call>)";
    auto d = ferrox::parse_answer(ChatFamily::Hermes, nested, deep);
    REQUIRE(d);
    CHECK(d->tool_calls.empty());
    CHECK(d->content == nested);
}

TEST_CASE("an answer past max_text is refused with the bound named") {
    ChatParseOptions o;
    o.limits.max_text = 8;
    auto a = ferrox::parse_answer(ChatFamily::Hermes, "123456789", o);
    REQUIRE_FALSE(a);
    CHECK(a.error().message().find("max_text") != std::string::npos);
    ChatStreamParser parser(ChatFamily::Hermes, o);
    std::vector<ChatEvent> events;
    REQUIRE(parser.feed("12345", events));
    auto more = parser.feed("6789", events);
    REQUIRE_FALSE(more);
    CHECK(more.error().message().find("8 bytes") != std::string::npos);
    CHECK_FALSE(parser.finish(events));
}

TEST_CASE("a finished stream takes no more text") {
    ChatStreamParser parser(ChatFamily::Generic);
    std::vector<ChatEvent> events;
    REQUIRE(parser.finish(events));
    CHECK_FALSE(parser.feed("x", events));
    CHECK_FALSE(parser.finish(events));
}

TEST_CASE("a family's descriptor gives its triggers and reasoning markers") {
    const auto& hermes = ferrox::family_info(ChatFamily::Hermes);
    REQUIRE(hermes.tool_triggers.size() == 1);
    CHECK(hermes.tool_triggers[0] == "<tool_call>");
    CHECK(hermes.reasoning_end == "</think>");
    CHECK(ferrox::family_info(ChatFamily::Generic).tool_triggers.empty());
    CHECK(ferrox::family_info(ChatFamily::Harmony).reasoning_close.find("final") !=
          std::string_view::npos);
    for (const auto& f : ferrox::all_chat_families()) {
        INFO(f.name);
        REQUIRE(ferrox::find_chat_family(f.name) == &f);
        CHECK(&ferrox::family_info(f.family) == &f);
    }
    CHECK(ferrox::find_chat_family("nope") == nullptr);
    CHECK(ferrox::reasoning_open_in_prompt(ChatFamily::DeepSeek, "<｜Assistant｜><think>\n"));
    CHECK_FALSE(ferrox::reasoning_open_in_prompt(ChatFamily::DeepSeek, "<think>\n\n</think>\n\n"));
    CHECK_FALSE(ferrox::reasoning_open_in_prompt(ChatFamily::Llama3, "<think>"));
}

TEST_CASE("detect_family reads the markers a template writes") {
    CHECK(ferrox::detect_family("{{ '<tool_call>' }}{% if tools %}{% endif %}").family ==
          ChatFamily::Hermes);
    CHECK(ferrox::detect_family("{{ '<tool_call>' }}{% if tools %}{% endif %}").supports_tools);
    CHECK_FALSE(ferrox::detect_family("{{ '<tool_call>' }}").supports_tools);
    CHECK(ferrox::detect_family("{{ '<tool_call>' ~ name ~ '<arg_key>' }}").family ==
          ChatFamily::Glm);
    CHECK(ferrox::detect_family("{{ messages }}").family == ChatFamily::Generic);
    CHECK_FALSE(ferrox::detect_family("{{ tools }}").supports_tools);  // no format ferrox parses
}

TEST_CASE("detect_family tells DeepSeek R1's fenced calls from V3.1's") {
    const auto r1 = ferrox::detect_family(
        "{% if tools %}{% endif %}{{ '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁"
        "sep｜>' + name + '\\n```json\\n' + args + '\\n```' }}");
    CHECK(r1.family == ChatFamily::DeepSeek);
    CHECK(r1.fenced_call_arguments);
    const auto v31 = ferrox::detect_family(
        "{% if tools %}{% endif %}{{ '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + name + "
        "'<｜tool▁sep｜>' + args }}");
    CHECK(v31.family == ChatFamily::DeepSeek);
    CHECK_FALSE(v31.fenced_call_arguments);
    CHECK_FALSE(
        ferrox::detect_family("{{ '```json' }}<tool_call>{{ tools }}").fenced_call_arguments);
}

TEST_CASE("a parameter the tool declares text stays text, streamed at every cut and whole") {
    struct TextCase {
        ChatFamily family;
        std::string text;
    };
    const TextCase cases[] = {
        {ChatFamily::Qwen3Coder,
         "<tool_call>\n<function=f>\n<parameter=a>\n42\n</parameter>\n<parameter=b>\n42\n"
         "</parameter>\n<parameter=c>\n[1, 2]\n</parameter>\n</function>\n</tool_call>"},
        {ChatFamily::Glm,
         "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>42</arg_value>\n<arg_key>b</arg_key>\n"
         "<arg_value>42</arg_value>\n<arg_key>c</arg_key>\n<arg_value>[1, 2]</arg_value>\n"
         "</tool_call>"},
    };
    ChatParseOptions o;
    o.text_parameters["f"] = {"a", "c"};  // b is not text: it is read as JSON
    o.text_parameters["g"] = {"b"};       // another tool's parameter changes nothing here
    for (const TextCase& c : cases) {
        INFO(ferrox::family_info(c.family).name);
        const auto whole = ferrox::parse_answer(c.family, c.text, o);
        REQUIRE(whole);
        REQUIRE(whole->tool_calls.size() == 1);
        CHECK(whole->tool_calls[0].arguments == R"({"a":"42","b":42,"c":"[1, 2]"})");
        for (size_t cut = 1; cut < c.text.size(); ++cut) {
            ChatStreamParser parser(c.family, o);
            std::vector<ChatEvent> events;
            REQUIRE(parser.feed(std::string_view(c.text).substr(0, cut), events));
            REQUIRE(parser.feed(std::string_view(c.text).substr(cut), events));
            REQUIRE(parser.finish(events));
            ParsedAnswer a;
            for (const auto& e : events) ferrox::apply_chat_event(a, e);
            REQUIRE(a.tool_calls.size() == 1);
            REQUIRE(a.tool_calls[0].arguments == whole->tool_calls[0].arguments);
        }
    }
}
