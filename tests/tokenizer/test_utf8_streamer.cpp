#include <catch2/catch.hpp>

#include "ferrox/tokenizer/utf8_streamer.h"

using ferrox::Utf8Streamer;

TEST_CASE("utf8 streamer: ASCII passes straight through") {
    Utf8Streamer s;
    CHECK(s.feed("hi ") == "hi ");
    CHECK_FALSE(s.has_pending());
}

TEST_CASE("utf8 streamer: a character split across pieces comes out whole") {
    Utf8Streamer s;
    CHECK(s.feed("a\xC3") == "a");
    CHECK(s.has_pending());
    CHECK(s.feed("\xA9") == "\xC3\xA9");
    // U+1F600 in four single-byte pieces.
    CHECK(s.feed("\xF0").empty());
    CHECK(s.feed("\x9F").empty());
    CHECK(s.feed("\x98").empty());
    CHECK(s.feed("\x80!") == "\xF0\x9F\x98\x80!");
    CHECK(s.flush().empty());
}

TEST_CASE("utf8 streamer: broken bytes are passed on, not held forever") {
    Utf8Streamer s;
    CHECK(s.feed("\x80x") == "\x80x");
    CHECK(s.feed("\xE2\x82y") == "\xE2\x82y");
    CHECK(s.feed("\xE2\x82").empty());
    CHECK(s.flush() == "\xE2\x82");
    CHECK_FALSE(s.has_pending());
}
