// tool_choice "auto" arms the family's call grammar lazily (at its triggers),
// and the thinking budget's request fields, read into the request's sampler
// chain parameters.
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/grammar/matcher.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "openai_dialects.h"
#include "tool_call_grammar.h"

using namespace ferrox;
using namespace ferrox::server;
using nlohmann::ordered_json;

namespace {

// <unk> <s> </s>, the characters of calls and markers one token each, and
// Llama 3's <|python_tag|> as a control token (no text in the trie).
std::unique_ptr<Tokenizer> call_chars() {
    VocabSpec spec;
    spec.model = "llama";
    spec.tokens = {"<unk>", "<s>", "</s>"};
    spec.types = {TokenType::unknown, TokenType::control, TokenType::control};
    for (const char c : std::string("<>/{}[]\":,_|abcdefghijklmnopqrstuvwxyzO")) {
        spec.tokens.emplace_back(1, c);
        spec.types.push_back(TokenType::normal);
    }
    spec.tokens.emplace_back("<|python_tag|>");
    spec.types.push_back(TokenType::control);
    spec.scores.assign(spec.tokens.size(), 0.0f);
    spec.unk = 0;
    spec.bos = 1;
    spec.eos = 2;
    spec.add_space_prefix = false;
    spec.add_bos = false;
    auto made = Tokenizer::from_spec(std::move(spec));
    if (!made) FAIL(made.error().message());
    return std::move(*made);
}

constexpr const char* kTools = R"([{"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": false}}}])";

struct Fixture {
    std::unique_ptr<Tokenizer> tok = call_chars();
    std::shared_ptr<const grammar::TokenTrie> trie = grammar::TokenTrie::from_tokenizer(*tok);
    RequestLimits limits;
    std::string tenant = "t";

    ChatToolFields tools(ToolChoice::Mode mode = ToolChoice::Mode::Auto) const {
        ChatToolFields t;
        t.tools = ordered_json::parse(kTools);
        t.choice = {mode, ""};
        t.parallel = false;
        return t;
    }
    // A chat request for a model of `family` whose prompt ends in `prompt_end`.
    GenerationRequest parse(ChatFamily family, const std::string& fields, bool with_trie = true,
                            int32_t server_budget = -1, const std::string& prompt_end = "x") {
        const ChatRenderFn render(
            [&](const ordered_json&, const ordered_json&,
                const ordered_json&) -> Expected<RenderedChat> {
                return RenderedChat{prompt_end, tok->encode("x", false, false)};
            },
            DetectedChatFamily{family, true});
        GenerationRequest g;
        const std::string body =
            R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 8)" + fields + "}";
        chat_completions({"r", "m"})
            ->parse(ordered_json::parse(body),
                    ParseInput{*tok, render, 64, limits, tenant, with_trie ? trie : nullptr,
                               server_budget},
                    g);
        return g;
    }
    ApiError refusal(ChatFamily family, const std::string& fields, bool with_trie = true) {
        try {
            parse(family, fields, with_trie);
        } catch (const ApiError& e) {
            return e;
        }
        FAIL("accepted: " << fields);
        return {};
    }
};

bool takes(const std::shared_ptr<const grammar::Grammar>& g,
           const std::shared_ptr<const grammar::TokenTrie>& trie, const std::string& text) {
    grammar::GrammarMatcher m(g, trie);
    return m.accept_bytes(text) && m.complete();
}

const std::string kHermesCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
const std::string kLlamaCall = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";

// A template's family as detect_family reports it for a template that renders tools.
DetectedChatFamily detected(ChatFamily family) {
    DetectedChatFamily d;
    d.family = family;
    d.supports_tools = true;
    return d;
}

}  // namespace

