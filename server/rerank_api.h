// POST /v1/rerank (also /rerank, /v1/reranking, /reranking, as llama-server
// answers) in the shape llama-server, Jina and Cohere share: a `query`,
// `documents` (strings, or objects with a `text`), `top_n`,
// `return_documents`; the answer's `results` are {index, relevance_score,
// document?} by descending score. Each query/document pair becomes one input
// as llama-server forms it (rerank_tokens). Every refusal is a 400 naming the
// field as a JSON pointer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::server {

struct RerankLimits {
    size_t max_documents = 1000;  // Cohere's bound on `documents`
    uint32_t max_tokens = 0;      // per pair: the reranker's context
    // All pairs together: what one request may make the engine decode.
    uint64_t max_total_tokens = uint64_t{1} << 20;
};

struct RerankRequest {
    std::vector<std::vector<int32_t>> inputs;  // one a document, in order
    std::vector<std::string> documents;        // their texts (return_documents)
    size_t top_n = 0;                          // results kept (all when not asked)
    bool return_documents = false;
    uint64_t prompt_tokens = 0;
};

// One query/document pair as one input, as llama-server's
// format_prompt_rerank: the file's rerank template
// (`tokenizer.chat_template.rerank`) with {query} and {document} replaced,
// encoded with special tokens parsed and none added; without one, the
// vocabulary's PairSpecials around them: [BOS] query [EOS] [SEP] document
// [EOS] as its flags say (BERT's: [CLS] query [SEP] document; user text
// never parsed for special tokens). Every token's type is 0, as llama.cpp's
// bert graph adds token_types' first row to all of them.
std::vector<int32_t> rerank_tokens(const Tokenizer& tokenizer, const std::string& rerank_template,
                                   const std::string& query, const std::string& document);

// The body read against the limits; throws ApiError (400) naming the field.
RerankRequest parse_rerank_request(const nlohmann::ordered_json& body, const Tokenizer& tokenizer,
                                   const std::string& rerank_template, const RerankLimits& limits);

// The answer for `scores` (one a document, in request order; the first of
// each is its relevance): results by descending score (ties by index),
// top_n of them.
nlohmann::ordered_json rerank_response(const std::vector<std::vector<float>>& scores,
                                       const RerankRequest& request, const std::string& model_id);

}  // namespace ferrox::server
