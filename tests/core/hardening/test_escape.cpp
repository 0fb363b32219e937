// escape_text: what reaches a terminal or a JSON encoder from a file.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ferrox/escape.h"

using ferrox::escape_text;
using ferrox::EscapeFor;

TEST_CASE("control characters become visible escapes on one line") {
    CHECK(escape_text("a\x1b[2Jb") == "a\\e[2Jb");
    CHECK(escape_text("t\tn\nr\r") == "t\\tn\\nr\\r");
    CHECK(escape_text(std::string("nul\0x", 5)) == "nul\\x00x");
    CHECK(escape_text("bell\x07") == "bell\\x07");
    CHECK(escape_text("del\x7f") == "del\\u007f");
    CHECK(escape_text("csi\xc2\x9b"
                      "31m") == "csi\\u009b31m");          // C1 CSI, one code point
    CHECK(escape_text("back\\slash") == "back\\\\slash");  // so an escape cannot be forged
}

TEST_CASE("valid UTF-8 is kept and every invalid byte is named") {
    CHECK(escape_text("caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80") ==
          "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80");
    CHECK(escape_text("\xff\xfe") == "\\xff\\xfe");
    CHECK(escape_text("\xc0\xaf") == "\\xc0\\xaf");                    // overlong '/'
    CHECK(escape_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // a UTF-16 surrogate
    CHECK(escape_text("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
    CHECK(escape_text("cut\xe2\x96") == "cut\\xe2\\x96");              // truncated sequence
}

TEST_CASE("running text keeps newlines and tabs but not other controls") {
    CHECK(escape_text("line\n\tnext\x1b]0;t\x07", EscapeFor::Text) == "line\n\tnext\\e]0;t\\x07");
    CHECK(escape_text("a\\b", EscapeFor::Text) == "a\\b");
}

TEST_CASE("the JSON form makes any bytes encodable and leaves valid text alone") {
    const std::string hostile = "k\xff\x1b\xc3\xa9";
    nlohmann::json doc;
    CHECK_THROWS(nlohmann::json(hostile).dump());  // the failure this prevents
    doc[escape_text(hostile, EscapeFor::Json)] = escape_text(hostile, EscapeFor::Json);
    const std::string text = doc.dump();
    CHECK(nlohmann::json::parse(text).begin().key() == "k\\xff\x1b\xc3\xa9");
}

TEST_CASE("random bytes always escape to valid UTF-8 without raw controls") {
    uint64_t state = 0x9e3779b97f4a7c15ull;  // fixed seed: 15
    for (int round = 0; round < 2000; ++round) {
        std::string bytes(static_cast<size_t>(round % 37), '\0');
        for (auto& c : bytes) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            c = static_cast<char>(state >> 56);
        }
        const std::string line = escape_text(bytes);
        for (unsigned char c : line) REQUIRE((c >= 0x20 && c != 0x7f));
        CHECK_NOTHROW(nlohmann::json(line).dump());
        CHECK_NOTHROW(nlohmann::json(escape_text(bytes, EscapeFor::Json)).dump());
    }
}
