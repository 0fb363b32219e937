// SentencePiece ("llama") tokenizer on hand-built vocabularies.
#include "tokenizer_test_support.h"

using ferrox::TokenType;
using ferrox::VocabSpec;
using ferrox::test::id_of;
using ferrox::test::make_tokenizer;
using Ids = std::vector<int32_t>;

namespace {

// <unk> <s> </s>, then the given pieces with their scores.
VocabSpec spm_vocab(std::vector<std::pair<std::string, float>> pieces) {
    VocabSpec spec;
    spec.model = "llama";
    for (auto [text, type] : {std::pair<std::string, TokenType>{"<unk>", TokenType::unknown},
                              {"<s>", TokenType::control},
                              {"</s>", TokenType::control}}) {
        spec.tokens.push_back(text);
        spec.scores.push_back(0.0f);
        spec.types.push_back(type);
    }
    for (auto& [text, score] : pieces) {
        spec.tokens.push_back(text);
        spec.scores.push_back(score);
        spec.types.push_back(TokenType::normal);
    }
    spec.add_space_prefix = false;
    spec.add_bos = false;
    return spec;
}

}  // namespace

TEST_CASE("spm: the pair whose merge scores highest is merged first") {
    auto favour_bc =
        make_tokenizer(spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -1}}));
    CHECK(favour_bc->encode("abc", false, false) ==
          Ids{id_of(*favour_bc, "a"), id_of(*favour_bc, "bc")});

    auto favour_ab =
        make_tokenizer(spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -2}}));
    CHECK(favour_ab->encode("abc", false, false) ==
          Ids{id_of(*favour_ab, "ab"), id_of(*favour_ab, "c")});
}

TEST_CASE("spm: equal scores merge the leftmost pair first") {
    auto tok = make_tokenizer(spm_vocab({{"a", -5}, {"aa", -1}}));
    CHECK(tok->encode("aaa", false, false) == Ids{id_of(*tok, "aa"), id_of(*tok, "a")});
}

TEST_CASE("spm: merges continue while the merged text is a token") {
    auto tok = make_tokenizer(spm_vocab({{"h", -9},
                                         {"e", -9},
                                         {"l", -9},
                                         {"o", -9},
                                         {"he", -3},
                                         {"ll", -2},
                                         {"hell", -1},
                                         {"hello", -0.5f}}));
    CHECK(tok->encode("hello", false, false) == Ids{id_of(*tok, "hello")});
}

TEST_CASE("spm: spaces become U+2581 and a prefix space is added only when asked") {
    auto spec = spm_vocab({{"\xE2\x96\x81", -9},
                           {"a", -9},
                           {"b", -9},
                           {"\xE2\x96\x81"
                            "a",
                            -1},
                           {"\xE2\x96\x81"
                            "b",
                            -1}});
    auto without_prefix = make_tokenizer(spec);
    CHECK(without_prefix->encode("a b", false, false) ==
          Ids{id_of(*without_prefix, "a"), id_of(*without_prefix,
                                                 "\xE2\x96\x81"
                                                 "b")});

    spec.add_space_prefix = true;
    auto with_prefix = make_tokenizer(spec);
    CHECK(with_prefix->encode("a b", false, false) == Ids{id_of(*with_prefix,
                                                                "\xE2\x96\x81"
                                                                "a"),
                                                          id_of(*with_prefix,
                                                                "\xE2\x96\x81"
                                                                "b")});
}

TEST_CASE("spm: a piece outside the vocabulary falls back to <0xXX> byte tokens") {
    auto spec = spm_vocab({{"a", -1}});
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        spec.tokens.push_back(name);
        spec.scores.push_back(0.0f);
        spec.types.push_back(TokenType::byte);
    }
    auto tok = make_tokenizer(spec);
    CHECK(tok->encode("a\xC3\xA9", false, false) ==
          Ids{id_of(*tok, "a"), id_of(*tok, "<0xC3>"), id_of(*tok, "<0xA9>")});
    CHECK(tok->token_to_piece(id_of(*tok, "<0x0A>")) == "\n");
    CHECK(tok->decode(tok->encode("a\xC3\xA9", false, false)) == "a\xC3\xA9");
}

TEST_CASE("spm: without byte tokens an unknown piece becomes <unk>") {
    auto tok = make_tokenizer(spm_vocab({{"a", -1}}));
    CHECK(tok->encode("aZ", false, false) == Ids{id_of(*tok, "a"), 0});
}

