// Byte-level BPE ("gpt2") tokenizer on hand-built vocabularies.
#include <cstdio>

#include "tokenizer_test_support.h"

using ferrox::TokenType;
using ferrox::VocabSpec;
using ferrox::test::id_of;
using ferrox::test::make_tokenizer;
using Ids = std::vector<int32_t>;

namespace {

// "Ġ" is how GPT-2's byte alphabet spells the space byte (0x20 -> U+0120).
constexpr const char* kG = "\xC4\xA0";

VocabSpec bpe_vocab(std::vector<std::string> tokens, std::vector<std::string> merges,
                    std::string pre = "gpt-2") {
    VocabSpec spec;
    spec.model = "gpt2";
    spec.pre = std::move(pre);
    spec.tokens = std::move(tokens);
    spec.merges = std::move(merges);
    spec.tokens.push_back("<|endoftext|>");
    spec.types.assign(spec.tokens.size(), TokenType::normal);
    spec.types.back() = TokenType::control;
    spec.eos = static_cast<int32_t>(spec.tokens.size() - 1);
    return spec;
}

}  // namespace

TEST_CASE("bpe: the lowest-ranked merge applies first") {
    auto bc_first = make_tokenizer(bpe_vocab({"a", "b", "c", "ab", "bc"}, {"b c", "a b"}));
    CHECK(bc_first->encode("abc", false, false) ==
          Ids{id_of(*bc_first, "a"), id_of(*bc_first, "bc")});
    auto ab_first = make_tokenizer(bpe_vocab({"a", "b", "c", "ab", "bc"}, {"a b", "b c"}));
    CHECK(ab_first->encode("abc", false, false) ==
          Ids{id_of(*ab_first, "ab"), id_of(*ab_first, "c")});
}

TEST_CASE("bpe: spaces are spelled in the byte alphabet and stay with the next word") {
    auto tok =
        make_tokenizer(bpe_vocab({"a", "b", kG, std::string(kG) + "b"}, {std::string(kG) + " b"}));
    CHECK(tok->encode("a b", false, false) ==
          Ids{id_of(*tok, "a"), id_of(*tok, std::string(kG) + "b")});
    CHECK(tok->token_to_piece(id_of(*tok, std::string(kG) + "b")) == " b");
}

TEST_CASE("bpe: non-ASCII bytes map to their byte-alphabet characters") {
    // U+00E9 is C3 A9; both bytes are printable Latin-1 and stand for themselves.
    auto tok = make_tokenizer(
        bpe_vocab({"\xC3\x83", "\xC2\xA9", "\xC3\x83\xC2\xA9"}, {"\xC3\x83 \xC2\xA9"}));
    CHECK(tok->encode("\xC3\xA9", false, false) == Ids{id_of(*tok, "\xC3\x83\xC2\xA9")});
    CHECK(tok->decode(tok->encode("\xC3\xA9", false, false)) == "\xC3\xA9");
    // Newline (0x0A) is moved to U+010A.
    auto nl = make_tokenizer(bpe_vocab({"\xC4\x8A"}, {}));
    CHECK(nl->encode("\n", false, false) == Ids{0});
    CHECK(nl->token_to_piece(0) == "\n");
}

TEST_CASE("bpe: llama3 takes a word that is a whole token without merging") {
    // No merge builds "abc", yet the word is one token.
    auto spec = bpe_vocab({"a", "b", "c", "abc"}, {}, "llama-bpe");
    spec.bos = 0;
    auto tok = make_tokenizer(spec);
    CHECK(tok->encode("abc", false, false) == Ids{id_of(*tok, "abc")});
    auto gpt2 = make_tokenizer(bpe_vocab({"a", "b", "c", "abc"}, {}, "gpt-2"));
    CHECK(gpt2->encode("abc", false, false) == Ids{0, 1, 2});
}

TEST_CASE("bpe: BOS is added by default only for the llama3 family") {
    auto spec = bpe_vocab({"a"}, {}, "llama-bpe");
    spec.bos = 0;
    auto llama3 = make_tokenizer(spec);
    CHECK(llama3->encode("a", true, false) == Ids{0, 0});
    spec.pre = "qwen2";
    auto qwen = make_tokenizer(spec);
    CHECK(qwen->encode("a", true, false) == Ids{0});
}

TEST_CASE("bpe: control tokens are parsed only with parse_special and render as nothing") {
    auto tok = make_tokenizer(bpe_vocab({"a", "<", "|", ">"}, {}));
    const int32_t end = id_of(*tok, "<|endoftext|>");
    CHECK(tok->encode("a<|endoftext|>", false, true) == Ids{0, end});
    CHECK(tok->encode("a<|endoftext|>", false, false).size() > 2);
    CHECK(tok->token_to_piece(end).empty());
    CHECK(tok->is_end_of_generation(end));
}

