// Pre-tokenizer splits, written out by hand from the regexes' meaning.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "tokenizer/pre_tokenizer.h"

using ferrox::tokenizer_detail::pre_tokenize;
using ferrox::tokenizer_detail::pre_tokenizer_named;
using ferrox::tokenizer_detail::pre_tokenizer_names;
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

TEST_CASE("pre-tokenizer starcoder (smollm, refact, ...): digits split off before the gpt2 rules") {
    CHECK(pre_tokenize(PreTokenizer::starcoder, "ab12 c") == Words{"ab", "1", "2", " c"});
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

// The newer scanners: expectations worked out by hand from llama.cpp's regexes
// (tests/parity compares each name with llama.cpp itself).
TEST_CASE("pre-tokenizer tekken: letter runs cut where ASCII case turns upper") {
    CHECK(pre_tokenize(PreTokenizer::tekken, "parseJSONString") == Words{"parse", "JSONString"});
    CHECK(pre_tokenize(PreTokenizer::tekken, "HelloWorld") == Words{"Hello", "World"});
    CHECK(pre_tokenize(PreTokenizer::tekken, "HELLO") == Words{"HELLO"});
    CHECK(pre_tokenize(PreTokenizer::tekken, "12345") == Words{"1", "2", "3", "4", "5"});
    // Symbols take the line breaks and slashes after them.
    CHECK(pre_tokenize(PreTokenizer::tekken, "a/\n/b") == Words{"a", "/\n/", "b"});
    // No contractions: "'t" is a letter run with its prefix.
    CHECK(pre_tokenize(PreTokenizer::tekken, "don't") == Words{"don", "'t"});
    // Non-ASCII letters count as both cases, as llama.cpp's regex sees them.
    CHECK(pre_tokenize(PreTokenizer::tekken, "\xC3\x84pfelBaum") == Words{"\xC3\x84pfel", "Baum"});
}

TEST_CASE("pre-tokenizer gpt-4o: contractions close a letter run, digits in threes") {
    CHECK(pre_tokenize(PreTokenizer::gpt4o, "don't") == Words{"don't"});
    CHECK(pre_tokenize(PreTokenizer::gpt4o, "WE'LL go") == Words{"WE'LL", " go"});
    CHECK(pre_tokenize(PreTokenizer::gpt4o, "12345") == Words{"123", "45"});
    CHECK(pre_tokenize(PreTokenizer::gpt4o, " ?!\n x") == Words{" ?!\n", " x"});
}

TEST_CASE("pre-tokenizer qwen35: combining marks stay in letter runs") {
    CHECK(pre_tokenize(PreTokenizer::qwen35, "e\xCC\x81x") == Words{"e\xCC\x81x"});
    CHECK(pre_tokenize(PreTokenizer::qwen2, "e\xCC\x81x") == Words{"e", "\xCC\x81x"});
    CHECK(pre_tokenize(PreTokenizer::qwen35, "a12") == Words{"a", "1", "2"});
}

TEST_CASE("pre-tokenizer deepseek-v3: digit triples, CJK runs, then its own rule") {
    CHECK(pre_tokenize(PreTokenizer::deepseek_v3, "abc1234") == Words{"abc", "123", "4"});
    CHECK(pre_tokenize(PreTokenizer::deepseek_v3,
                       "\xE6\x97\xA5\xE6\x9C\xAC"
                       "abc") == Words{"\xE6\x97\xA5\xE6\x9C\xAC", "abc"});
    // One ASCII symbol joins the ASCII letters after it.
    CHECK(pre_tokenize(PreTokenizer::deepseek_v3, "x.append") == Words{"x", ".append"});
    // What no alternative matches stays together between the matches.
    CHECK(pre_tokenize(PreTokenizer::deepseek_v3, "a\x01\x02 b") == Words{"a", "\x01\x02", " b"});
}

TEST_CASE("pre-tokenizer kimi-k2: Han runs, letter runs without Han, contractions after them") {
    const auto kimi = [](std::string_view text) {
        return pre_tokenize(PreTokenizer::kimi_k2, text);
    };
    const std::string zhong = "\xE4\xB8\xAD", wen = "\xE6\x96\x87";  // U+4E2D, U+6587
    const std::string ka = "\xE3\x81\x8B";                           // U+304B hiragana: not Han
    CHECK(kimi(zhong + wen + "abc") == Words{zhong + wen, "abc"});
    CHECK(kimi("abc" + zhong + ka) == Words{"abc", zhong, ka});
    // No prefix before Han: the space stays alone, and a run of two gives its last one up
    // (one pass, as llama.cpp's handler; a separate Han stage would keep "  " whole).
    CHECK(kimi(" " + zhong) == Words{" ", zhong});
    CHECK(kimi("a  " + zhong) == Words{"a", " ", " ", zhong});
    // A contraction only closes a letter run, in any case; no contraction alternative first.
    CHECK(kimi("don't I'M") == Words{"don't", " I'M"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "I'M") == Words{"I", "'M"});
    CHECK(kimi("'s x") == Words{"'s", " x"});
    CHECK(kimi("12345") == Words{"123", "45"});
    // Extension B (U+20000) is Han too.
    CHECK(kimi("x\xF0\xA0\x80\x80y") == Words{"x", "\xF0\xA0\x80\x80", "y"});
}

TEST_CASE("pre-tokenizer variants: laguna, minicpm5, falcon, deepseek-coder, seed-coder") {
    // Lines first: the space before a line break is not part of the break.
    CHECK(pre_tokenize(PreTokenizer::laguna, "a \nb") == Words{"a", " ", "\n", "b"});
    CHECK(pre_tokenize(PreTokenizer::qwen2, "a \nb") == Words{"a", " \n", "b"});
    // Digits first: a space run before a number stays whole.
    CHECK(pre_tokenize(PreTokenizer::minicpm5, "x  1") == Words{"x", "  ", "1"});
    CHECK(pre_tokenize(PreTokenizer::llama3, "x  1") == Words{"x", " ", " ", "1"});
    CHECK(pre_tokenize(PreTokenizer::falcon, "a`b") == Words{"a", "`", "b"});
    CHECK(pre_tokenize(PreTokenizer::deepseek_coder, "ab 12\ncd") ==
          Words{"ab", " ", "1", "2", "\n", "cd"});
    CHECK(pre_tokenize(PreTokenizer::seed_coder, "!!\nx") == Words{"!!", "\n", "x"});
    CHECK(pre_tokenize(PreTokenizer::ufakzeka, "'llama") == Words{"'llama"});
    CHECK(pre_tokenize(PreTokenizer::qwen2, "'llama") == Words{"'ll", "ama"});
}

TEST_CASE("pre-tokenizer table: names are unique, each resolves or is refused by name") {
    std::set<std::string_view> seen;
    size_t supported = 0;
    for (const auto& entry : pre_tokenizer_names()) {
        INFO(std::string(entry.name));
        CHECK(seen.insert(entry.name).second);
        auto named = pre_tokenizer_named(entry.name);
        CHECK(named.has_value() == entry.info.has_value());
        if (named) {
            ++supported;
            CHECK(named->kind == entry.info->kind);
        } else {
            CHECK_THAT(named.error().message(),
                       Catch::Contains("'" + std::string(entry.name) + "'") &&
                           Catch::Contains("not supported"));
        }
    }
    CHECK(supported >= 60);
    CHECK(pre_tokenizer_named("")->kind == PreTokenizer::standard);
}

TEST_CASE("pre-tokenizer table: an unknown name is refused, escaped") {
    auto named = pre_tokenizer_named("evil\x1b[31m\n");
    REQUIRE_FALSE(named);
    const std::string message = named.error().message();
    CHECK_THAT(message, Catch::Contains("unknown tokenizer.ggml.pre 'evil\\x1b[31m\\x0a'"));
    CHECK(message.find('\x1b') == std::string::npos);
}

// docs/tokenizers.md lists every name of the table, no more, with its status.
TEST_CASE("pre-tokenizer table: docs/tokenizers.md lists exactly the table's names") {
    std::ifstream doc(FERROX_SOURCE_DIR "/docs/tokenizers.md");
    REQUIRE(doc);
    std::map<std::string, bool> listed;  // name -> supported
    bool inside = false;
    for (std::string line; std::getline(doc, line);) {
        if (line.find("<!-- pre-tokenizer names: begin -->") != std::string::npos) inside = true;
        if (line.find("<!-- pre-tokenizer names: end -->") != std::string::npos) inside = false;
        if (!inside || line.rfind("| `", 0) != 0) continue;
        const size_t end = line.find('`', 3);
        REQUIRE(end != std::string::npos);
        listed[line.substr(3, end - 3)] = line.find("refused") == std::string::npos;
    }
    std::map<std::string, bool> table;
    for (const auto& entry : pre_tokenizer_names())
        table[std::string(entry.name)] = entry.info.has_value();
    for (const auto& [name, supported] : table) {
        INFO("docs/tokenizers.md: " << name);
        REQUIRE(listed.count(name) == 1);
        CHECK(listed[name] == supported);
    }
    for (const auto& [name, supported] : listed) {
        INFO("docs/tokenizers.md lists a name the table lacks: " << name);
        CHECK(table.count(name) == 1);
    }
}
