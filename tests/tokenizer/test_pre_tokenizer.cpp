// Pre-tokenizer splits, written out by hand from the regexes' meaning.
#include <catch2/catch.hpp>

#include "tokenizer/pre_tokenizer.h"

using ferrox::tokenizer_detail::pre_tokenize;
using ferrox::tokenizer_detail::PreTokenizer;
using Words = std::vector<std::string>;

TEST_CASE("pre-tokenizer gpt2: letters, numbers, other and whitespace runs") {
    CHECK(pre_tokenize(PreTokenizer::gpt2, "Hello world") == Words{"Hello", " world"});
    CHECK(pre_tokenize(PreTokenizer::gpt2, "I'm here") == Words{"I", "'m", " here"});
    CHECK(pre_tokenize(PreTokenizer::gpt2, "a  b") == Words{"a", " ", " b"});
    CHECK(pre_tokenize(PreTokenizer::gpt2, "x123abc!!") == Words{"x", "123", "abc", "!!"});
    CHECK(pre_tokenize(PreTokenizer::gpt2, "end   ") == Words{"end", "   "});
    CHECK(pre_tokenize(PreTokenizer::gpt2, "I'M") == Words{"I", "'", "M"});  // case-sensitive
    CHECK(pre_tokenize(PreTokenizer::gpt2, "").empty());
}

TEST_CASE("pre-tokenizer gpt2: Unicode letters and spaces by category") {
    CHECK(pre_tokenize(PreTokenizer::gpt2,
                       "\xC3\x9C"
                       "ber \xE6\x97\xA5\xE6\x9C\xAC") == Words{"\xC3\x9C"
                                                                "ber",
                                                                " \xE6\x97\xA5\xE6\x9C\xAC"});
    // U+3000 IDEOGRAPHIC SPACE is whitespace; U+00B2 SUPERSCRIPT TWO is a number.
    CHECK(pre_tokenize(PreTokenizer::gpt2, "a\xE3\x80\x80\xC2\xB2") ==
          Words{"a", "\xE3\x80\x80", "\xC2\xB2"});
}

TEST_CASE("pre-tokenizer llama3: digits in threes, line breaks, any-case contractions") {
    CHECK(pre_tokenize(PreTokenizer::llama3, "12345") == Words{"123", "45"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "Hello\n\nworld") == Words{"Hello", "\n\n", "world"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "I'M") == Words{"I", "'M"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "a ?!\nb") == Words{"a", " ?!\n", "b"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "(hi") == Words{"(hi"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "x  \n y") == Words{"x", "  \n", " y"});
}

TEST_CASE("pre-tokenizer qwen2: every digit alone") {
    CHECK(pre_tokenize(PreTokenizer::qwen2, "a12345") == Words{"a", "1", "2", "3", "4", "5"});
}

TEST_CASE("pre-tokenizer smollm: digits split off before the gpt2 rules") {
    CHECK(pre_tokenize(PreTokenizer::smollm, "ab12 c") == Words{"ab", "1", "2", " c"});
}

TEST_CASE("pre-tokenizer default: punctuation runs, then gpt2, then digit triples") {
    CHECK(pre_tokenize(PreTokenizer::standard, "a+b") == Words{"a", "+", "b"});
    CHECK(pre_tokenize(PreTokenizer::standard, "x 12345") == Words{"x", " ", "123", "45"});
}

TEST_CASE("pre-tokenizer: malformed UTF-8 becomes U+FFFD, one byte at a time") {
    // F4 90 80 80 is well-formed in shape but past U+10FFFF.
    CHECK(pre_tokenize(PreTokenizer::gpt2, "\xF4\x90\x80\x80") ==
          Words{"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"});
    CHECK(pre_tokenize(PreTokenizer::gpt2, "a\xFF\xFE") == Words{"a", "\xEF\xBF\xBD\xEF\xBF\xBD"});
}
