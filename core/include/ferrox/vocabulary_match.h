// Whether a draft model's token ids mean the target's text
// (docs/speculation.md, "A draft model"): speculation feeds the draft's
// guesses to the target as ids, so the two vocabularies must be one. The
// rules live here once; `ferrox run` reads the facts through the C API,
// `ferrox serve` from the loaded files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ferrox/api.h"

namespace ferrox {

class Engine;

struct VocabularyView {
    uint32_t size = 0;  // logits per row
    // A metadata value as text (numbers in decimal), nullopt when absent.
    std::function<std::optional<std::string>(std::string_view key)> meta;
    // A token's stored piece (tokenizer.ggml.tokens[id]), nullopt when absent.
    std::function<std::optional<std::string>(int32_t id)> piece;
};

// A loaded model's facts, read as ferrox_model_meta and ferrox_token_text read them.
FERROX_API VocabularyView vocabulary_view(const Engine& engine);

// Each difference named ("tokenizer.ggml.model 'llama' vs 'gpt2'",
// "vocabulary size 269 vs 270", "token 268: '▁blue' vs '▁dog'",
// "tokenizer.ggml.eos_token_id '2' vs '0'"), joined by "; "; empty when
// the vocabularies are one. Compared: the tokenizer model and pre-tokenizer,
// the size, every token's piece (the first that differs is named), the
// special-token ids.
FERROX_API std::string vocabulary_difference(const VocabularyView& target,
                                             const VocabularyView& draft);

}  // namespace ferrox
