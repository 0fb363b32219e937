// Stop strings over streamed pieces. The expected text is computed
// independently, byte by byte over the whole output; streaming must
// reproduce it for every way of splitting the output into pieces.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "ferrox/output/stop_strings.h"
#include "random_data.h"

using ferrox::output::StopScanner;

namespace {

// The reference: the text read one byte at a time, stopped at the first byte
// that completes a stop string, cut where that stop begins (the longest, when
// several complete on that byte).
std::pair<std::string, bool> cut_at_first_stop(const std::string& text,
                                               const std::vector<std::string>& stops) {
    for (size_t end = 1; end <= text.size(); ++end) {
        size_t cut = std::string::npos;
        for (const auto& s : stops)
            if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0)
                cut = std::min(cut, end - s.size());
        if (cut != std::string::npos) return {text.substr(0, cut), true};
    }
    return {text, false};
}

std::pair<std::string, bool> streamed(const std::vector<std::string>& pieces,
                                      const std::vector<std::string>& stops) {
    StopScanner scanner(stops);
    std::string out;
    for (const auto& p : pieces) {
        auto step = scanner.push(p);
        out += step.emit;
        if (step.stopped) return {out, true};
    }
    return {out + scanner.flush(), false};
}

}  // namespace

TEST_CASE("a stop string split across pieces is cut exactly where the whole text has it") {
    std::mt19937 rng(static_cast<uint32_t>(ferrox::test::test_seed(14)));
    const std::string alphabet = "ab<|>x ";
    for (int trial = 0; trial < 2000; ++trial) {
        std::string text;
        const int len = 1 + static_cast<int>(rng() % 40);
        for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
        std::vector<std::string> stops;
        const int n_stops = 1 + static_cast<int>(rng() % 3);
        for (int s = 0; s < n_stops; ++s) {
            std::string stop;
            const int slen = 1 + static_cast<int>(rng() % 4);
            for (int i = 0; i < slen; ++i) stop += alphabet[rng() % alphabet.size()];
            stops.push_back(stop);
        }
        std::vector<std::string> pieces;
        for (size_t at = 0; at < text.size();) {
            const size_t take = std::min<size_t>(1 + rng() % 5, text.size() - at);
            pieces.push_back(text.substr(at, take));
            at += take;
        }
        std::string described = "text '" + text + "' stops";
        for (const auto& s : stops) described += " '" + s + "'";
        described += " pieces";
        for (const auto& p : pieces) described += " '" + p + "'";
        INFO(described);
        CHECK(streamed(pieces, stops) == cut_at_first_stop(text, stops));
    }
}

TEST_CASE("the stop that ends first wins over one that starts first, however the text is split") {
    // "bc" completes on the 'c', before "abcd" can: the output is "a" whether
    // the text comes as one piece, as "abc" + "d", or byte by byte. (The rule
    // of earliest start gave "" for one piece and "a" for the others.)
    const std::vector<std::string> stops{"abcd", "bc"};
    for (const auto& pieces : std::vector<std::vector<std::string>>{
             {"abcde"}, {"abc", "de"}, {"a", "b", "c", "d", "e"}, {"ab", "cde"}}) {
        INFO("first piece '" << pieces.front() << "'");
        CHECK(streamed(pieces, stops) == std::pair<std::string, bool>{"a", true});
    }
    // Of two ending on the same byte, the longer (it starts first).
    CHECK(streamed({"xabcd"}, {"cd", "abcd"}) == std::pair<std::string, bool>{"x", true});
}

TEST_CASE("a stop string at the very start leaves no text, and nothing comes after a stop") {
    StopScanner scanner({"User:"});
    const auto first = scanner.push("User: hi");
    CHECK(first.stopped);
    CHECK(first.emit.empty());
    CHECK(scanner.stopped());
    CHECK(scanner.push("more").emit.empty());
    CHECK(scanner.flush().empty());
}

TEST_CASE("text that cannot start a stop string is not held back") {
    StopScanner scanner({"<|end|>"});
    CHECK(scanner.push("hello ").emit == "hello ");
    const auto held = scanner.push("wor<|");
    CHECK(held.emit == "wor");  // "<|" may begin the stop
    CHECK_FALSE(held.stopped);
    CHECK(scanner.push("x").emit == "<|x");
    const auto stop = scanner.push("a<|end|>tail");
    CHECK(stop.stopped);
    CHECK(stop.emit == "a");
}

TEST_CASE("without stop strings (or only empty ones) every byte passes at once") {
    StopScanner none({""});
    CHECK(none.push("<|").emit == "<|");
    CHECK_FALSE(none.stopped());
}

TEST_CASE("the scanner names the stop string that ended the output, as the whole text has it") {
    std::mt19937 rng(static_cast<uint32_t>(ferrox::test::test_seed(34)));
    const std::string alphabet = "abc<>";
    int stopped = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        std::string text;
        const int len = 1 + static_cast<int>(rng() % 30);
        for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
        std::vector<std::string> stops(2 + rng() % 3);
        for (auto& stop : stops)
            for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i)
                stop += alphabet[rng() % alphabet.size()];
        // Independently: the first byte on which a stop completes, and of those
        // completing there the longest.
        std::string want;
        for (size_t end = 1; end <= text.size() && want.empty(); ++end)
            for (const auto& s : stops)
                if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0 &&
                    s.size() > want.size())
                    want = s;
        StopScanner scanner(stops);
        for (size_t at = 0; at < text.size() && !scanner.stopped();) {
            const size_t take = std::min<size_t>(1 + rng() % 4, text.size() - at);
            (void)scanner.push(std::string_view(text).substr(at, take));
            at += take;
        }
        INFO("text '" << text << "' want '" << want << "'");
        CHECK(scanner.matched() == want);
        stopped += !want.empty();
    }
    CHECK(stopped > 500);  // the alphabet is small enough that most texts stop
}