TEST_CASE("bpe: segments cut special tokens only where allowed, and merge across edges") {
    VocabSpec spec = bpe_vocab({"a", "b", "<", ">", "x", "ab"}, {"a b"});
    spec.tokens.push_back("<x>");
    spec.types.push_back(TokenType::control);
    auto tok = make_tokenizer(spec);
    const int32_t control = id_of(*tok, "<x>");
    // The template's "<x>" is the control token; the user's "<x>" stays text.
    const std::vector<ferrox::TextSegment> chat = {{"a<x>", true}, {"<x>b", false}};
    CHECK(tok->encode(chat, false) == Ids{id_of(*tok, "a"), control, id_of(*tok, "<"),
                                          id_of(*tok, "x"), id_of(*tok, ">"), id_of(*tok, "b")});
    // Text runs on over a segment edge: "a" + "b" is the word "ab", merged.
    const std::vector<ferrox::TextSegment> split_word = {{"a", false}, {"b", true}};
    CHECK(tok->encode(split_word, false) == Ids{id_of(*tok, "ab")});
    CHECK(tok->encode(split_word, false) == tok->encode("ab", false, false));
    // A special token's text over two segments is not that token.
    const std::vector<ferrox::TextSegment> halves = {{"<x", true}, {">", true}};
    CHECK(tok->encode(halves, false) == tok->encode("<x>", false, false));
    CHECK(tok->encode("<x>", false, true) == Ids{control});
}

// ---- "gemma4": the same merges over SentencePiece's spelling ----

namespace {

constexpr const char* kSpaceMark = "\xE2\x96\x81";  // U+2581

VocabSpec gemma4_vocab(std::vector<std::string> tokens, std::vector<std::string> merges) {
    VocabSpec spec = bpe_vocab(std::move(tokens), std::move(merges));
    spec.model = "gemma4";
    spec.pre.clear();  // the model implies its split
    spec.tokens.insert(spec.tokens.begin(), "<bos>");
    spec.types.insert(spec.types.begin(), TokenType::control);
    spec.bos = 0;
    spec.eos = static_cast<int32_t>(spec.tokens.size() - 1);
    for (const unsigned byte : {0x0Au, 0xC3u, 0xA9u}) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", byte);
        spec.tokens.push_back(name);
        spec.types.push_back(TokenType::byte);
    }
    return spec;
}

}  // namespace

TEST_CASE("gemma4: spaces are U+2581, merges run over whole lines, BOS is always added") {
    const std::string sp = kSpaceMark;
    auto spec =
        gemma4_vocab({"a", "b", sp, sp + "b", "a" + sp + "b"}, {sp + " b", "a " + sp + "b"});
    spec.add_bos = false;  // llama.cpp overrides Gemma 4's files to true
    auto tok = make_tokenizer(std::move(spec));
    // One line is one word: "a" and " b" merge across the space.
    CHECK(tok->encode("a b", true, false) == Ids{0, id_of(*tok, "a" + sp + "b")});
    CHECK(tok->token_to_piece(id_of(*tok, sp + "b")) == " b");
    CHECK(tok->decode(tok->encode("a b", false, false)) == "a b");
}

TEST_CASE("gemma4: bytes no token spells fall back to <0xXX>, others are dropped") {
    auto tok = make_tokenizer(gemma4_vocab({"a"}, {}));
    // U+00E9 is C3 A9: both have byte tokens; 'z' has neither a token nor one.
    CHECK(tok->encode("a\xC3\xA9z", false, false) ==
          Ids{id_of(*tok, "a"), id_of(*tok, "<0xC3>"), id_of(*tok, "<0xA9>")});
    CHECK(tok->decode(tok->encode("a\xC3\xA9", false, false)) == "a\xC3\xA9");
}

TEST_CASE("gemma4: a run of newlines that is a token stays whole") {
    // The merges only build "\n\n"; the three-newline token is reached only by
    // llama.cpp's Gemma 4 rule, which takes the run whole.
    auto tok = make_tokenizer(gemma4_vocab({"\n", "\n\n", "\n\n\n", "a"}, {"\n \n"}));
    CHECK(tok->encode("a\n\n\n", false, false) == Ids{id_of(*tok, "a"), id_of(*tok, "\n\n\n")});
    // A run with no token of its own merges as usual.
    CHECK(tok->encode("\n\n\n\n\n", false, false) ==
          Ids{id_of(*tok, "\n\n"), id_of(*tok, "\n\n"), id_of(*tok, "\n")});
}
