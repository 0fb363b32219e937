// POST /v1/embeddings in OpenAI's shape: the request read and checked (input
// as a string, strings, a token array or token arrays; encoding_format float
// or base64; dimensions where the model allows truncation), and the answer
// written (vectors L2-normalised after any truncation, base64 as
// little-endian float32 as OpenAI sends it). Every refusal is a 400 naming
// the field as a JSON pointer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::server {

struct EmbeddingsLimits {
    size_t max_inputs = 2048;  // OpenAI's bound on `input`'s entries
    uint32_t max_tokens = 0;   // per input: the embedding context
    uint32_t n_embd = 0;       // the model's vector length
    bool truncatable = false;  // `dimensions` below n_embd allowed (Matryoshka)
};

struct EmbeddingsRequest {
    std::vector<std::vector<int32_t>> inputs;
    bool base64 = false;
    uint32_t dimensions = 0;  // the answer's length (n_embd when not asked)
    uint64_t prompt_tokens = 0;
};

// The body read against the limits; throws ApiError (400) naming the field.
EmbeddingsRequest parse_embeddings_request(const nlohmann::ordered_json& body,
                                           const Tokenizer& tokenizer,
                                           const EmbeddingsLimits& limits);

// The answer for `vectors` (one a request input, pooled, not normalised):
// each cut to the request's dimensions and scaled to L2 norm 1.
nlohmann::ordered_json embeddings_response(std::vector<std::vector<float>> vectors,
                                           const EmbeddingsRequest& request,
                                           const std::string& model_id);

// Little-endian float32 bytes in standard base64 (RFC 4648, padded).
std::string base64_floats(std::span<const float> v);

}  // namespace ferrox::server