TEST_CASE("the lazy call grammar starts at the family's trigger and takes the family's calls") {
    Fixture fx;
    const LazyGrammarParams hermes =
        lazy_tool_call_grammar(detected(ChatFamily::Hermes), fx.tools(), false, *fx.tok, *fx.trie);
    REQUIRE(hermes.grammar);
    REQUIRE(hermes.triggers.size() == 1);
    CHECK(hermes.triggers[0].text == "<tool_call>");
    CHECK_FALSE(hermes.triggers[0].at_start);
    CHECK(hermes.trigger_tokens.empty());  // "<tool_call>" is text here
    CHECK(hermes.reasoning_start == "<think>");
    CHECK(hermes.reasoning_end == "</think>");
    CHECK(takes(hermes.grammar, fx.trie, kHermesCall));
    CHECK_FALSE(takes(hermes.grammar, fx.trie, "Sure. " + kHermesCall));  // from the trigger on
    CHECK_FALSE(takes(hermes.grammar, fx.trie,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));

    const LazyGrammarParams llama =
        lazy_tool_call_grammar(detected(ChatFamily::Llama3), fx.tools(), false, *fx.tok, *fx.trie);
    REQUIRE(llama.grammar);
    REQUIRE(llama.triggers.size() == 2);
    CHECK(llama.triggers[0].text == "<|python_tag|>");
    CHECK_FALSE(llama.triggers[0].at_start);
    CHECK(llama.triggers[1].text == "{\"name\"");
    CHECK(llama.triggers[1].at_start);
    // The control token stands for its trigger by id.
    REQUIRE(llama.trigger_tokens.size() == 1);
    CHECK(llama.trigger_tokens[0].id == fx.tok->encode("<|python_tag|>", false, true).at(0));
    CHECK(llama.trigger_tokens[0].text == "<|python_tag|>");
    CHECK(takes(llama.grammar, fx.trie, kLlamaCall));
    CHECK(takes(llama.grammar, fx.trie, "<|python_tag|>" + kLlamaCall));

    // A schema the converter cannot enforce: parse-only, never a 400 under auto.
    ChatToolFields odd = fx.tools();
    odd.tools[0]["function"]["parameters"]["properties"]["city"]["multipleOf"] = 3;
    CHECK_FALSE(lazy_tool_call_grammar(detected(ChatFamily::Hermes), odd, false, *fx.tok, *fx.trie)
                    .grammar);
    // The tagged families start at their trigger too; a bare value is text.
    const std::string coder_call =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "</function>\n</tool_call>";
    const std::string glm_call =
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "</tool_call>";
    for (const auto& [family, call] :
         {std::pair{ChatFamily::Qwen3Coder, coder_call}, std::pair{ChatFamily::Glm, glm_call}}) {
        const LazyGrammarParams tagged =
            lazy_tool_call_grammar(detected(family), fx.tools(), false, *fx.tok, *fx.trie);
        REQUIRE(tagged.grammar);
        REQUIRE(tagged.triggers.size() == 1);
        CHECK(tagged.triggers[0].text == "<tool_call>");
        CHECK(takes(tagged.grammar, fx.trie, call));
        CHECK_FALSE(takes(tagged.grammar, fx.trie, "Sure. " + call));
    }
    // No lazy builder: parse-only.
    CHECK_FALSE(
        lazy_tool_call_grammar(detected(ChatFamily::Harmony), fx.tools(), false, *fx.tok, *fx.trie)
            .grammar);
    CHECK_FALSE(
        lazy_tool_call_grammar(detected(ChatFamily::DeepSeek), fx.tools(), false, *fx.tok, *fx.trie)
            .grammar);
}

