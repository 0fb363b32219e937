// WordPiece ("bert") tokenizer on hand-built vocabularies; the parity tests
// compare it with llama.cpp on bge's vocabulary (tests/parity).
#include "tokenizer_test_support.h"

using ferrox::TokenType;
using ferrox::VocabSpec;
using ferrox::test::id_of;
using ferrox::test::make_tokenizer;
using Ids = std::vector<int32_t>;

namespace {

// [PAD] [UNK] [CLS] [SEP], then the given pieces ("\u2581" marks a word's first piece).
VocabSpec wpm_vocab(std::vector<std::string> pieces) {
    VocabSpec spec;
    spec.model = "bert";
    for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]"}) {
        spec.tokens.emplace_back(special);
        spec.types.push_back(TokenType::control);
    }
    for (auto& piece : pieces) {
        spec.tokens.push_back(piece);
        spec.types.push_back(TokenType::normal);
    }
    spec.unk = 1;
    spec.bos = 2;
    spec.sep = 3;
    return spec;
}

}  // namespace

TEST_CASE("wpm: each word takes the longest piece, then bare continuation pieces") {
    auto tok = make_tokenizer(
        wpm_vocab({"\u2581play", "\u2581playing", "\u2581p", "ing", "s", "ed", "\u2581!"}));
    CHECK(tok->encode("playing played plays!", false, false) ==
          Ids{id_of(*tok, "\u2581playing"), id_of(*tok, "\u2581play"), id_of(*tok, "ed"),
              id_of(*tok, "\u2581play"), id_of(*tok, "s"), id_of(*tok, "\u2581!")});
}

TEST_CASE("wpm: a word with a position no piece covers is one [UNK], its pieces dropped") {
    auto tok = make_tokenizer(wpm_vocab({"\u2581play", "\u2581x", "ing"}));
    CHECK(tok->encode("playzing x", false, false) == Ids{1, id_of(*tok, "\u2581x")});
}

TEST_CASE("wpm: lowercased, accents stripped, punctuation and CJK split off") {
    auto tok = make_tokenizer(wpm_vocab({"\u2581cafe", "\u2581,", "\u2581\u4e2d", "\u2581\u6587"}));
    CHECK(tok->encode("CAF\u00c9,\u4e2d\u6587", false, false) ==
          Ids{id_of(*tok, "\u2581cafe"), id_of(*tok, "\u2581,"), id_of(*tok, "\u2581\u4e2d"),
              id_of(*tok, "\u2581\u6587")});
    auto spec = wpm_vocab({"\u2581caf\u00e9", "\u2581cafe"});
    spec.lowercase = false;  // accents follow lowercase unless strip_accents says
    auto kept = make_tokenizer(spec);
    CHECK(kept->encode("caf\u00e9", false, false) == Ids{id_of(*kept, "\u2581caf\u00e9")});
}

TEST_CASE("wpm: add_special brackets the text with [CLS] and [SEP]") {
    auto tok = make_tokenizer(wpm_vocab({"\u2581a"}));
    CHECK(tok->encode("a", true, false) == Ids{2, id_of(*tok, "\u2581a"), 3});
    CHECK(tok->encode("", true, false) == Ids{2, 3});
    CHECK(tok->decode(tok->encode("a", true, false)) == " a");
}

TEST_CASE("wpm: a vocabulary without [SEP] is refused, naming the key") {
    auto spec = wpm_vocab({"\u2581a"});
    spec.sep = -1;
    auto tok = ferrox::Tokenizer::from_spec(spec);
    REQUIRE_FALSE(tok);
    CHECK_THAT(tok.error().message(), Catch::Contains("tokenizer.ggml.seperator_token_id"));
}
