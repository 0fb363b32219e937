// Helpers for building small vocabularies by hand.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::test {

inline std::unique_ptr<Tokenizer> make_tokenizer(VocabSpec spec) {
    auto made = Tokenizer::from_spec(std::move(spec));
    if (!made) FAIL(made.error().message());
    return std::move(*made);
}

inline int32_t id_of(const Tokenizer& tokenizer, std::string_view text) {
    auto id = tokenizer.find_token(text);
    if (!id) FAIL("no token '" << std::string(text) << "'");
    return *id;
}

}  // namespace ferrox::test