TEST_CASE("spm: add_special adds BOS and EOS as the metadata says") {
    auto spec = spm_vocab({{"a", -1}});
    spec.add_bos = true;
    spec.add_eos = true;
    auto tok = make_tokenizer(spec);
    const int32_t a = id_of(*tok, "a");
    CHECK(tok->encode("a", true, false) == Ids{1, a, 2});
    CHECK(tok->encode("a", false, false) == Ids{a});
    CHECK(tok->encode("", true, false) == Ids{1, 2});
    CHECK(tok->encode("", false, false).empty());
    CHECK(tok->bos() == 1);
    CHECK(tok->eos() == 2);
}

TEST_CASE("spm: control-token text is a control token only with parse_special") {
    auto spec = spm_vocab({{"a", -1}, {"<", -1}, {"/", -1}, {"s", -1}, {">", -1}});
    auto tok = make_tokenizer(spec);
    CHECK(tok->encode("a</s>a", false, true) == Ids{id_of(*tok, "a"), 2, id_of(*tok, "a")});
    const Ids plain = tok->encode("a</s>a", false, false);
    CHECK(plain.size() == 6);
    CHECK(std::find(plain.begin(), plain.end(), 2) == plain.end());
}

TEST_CASE("spm: user-defined tokens are matched even without parse_special") {
    auto spec = spm_vocab({{"a", -1}});
    spec.tokens.push_back("<tab>");
    spec.scores.push_back(0.0f);
    spec.types.push_back(TokenType::user_defined);
    auto tok = make_tokenizer(spec);
    const int32_t tab = id_of(*tok, "<tab>");
    CHECK(tok->encode("a<tab>a", false, false) == Ids{id_of(*tok, "a"), tab, id_of(*tok, "a")});
    CHECK(tok->token_to_piece(tab) == "<tab>");
}

TEST_CASE("spm: the prefix space follows each special token") {
    auto spec = spm_vocab({{"\xE2\x96\x81"
                            "a",
                            -1},
                           {"a", -1}});
    spec.add_space_prefix = true;
    auto tok = make_tokenizer(spec);
    const int32_t space_a = id_of(*tok,
                                  "\xE2\x96\x81"
                                  "a");
    CHECK(tok->encode("a</s>a", false, true) == Ids{space_a, 2, space_a});
}

TEST_CASE("spm: pieces turn U+2581 back into spaces and control tokens into nothing") {
    auto tok = make_tokenizer(spm_vocab({{"\xE2\x96\x81"
                                          "hi",
                                          -1},
                                         {"!", -1}}));
    CHECK(tok->token_to_piece(id_of(*tok,
                                    "\xE2\x96\x81"
                                    "hi")) == " hi");
    CHECK(tok->token_to_piece(1).empty());
    CHECK(tok->token_to_piece(0).empty());
    CHECK(tok->token_to_piece(-1).empty());
    CHECK(tok->token_to_piece(1000).empty());
    const Ids ids{1,
                  id_of(*tok,
                        "\xE2\x96\x81"
                        "hi"),
                  id_of(*tok, "!"), 2};
    CHECK(tok->decode(ids) == " hi!");
}

TEST_CASE("spm: end of generation covers eos, eot and turn-end control tokens") {
    auto spec = spm_vocab({{"a", -1}, {"<end_of_turn>", 0}, {"<eot>", 0}});
    spec.eot = 5;  // "<eot>"
    auto tok = make_tokenizer(spec);
    CHECK(tok->is_end_of_generation(2));
    CHECK(tok->is_end_of_generation(id_of(*tok, "<end_of_turn>")));
    CHECK(tok->is_end_of_generation(5));
    CHECK_FALSE(tok->is_end_of_generation(id_of(*tok, "a")));
    CHECK_FALSE(tok->is_end_of_generation(1));
    // Typed normal in the vocabulary, but treated as the control token it is.
    CHECK(tok->token_to_piece(id_of(*tok, "<end_of_turn>")).empty());
    CHECK(tok->encode("<end_of_turn>", false, true) == Ids{id_of(*tok, "<end_of_turn>")});
}

TEST_CASE("spm: vocab_size and find_token describe the vocabulary") {
    auto tok = make_tokenizer(spm_vocab({{"a", -1}, {"b", -1}}));
    CHECK(tok->vocab_size() == 5);
    CHECK(tok->find_token("b") == std::optional<int32_t>(4));
    CHECK_FALSE(tok->find_token("zz").has_value());
}
