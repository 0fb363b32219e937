// No input crashes the parser: random mutations of the shipped file, and a few
// hostile shapes, each give a Config or an error with file:line:column.
#include <cstdint>
#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <string_view>

#include "config_test_support.h"
#include "ferrox/config.h"

namespace {

// Bytes that change YAML structure, so mutations reach more than the scalar parsers.
constexpr std::string_view kYamlSyntax = "-:[]{},#&*!|>'\"%@`? \n\t~0123456789";

std::string mutate(std::string text, std::mt19937_64& rng) {
    auto pick = [&](std::size_t bound) {
        return bound == 0 ? std::size_t{0}
                          : std::uniform_int_distribution<std::size_t>(0, bound - 1)(rng);
    };
    auto random_byte = [&]() {
        if (pick(4) == 0) return static_cast<char>(pick(256));
        return kYamlSyntax[pick(kYamlSyntax.size())];
    };
    const std::size_t edits = 1 + pick(4);
    for (std::size_t edit = 0; edit < edits; ++edit) {
        const std::size_t at = pick(text.size() + 1);
        switch (pick(6)) {
            case 0:  // overwrite a byte
                if (at < text.size()) text[at] = random_byte();
                break;
            case 1:  // insert a byte
                text.insert(at, 1, random_byte());
                break;
            case 2:  // delete a short run
                text.erase(at, std::min<std::size_t>(1 + pick(8), text.size() - at));
                break;
            case 3: {  // duplicate a line elsewhere
                const std::size_t start = text.rfind('\n', at == 0 ? 0 : at - 1);
                const std::size_t line_start = start == std::string::npos ? 0 : start + 1;
                const std::size_t end = text.find('\n', line_start);
                const std::string line = text.substr(line_start, end - line_start) + "\n";
                text.insert(pick(text.size() + 1), line);
                break;
            }
            case 4:  // truncate
                text.resize(at);
                break;
            default:  // replace a value-ish byte run with another word
                text.insert(at, pick(2) ? "cuda" : "  ");
                break;
        }
    }
    return text;
}

void require_config_or_positioned_error(const ferrox::Expected<ferrox::Config>& result,
                                        std::string_view source) {
    if (result) {
        REQUIRE_FALSE(result->backend_order.empty());
        REQUIRE(result->backends.size() == result->backend_order.size());
        return;
    }
    static const std::regex kPositioned(R"(^[^:]+:[1-9][0-9]*:[1-9][0-9]*: \S)");
    INFO("error: " << result.error().message());
    // Under `ulimit -v`, a runaway parser shows up here rather than as an OOM kill.
    REQUIRE(result.error().message().find("bad_alloc") == std::string::npos);
    REQUIRE(result.error().message().rfind(std::string(source), 0) == 0);
    REQUIRE(std::regex_search(result.error().message(), kPositioned));
}

}  // namespace

TEST_CASE("random mutations of the shipped file never crash and errors carry a position") {
    const std::string shipped = ferrox::test::read_file(FERROX_SHIPPED_CONFIG);
    // FERROX_TEST_SEED=<n> replays a printed seed.
    const char* replay = std::getenv("FERROX_TEST_SEED");
    const std::uint64_t seed =
        replay ? std::strtoull(replay, nullptr, 10) : std::random_device{}() | 1;
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    std::size_t accepted = 0;
    constexpr int kRounds = 3000;
    for (int round = 0; round < kRounds; ++round) {
        const std::string mutated = mutate(shipped, rng);
        INFO("seed " << seed << ", round " << round << ", input:\n" << mutated);
        const auto result = ferrox::parse_config(mutated, "fuzz.yaml");
        require_config_or_positioned_error(result, "fuzz.yaml");
        if (result) ++accepted;
    }
    // Many mutations land in comments; some must also break the file.
    CHECK(accepted > 0);
    CHECK(accepted < kRounds);
}

TEST_CASE("hostile shapes give an error, not a crash") {
    const std::vector<std::string> inputs{
        std::string(100000, '['),
        "cpu: " + std::string(50000, '{'),
        std::string(20000, '-') + " x",
        std::string("cpu:\0  threads: 1\n", 18),
        "\xff\xfe\x00\x01",
        "&a [*a]",
        "cpu: *undefined_alias\n",
        "cpu: &anchor {threads: 1}\ncuda: *anchor\n",
        "? cpu\n: threads\n",
        "%YAML 9.9\n---\ncpu: {}\n",
        "!!binary cpu: 1\n",
        std::string(5000, '\n') + "bad: key\n",
        // Each of these made yaml-cpp 0.7's LoadAll allocate until the OOM killer came.
        ",",
        "# comment\n, and more\n",
        "!,",
        "&a ,",
        "cpu:\n  threads: 1\n---\n,\n",
    };
    for (const std::string& input : inputs) {
        INFO("input starts: " << input.substr(0, 40));
        require_config_or_positioned_error(ferrox::parse_config(input, "hostile.yaml"),
                                           "hostile.yaml");
    }
}
