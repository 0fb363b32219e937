// The server's structured output: `grammar` and `response_format` read into
// the request's grammar stage (sharing the server's one token trie), and each
// refusal naming the field and the schema's JSON pointer.
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/grammar/matcher.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "openai_dialects.h"
#include "structured_output.h"

using namespace ferrox;
using namespace ferrox::server;
using nlohmann::ordered_json;

namespace {

// <unk> <s> </s>, then the characters of small JSON texts, one token each.
std::unique_ptr<Tokenizer> json_chars() {
    VocabSpec spec;
    spec.model = "llama";
    spec.tokens = {"<unk>", "<s>", "</s>"};
    spec.types = {TokenType::unknown, TokenType::control, TokenType::control};
    for (const char c : std::string("{}[]\":,0123456789abcxyz")) {
        spec.tokens.emplace_back(1, c);
        spec.types.push_back(TokenType::normal);
    }
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

struct Server {
    std::unique_ptr<Tokenizer> tok = json_chars();
    std::shared_ptr<const grammar::TokenTrie> trie = grammar::TokenTrie::from_tokenizer(*tok);
    RequestLimits limits;
    std::string tenant = "t";
    ChatRenderFn render = [this](const ordered_json&) -> Expected<RenderedChat> {
        return RenderedChat{"x", tok->encode("x", false, false)};
    };

    GenerationRequest parse(const std::string& extra, bool with_trie = true) {
        GenerationRequest g;
        const std::string body = R"({"prompt":"abc","max_tokens":8)" + extra + "}";
        completions({"id", "m"})
            ->parse(ordered_json::parse(body),
                    ParseInput{*tok, render, 64, limits, tenant, with_trie ? trie : nullptr}, g);
        return g;
    }
    ApiError refusal(const std::string& extra, bool with_trie = true) {
        try {
            parse(extra, with_trie);
        } catch (const ApiError& e) {
            return e;
        }
        FAIL("no ApiError for " << extra);
        return {};
    }
};

bool matches(const GenerationRequest& g, const std::string& text) {
    grammar::GrammarMatcher m(g.sampling.grammar, g.sampling.grammar_vocab);
    return m.accept_bytes(text) && m.complete();
}

}  // namespace

TEST_CASE("response_format json_schema becomes the request's grammar, on the shared trie") {
    Server s;
    const auto g = s.parse(R"(,"response_format":{"type":"json_schema","json_schema":{
        "name":"n","strict":true,"description":"d","schema":{"type":"object",
        "properties":{"b":{"type":"integer","minimum":0,"maximum":5},"a":{"enum":["x","y"]}},
        "required":["b","a"],"additionalProperties":false}}})");
    REQUIRE(g.sampling.grammar);
    CHECK(g.sampling.grammar_vocab == s.trie);  // one trie per server, not per request
    CHECK(matches(g, R"({"b":3,"a":"y"})"));
    CHECK_FALSE(matches(g, R"({"a":"y","b":3})"));  // schema order
    CHECK_FALSE(matches(g, R"({"b":6,"a":"y"})"));
}

TEST_CASE("a model's trie built on first use is one trie for every request and copy") {
    Server s;
    const GrammarVocab none;
    CHECK_FALSE(none);
    const GrammarVocab lazy = GrammarVocab::on_first_use(*s.tok);
    const GrammarVocab copy = lazy;  // a request's ParseInput holds a copy
    REQUIRE(lazy);
    const auto first = copy.get();
    REQUIRE(first);
    CHECK(lazy.get() == first);  // built once, whichever copy asked first
    CHECK(first->vocab_size() == s.tok->vocab_size());
    for (size_t id = 0; id < first->vocab_size(); ++id)
        CHECK(first->piece(static_cast<int32_t>(id)) ==
              s.trie->piece(static_cast<int32_t>(id)));  // the same bytes as an eager build
    GenerationRequest g;
    completions({"id", "m"})
        ->parse(
            ordered_json::parse(R"({"prompt":"abc","max_tokens":8,"grammar":"root ::= \"a\""})"),
            ParseInput{*s.tok, s.render, 64, s.limits, s.tenant, lazy}, g);
    CHECK(g.sampling.grammar_vocab == first);
}

TEST_CASE("json_object, text, and a GBNF grammar field") {
    Server s;
    const auto object = s.parse(R"(,"response_format":{"type":"json_object"})");
    REQUIRE(object.sampling.grammar);
    CHECK(matches(object, R"({"a":[1,"b"]})"));
    CHECK_FALSE(matches(object, "[1]"));
    CHECK_FALSE(s.parse(R"(,"response_format":{"type":"text"})").sampling.grammar);
    const auto gbnf = s.parse(R"(,"grammar":"root ::= [a-c]{2}")");
    REQUIRE(gbnf.sampling.grammar);
    CHECK(matches(gbnf, "ab"));
    CHECK_FALSE(matches(gbnf, "abc"));
}

TEST_CASE("refusals name the field, the JSON pointer and the limit") {
    Server s;
    auto e = s.refusal(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n",
        "schema":{"properties":{"age":{"type":"integer","multipleOf":5}}}}})");
    CHECK(e.status == 400);
    CHECK(e.param == "response_format.json_schema.schema/properties/age/multipleOf");
    CHECK(e.message ==
          "'response_format.json_schema.schema/properties/age/multipleOf': not enforced");
    e = s.refusal(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n",
        "schema":{"type":"array","maxItems":1000000000}}})");
    CHECK(e.param == "response_format.json_schema.schema/maxItems");
    CHECK_THAT(e.message, Catch::Contains("past the limit max_repetition (1000)"));
    e = s.refusal(R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{}}})");
    CHECK(e.param == "response_format.json_schema.name");
    e = s.refusal(
        R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n","extra":1}})");
    CHECK(e.param == "response_format.json_schema.extra");
    e = s.refusal(R"(,"response_format":{"type":"xml"})");
    CHECK(e.param == "response_format.type");
    e = s.refusal(R"(,"grammar":"root ::= \"a\" @")");
    CHECK(e.param == "grammar");
    CHECK_THAT(e.message, Catch::Contains("grammar:1:14"));
    e = s.refusal(R"(,"grammar":"root ::= \"a\"","response_format":{"type":"json_object"})");
    CHECK(e.param == "grammar");
    e = s.refusal(R"(,"response_format":{"type":"json_object"})", false);
    CHECK(e.param == "grammar");
}

TEST_CASE("grammar_for_schema is the one step every dialect calls") {
    const auto g =
        grammar_for_schema(ordered_json::parse(R"({"const":"x"})"), "text.format.schema");
    REQUIRE(g);
    try {
        (void)grammar_for_schema(ordered_json::parse(R"({"not":{}})"), "text.format.schema");
        FAIL("no refusal");
    } catch (const ApiError& e) {
        CHECK(e.param == "text.format.schema/not");
    }
}
