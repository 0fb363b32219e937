// The server tests' tokenizer: <unk> <s> </s>, then one token per letter
// "a".."z" (ids 3..28), so a test can spell the tokens it expects.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <utility>

#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::test {

inline constexpr int32_t kFirstLetter = 3;

// `add_bos`: unset keeps the llama model's default.
inline std::unique_ptr<Tokenizer> letter_tokenizer(std::optional<bool> add_bos = std::nullopt) {
    VocabSpec spec;
    spec.model = "llama";
    spec.tokens = {"<unk>", "<s>", "</s>"};
    spec.types = {TokenType::unknown, TokenType::control, TokenType::control};
    for (char c = 'a'; c <= 'z'; ++c) {
        spec.tokens.emplace_back(1, c);
        spec.types.push_back(TokenType::normal);
    }
    spec.scores.assign(spec.tokens.size(), 0.0f);
    spec.unk = 0;
    spec.bos = 1;
    spec.eos = 2;
    spec.add_space_prefix = false;
    spec.add_bos = add_bos;
    auto made = Tokenizer::from_spec(std::move(spec));
    if (!made) FAIL(made.error().message());
    return std::move(*made);
}

}  // namespace ferrox::test