TEST_CASE("a chat request with tools under tool_choice auto carries the lazy grammar") {
    Fixture fx;
    const std::string tools = std::string(R"(, "tools": )") + kTools;
    const GenerationRequest g = fx.parse(ChatFamily::Hermes, tools);
    REQUIRE(g.sampling.lazy.grammar);
    CHECK(g.sampling.grammar_vocab == fx.trie);
    CHECK_FALSE(g.sampling.grammar);
    CHECK(g.sampling.lazy.triggers.at(0).text == "<tool_call>");
    // The prompt opened the reasoning: triggers count only after it.
    CHECK(fx.parse(ChatFamily::Hermes, tools, true, -1, "x<think>\n")
              .sampling.lazy.starts_in_reasoning);
    // None: with tool_choice none, without a trie, with the client's own grammar,
    // or for a family without a builder.
    CHECK_FALSE(
        fx.parse(ChatFamily::Hermes, tools + R"(, "tool_choice": "none")").sampling.lazy.grammar);
    CHECK_FALSE(fx.parse(ChatFamily::Hermes, tools, false).sampling.lazy.grammar);
    const GenerationRequest own =
        fx.parse(ChatFamily::Hermes, tools + R"(, "response_format": {"type": "json_object"})");
    CHECK(own.sampling.grammar);
    CHECK_FALSE(own.sampling.lazy.grammar);
    CHECK(fx.parse(ChatFamily::Qwen3Coder, tools).sampling.lazy.grammar);
    CHECK_FALSE(fx.parse(ChatFamily::Harmony, tools).sampling.lazy.grammar);  // parse-only
    // required stays the forced grammar.
    const GenerationRequest forced =
        fx.parse(ChatFamily::Hermes, tools + R"(, "tool_choice": "required")");
    CHECK(forced.sampling.grammar);
    CHECK_FALSE(forced.sampling.lazy.grammar);
}

TEST_CASE("thinking_token_budget (or thinking_budget_tokens) becomes the budget stage's params") {
    Fixture fx;
    const GenerationRequest g =
        fx.parse(ChatFamily::ThinkOnly, R"(, "thinking_token_budget": 5)", true, -1, "x<think>\n");
    CHECK(g.sampling.reasoning_budget.budget == 5);
    CHECK(g.sampling.reasoning_budget.starts_inside);
    CHECK(g.sampling.reasoning_budget.start == "<think>");
    CHECK(g.sampling.reasoning_budget.end == "</think>");
    CHECK(g.sampling.reasoning_budget.close_tokens == fx.tok->encode("</think>", false, true));
    CHECK(g.sampling.grammar_vocab == fx.trie);
    CHECK(fx.parse(ChatFamily::ThinkOnly, R"(, "thinking_budget_tokens": 0)")
              .sampling.reasoning_budget.budget == 0);
    // The server's default, and a request's -1 over it.
    CHECK(fx.parse(ChatFamily::ThinkOnly, "", true, 9).sampling.reasoning_budget.budget == 9);
    CHECK(fx.parse(ChatFamily::ThinkOnly, R"(, "thinking_token_budget": -1)", true, 9)
              .sampling.reasoning_budget.budget < 0);
    // A family without reasoning ignores it; without a trie only the default is dropped.
    CHECK(fx.parse(ChatFamily::Generic, R"(, "thinking_token_budget": 5)")
              .sampling.reasoning_budget.budget < 0);
    CHECK(fx.parse(ChatFamily::ThinkOnly, "", false, 9).sampling.reasoning_budget.budget < 0);
    CHECK(fx.refusal(ChatFamily::ThinkOnly, R"(, "thinking_token_budget": 5)", false).param ==
          "thinking_token_budget");
}

TEST_CASE("a bad thinking budget is refused, naming the field") {
    Fixture fx;
    struct Case {
        const char* fields;
        const char* param;
        const char* says;
    };
    for (const Case c : {
             Case{R"(, "thinking_token_budget": -2)", "thinking_token_budget", "between -1 and 64"},
             Case{R"(, "thinking_token_budget": 65)", "thinking_token_budget", "between -1 and 64"},
             Case{R"(, "thinking_budget_tokens": "5")", "thinking_budget_tokens", "integer"},
             Case{R"(, "thinking_token_budget": 1, "thinking_budget_tokens": 1)",
                  "thinking_budget_tokens", "one setting"},
         }) {
        INFO(c.fields);
        const ApiError e = fx.refusal(ChatFamily::ThinkOnly, c.fields);
        CHECK(e.status == 400);
        CHECK(e.param == c.param);
        CHECK_THAT(e.message, Catch::Contains(c.says));
    }
}
