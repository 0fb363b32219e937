// SentencePiece unigram ("t5") tokenizer on hand-built vocabularies, and its
// refusals of a bad precompiled charsmap. The parity with SentencePiece and
// llama.cpp on trained models is tests/parity/test_ugm_parity.py.
#include <random>

#include "tokenizer_test_support.h"

using ferrox::TokenType;
using ferrox::VocabSpec;
using ferrox::test::id_of;
using ferrox::test::make_tokenizer;
using Ids = std::vector<int32_t>;

namespace {

// <pad> </s> <unk> (T5's ids 0, 1, 2), then the given normal pieces.
VocabSpec ugm_vocab(std::vector<std::pair<std::string, float>> pieces) {
    VocabSpec spec;
    spec.model = "t5";
    for (auto [text, type] : {std::pair<std::string, TokenType>{"<pad>", TokenType::control},
                              {"</s>", TokenType::control},
                              {"<unk>", TokenType::unknown}}) {
        spec.tokens.push_back(text);
        spec.scores.push_back(0.0f);
        spec.types.push_back(type);
    }
    for (auto& [text, score] : pieces) {
        spec.tokens.push_back(text);
        spec.scores.push_back(score);
        spec.types.push_back(TokenType::normal);
    }
    return spec;
}

std::string le32(uint32_t v) {
    return {static_cast<char>(v & 0xFF), static_cast<char>((v >> 8) & 0xFF),
            static_cast<char>((v >> 16) & 0xFF), static_cast<char>(v >> 24)};
}

}  // namespace

TEST_CASE("ugm: the segmentation with the highest summed score wins") {
    // "abc": ab+c = -3.5 beats a+bc = -3.8, abc = -4 and a+b+c = -6.
    auto tok = make_tokenizer(
        ugm_vocab({{"a", -2}, {"b", -2}, {"c", -2}, {"ab", -1.5f}, {"bc", -1.8f}, {"abc", -4}}));
    CHECK(tok->encode("abc", false, false) == Ids{id_of(*tok, "ab"), id_of(*tok, "c")});
    // With add_special, llama.cpp's default for the unigram model: EOS (</s>) after.
    CHECK(tok->encode("abc", true, false) == Ids{id_of(*tok, "ab"), id_of(*tok, "c"), 1});
}

TEST_CASE("ugm: a run of unknown code points is one unknown token") {
    auto tok = make_tokenizer(ugm_vocab({{"a", -1}}));
    CHECK(tok->encode("a\xC3\xA9\xE2\x82\xAC"
                      "a",
                      false, false) == Ids{3, 2, 3});
    CHECK(tok->decode(tok->encode("a\xC3\xA9"
                                  "a",
                                  false, false)) == "aa");
}

TEST_CASE("ugm: spaces become U+2581, with a dummy prefix and merged runs as the file says") {
    auto spec = ugm_vocab({{"\xE2\x96\x81"
                            "a",
                            -1},
                           {"\xE2\x96\x81", -2},
                           {"a", -3}});
    spec.add_space_prefix = true;
    spec.remove_extra_whitespaces = true;
    auto merged = make_tokenizer(spec);
    const int32_t space_a = id_of(*merged,
                                  "\xE2\x96\x81"
                                  "a");
    CHECK(merged->encode("  a   a  ", false, false) == Ids{space_a, space_a});
    spec.remove_extra_whitespaces = false;
    auto kept = make_tokenizer(spec);
    const int32_t space = id_of(*kept, "\xE2\x96\x81");
    CHECK(kept->encode("a  a", false, false) == Ids{space_a, space, space_a});
    CHECK(kept->decode(kept->encode("a  a", false, false)) == " a  a");
}

TEST_CASE("ugm: a vocabulary without an unknown token is refused") {
    VocabSpec spec = ugm_vocab({{"a", -1}});
    spec.types[2] = TokenType::normal;
    spec.unk = -1;
    auto made = ferrox::Tokenizer::from_spec(spec);
    REQUIRE_FALSE(made);
    CHECK_THAT(made.error().message(), Catch::Contains("unknown_token_id"));
}

TEST_CASE("ugm: a bad precompiled charsmap is refused naming the key") {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"\x01\x00", "too short"},
        {le32(6) + std::string(10, 'x'), "multiple of 4"},
        {le32(8) + std::string(8, '\0'), "leaves no replacement"},
        {le32(1u << 31) + std::string(16, '\0'), "leaves no replacement"},
        {le32(4) + std::string(4, '\0') + "abc", "NUL"},
    };
    for (const auto& [blob, why] : bad) {
        VocabSpec spec = ugm_vocab({{"a", -1}});
        spec.precompiled_charsmap = blob;
        auto made = ferrox::Tokenizer::from_spec(spec);
        REQUIRE_FALSE(made);
        CHECK_THAT(made.error().message(),
                   Catch::Contains("tokenizer.ggml.precompiled_charsmap") && Catch::Contains(why));
    }
}

TEST_CASE("ugm: a well-framed charsmap of random trie units never reads out of bounds") {
    std::mt19937 rng(4500);
    std::uniform_int_distribution<uint32_t> word;
    for (int round = 0; round < 200; ++round) {
        std::string blob = le32(64);
        for (int i = 0; i < 16; ++i) blob += le32(round % 2 ? word(rng) : word(rng) & 0x3FFFF);
        blob += std::string("x\0yy\0", 5);
        VocabSpec spec = ugm_vocab({{"a", -1}, {"b", -1}});
        spec.precompiled_charsmap = blob;
        auto tok = make_tokenizer(spec);
        std::string text;
        for (int i = 0; i < 40; ++i) text.push_back(static_cast<char>(word(rng) & 0xFF));
        const auto ids = tok->encode(text, true, false);
        CHECK(!ids.empty());
        for (const int32_t id : ids) CHECK(id >= 0);
    }
}

TEST_CASE("ugm: an unknown code point costs the lowest normal score less 10") {
    // "aQ": the piece "aQ" (-1) against "a" (+5, a file's score may be positive) and Q
    // unknown: 5 + (-1 - 10) = -6 loses to -1; without the penalty 5 + (-1) = 4 would win.
    auto tok = make_tokenizer(ugm_vocab({{"a", 5}, {"aQ", -1}}));
    CHECK(tok->encode("aQ", false, false) == Ids{id_of(*tok, "aQ")});
    // Where no piece covers Q, the unknown token stands for it.
    CHECK(tok->encode("Qa", false, false) == Ids{2, id_of(*tok, "a")});
}
