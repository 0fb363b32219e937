// /v1/rerank's request and answer (server/rerank_api.h) over the letter
// tokenizer: how a query/document pair becomes one input (the file's rerank
// template, or the vocabulary's special tokens around the texts as
// llama-server forms it), the fields
// and their pointers, and the order of the results.
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "letter_tokenizer.h"
#include "request_fields.h"
#include "rerank_api.h"

using ferrox::server::ApiError;
using ferrox::server::parse_rerank_request;
using ferrox::server::rerank_response;
using ferrox::server::rerank_tokens;
using ferrox::server::RerankLimits;
using ferrox::test::kFirstLetter;
using ferrox::test::letter_tokenizer;
using nlohmann::ordered_json;

namespace {

int32_t letter(char c) { return kFirstLetter + (c - 'a'); }

std::string pointer_of(const ordered_json& body, const RerankLimits& limits) {
    const auto tok = letter_tokenizer(false);
    try {
        (void)parse_rerank_request(body, *tok, "", limits);
    } catch (const ApiError& e) {
        CHECK(e.status == 400);
        return e.param;
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE(
    "a rerank template's placeholders take the query and the document, special tokens parsed") {
    const auto tok = letter_tokenizer(false);
    const auto got = rerank_tokens(*tok, "<s>q{query}d{document}</s>", "ab", "c");
    CHECK(got == std::vector<int32_t>{1, letter('q'), letter('a'), letter('b'), letter('d'),
                                      letter('c'), 2});
    // The user's text is not a template: a query holding "{document}" stays text.
    const auto inner = rerank_tokens(*tok, "q{query}d{document}", "x{document}", "c");
    CHECK(inner == tok->encode("qx{document}dc", false, true));
    CHECK(inner != tok->encode("qxcdc", false, true));
}

TEST_CASE("without a template a pair is BOS query EOS document EOS, as the vocabulary adds them") {
    const auto plain = letter_tokenizer(false);
    CHECK(rerank_tokens(*plain, "", "ab", "c") ==
          std::vector<int32_t>{letter('a'), letter('b'), letter('c')});
    const auto bos = letter_tokenizer(true);
    CHECK(rerank_tokens(*bos, "", "ab", "c") ==
          std::vector<int32_t>{1, letter('a'), letter('b'), letter('c')});
    // User text never becomes a control token.
    CHECK(rerank_tokens(*plain, "", "</s>", "c") == plain->encode("</s>c", false, false));
}

namespace {

// A WordPiece ("bert") vocabulary: [PAD] [UNK] [CLS] [SEP], then the words a, b, c (ids 4..6).
std::unique_ptr<ferrox::Tokenizer> bert_tokenizer(std::optional<bool> add_bos,
                                                  std::optional<bool> add_eos,
                                                  std::optional<bool> add_sep) {
    ferrox::VocabSpec spec;
    spec.model = "bert";
    spec.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581a", "\u2581b", "\u2581c"};
    spec.types = {ferrox::TokenType::control, ferrox::TokenType::unknown,
                  ferrox::TokenType::control, ferrox::TokenType::control};
    spec.types.resize(spec.tokens.size(), ferrox::TokenType::normal);
    spec.unk = 1;
    spec.bos = 2;
    spec.sep = 3;
    spec.add_bos = add_bos;
    spec.add_eos = add_eos;
    spec.add_sep = add_sep;
    auto made = ferrox::Tokenizer::from_spec(std::move(spec));
    if (!made) FAIL(made.error().message());
    return std::move(*made);
}

}  // namespace

TEST_CASE("a BERT reranker's pair follows the vocabulary's add_bos, add_eos and add_sep flags") {
    using V = std::vector<int32_t>;
    constexpr int32_t cls = 2, sep = 3, a = 4, c = 6;
    // The defaults (bge's files): [CLS] query [SEP] document, no [SEP] after it (as llama-server).
    CHECK(rerank_tokens(*bert_tokenizer({}, {}, {}), "", "a", "c") == V{cls, a, sep, c});
    // add_eos (XLM-RoBERTa's converter): SEP stands in for the absent EOS, after each text.
    CHECK(rerank_tokens(*bert_tokenizer({}, true, {}), "", "a", "c") ==
          V{cls, a, sep, sep, c, sep});
    CHECK(rerank_tokens(*bert_tokenizer({}, {}, false), "", "a", "c") == V{cls, a, c});
    CHECK(rerank_tokens(*bert_tokenizer(false, {}, {}), "", "a", "c") == V{a, sep, c});
    // encode itself still adds [CLS] and [SEP] whatever the flags (llama.cpp's WordPiece).
    CHECK(bert_tokenizer(false, {}, false)->encode("a", true, false) == V{cls, a, sep});
}

TEST_CASE("a rerank request's fields are read and refused by JSON pointer") {
    const auto tok = letter_tokenizer(false);
    RerankLimits limits;
    limits.max_tokens = 8;
    const auto r = parse_rerank_request(
        ordered_json::parse(R"({"model": "m", "query": "ab", "documents": ["c", {"text": "de"}],
                                "top_n": 9, "return_documents": true})"),
        *tok, "", limits);
    REQUIRE(r.inputs.size() == 2);
    CHECK(r.inputs[1] == std::vector<int32_t>{letter('a'), letter('b'), letter('d'), letter('e')});
    CHECK(r.documents == std::vector<std::string>{"c", "de"});
    CHECK(r.top_n == 2);  // no more than there are documents
    CHECK(r.return_documents);
    CHECK(r.prompt_tokens == 7);

    CHECK(pointer_of(ordered_json::parse(R"({"documents": ["a"]})"), limits) == "/query");
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": [1]})"), limits) ==
          "/documents/0");
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": ["b", {"x": 1}]})"),
                     limits) == "/documents/1/text");
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": ["bcdefghij"]})"),
                     limits) == "/documents/0");  // 10 tokens > 8
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": ["b"], "top_n": -1})"),
                     limits) == "/top_n");
    limits.max_documents = 2;
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": ["b", "c", "d"]})"),
                     limits) == "/documents");
    limits.max_documents = 1000;
    limits.max_total_tokens = 5;
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": ["bc", "de"]})"), limits) ==
          "/documents");
    CHECK(pointer_of(ordered_json::parse(R"({"query": "a", "documents": ["b"], "x": 1})"),
                     limits) == "x");
}

TEST_CASE("rerank results go by descending score, ties by index, top_n of them") {
    const auto tok = letter_tokenizer(false);
    RerankLimits limits;
    limits.max_tokens = 64;
    auto request = parse_rerank_request(
        ordered_json::parse(R"({"query": "q", "documents": ["a", "b", "c", "d"], "top_n": 3,
                                "return_documents": true})"),
        *tok, "", limits);
    const ordered_json out = rerank_response(
        {{0.25f, 0.75f}, {0.75f, 0.25f}, {0.5f, 0.5f}, {0.75f, 0.25f}}, request, "m");
    const ordered_json& results = out["results"];
    REQUIRE(results.size() == 3);
    CHECK(results[0]["index"] == 1);
    CHECK(results[1]["index"] == 3);
    CHECK(results[2]["index"] == 2);
    CHECK(results[2]["relevance_score"] == 0.5);
    CHECK(results[1]["document"]["text"] == "d");
    CHECK(out["usage"]["prompt_tokens"] == 8);
    CHECK(out["model"] == "m");
}
