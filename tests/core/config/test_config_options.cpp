// A backend section checked against the options its plugin declares (ABI 1.6):
// every error names where the value came from, the key and the range.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "config_test_support.h"
#include "ferrox/config.h"

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;
using ferrox::OptionSpec;

// Declarations shaped like a CPU-ish and a GPU-ish plugin's (the test's own: the
// core keeps no copy of any plugin's rules).
const std::vector<OptionSpec> kCpuLike{
    {"threads", FERROX_OPTION_INTEGER, 0, 1024, {}, "0", "Threads."},
    {"isa", FERROX_OPTION_CHOICE, 0, 0, {"auto", "portable", "avx2", "avx512"}, "auto", "Path."}};
const std::vector<OptionSpec> kGpuLike{
    {"device", FERROX_OPTION_INTEGER, 0, 63, {}, "0", "Device."},
    {"vram_budget", FERROX_OPTION_BYTES, 0, std::numeric_limits<int64_t>::max(), {}, "0", "VRAM."},
    {"pinned", FERROX_OPTION_BOOL, 0, 0, {}, std::nullopt, "Pinned."}};

// The file holds `section` (a cpu: or cuda: map) after a backends.order listing both.
ferrox::Expected<Options> apply(std::string_view section) {
    const std::string text = "backends:\n  order: [cpu, cuda]\n" + std::string(section);
    auto config = ferrox::parse_config(text, "bad.yaml");
    if (!config) FAIL("unexpected parse error: " << config.error().message());
    const bool cpu = section.substr(0, 4) == "cpu:";
    return ferrox::apply_option_schema(*config->backend(cpu ? "cpu" : "cuda"),
                                       cpu ? kCpuLike : kGpuLike);
}

std::string error_of(std::string_view section) {
    auto options = apply(section);
    if (options) FAIL("expected an error for:\n" << section);
    return options.error().message();
}

}  // namespace

TEST_CASE("declared options are normalised in file order, then the declared defaults follow") {
    const auto cpu = apply("cpu:\n  isa: avx2\n  threads: '+2'\n");
    REQUIRE(cpu.has_value());
    CHECK(*cpu == Options{{"isa", "avx2"}, {"threads", "2"}});
    const auto cuda = apply("cuda:\n  vram_budget: \"8 GiB\"\n  pinned: TRUE\n");
    REQUIRE(cuda.has_value());
    // pinned declares no default: nothing is invented for it when the file is silent.
    CHECK(*cuda == Options{{"vram_budget", "8589934592"}, {"pinned", "true"}, {"device", "0"}});
    const auto silent = apply("cuda:\n  device: 1\n");
    REQUIRE(silent.has_value());
    CHECK(*silent == Options{{"device", "1"}, {"vram_budget", "0"}});
}

TEST_CASE("vram_budget-like sizes accept bytes and IEC units") {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"0", "0"},       {"12345", "12345"}, {"512MiB", "536870912"},  {"\"8 GiB\"", "8589934592"},
        {"1kib", "1024"}, {"3B", "3"},        {"2TiB", "2199023255552"}};
    for (const auto& [written, bytes] : cases) {
        INFO("vram_budget: " << written);
        const auto options = apply("cuda:\n  vram_budget: " + written + "\n");
        REQUIRE(options.has_value());
        CHECK(options->front() == std::pair<std::string, std::string>{"vram_budget", bytes});
    }
}

TEST_CASE("an undeclared key is named where it was written, with a did-you-mean") {
    CHECK(error_of("cpu:\n  thread: 2\n") ==
          "bad.yaml:4:3: unknown key 'thread' in section 'cpu'; did you mean 'threads'?");
    CHECK(error_of("cuda:\n  vram_budgte: 1\n") ==
          "bad.yaml:4:3: unknown key 'vram_budgte' in section 'cuda'; did you mean "
          "'vram_budget'?");
    CHECK(error_of("cpu:\n  Required: true\n") ==
          "bad.yaml:4:3: unknown key 'Required' in section 'cpu'; did you mean 'required'?");
    CHECK(error_of("cpu:\n  numa_policy: interleave\n") ==
          "bad.yaml:4:3: unknown key 'numa_policy' in section 'cpu'; valid keys are "
          "'required', 'threads', 'isa' (as the cpu plugin declares them)");
}

TEST_CASE("a value of the wrong kind names the key, the kind and what was found") {
    CHECK(error_of("cpu:\n  threads: two\n") ==
          "bad.yaml:4:12: cpu.threads must be an integer, got 'two'");
    CHECK(error_of("cpu:\n  threads: 2.5\n") ==
          "bad.yaml:4:12: cpu.threads must be an integer, got '2.5'");
    CHECK(error_of("cpu:\n  threads: 0x10\n") ==
          "bad.yaml:4:12: cpu.threads must be an integer, got '0x10'");
    CHECK(error_of("cpu:\n  threads: +-1\n") ==
          "bad.yaml:4:12: cpu.threads must be an integer, got '+-1'");
    CHECK(error_of("cuda:\n  pinned: yes\n") ==
          "bad.yaml:4:11: cuda.pinned must be true or false, got 'yes'");
    CHECK(error_of("cpu:\n  isa: sse9\n") ==
          "bad.yaml:4:8: cpu.isa must be one of 'auto', 'portable', 'avx2', 'avx512', got "
          "'sse9'");
    CHECK(error_of("cpu:\n  isa: avx3\n") ==
          "bad.yaml:4:8: cpu.isa must be one of 'auto', 'portable', 'avx2', 'avx512', got "
          "'avx3'; did you mean 'avx2'?");
}

TEST_CASE("an out-of-range value names the declared range") {
    CHECK(error_of("cpu:\n  threads: 2000\n") ==
          "bad.yaml:4:12: cpu.threads must be between 0 and 1024, got 2000");
    CHECK(error_of("cpu:\n  threads: -1\n") ==
          "bad.yaml:4:12: cpu.threads must be between 0 and 1024, got -1");
    CHECK(error_of("cuda:\n  device: 64\n") ==
          "bad.yaml:4:11: cuda.device must be between 0 and 63, got 64");
    CHECK(error_of("cpu:\n  threads: 99999999999999999999999\n") ==
          "bad.yaml:4:12: cpu.threads must be between 0 and 1024, got 99999999999999999999999");
    CHECK(error_of("cuda:\n  vram_budget: -5\n") ==
          "bad.yaml:4:16: cuda.vram_budget must be between 0 and 8EiB - 1, got -5");
    CHECK(error_of("cuda:\n  vram_budget: 20000000TiB\n") ==
          "bad.yaml:4:16: cuda.vram_budget must be between 0 and 8EiB - 1, got 20000000TiB");
    CHECK(error_of("cuda:\n  vram_budget: 9000000TiB\n") ==
          "bad.yaml:4:16: cuda.vram_budget must be between 0 and 8EiB - 1, got "
          "9895604649984000000");
}

TEST_CASE("a decimal size unit is refused with the IEC spelling suggested") {
    const std::string message = error_of("cuda:\n  vram_budget: 8GB\n");
    CHECK_THAT(message, Catch::StartsWith("bad.yaml:4:16: cuda.vram_budget must be a number of "
                                          "bytes"));
    CHECK_THAT(message, Catch::Contains("got '8GB'; did you mean '8GiB'?"));
    CHECK_THAT(error_of("cuda:\n  vram_budget: lots\n"), !Catch::Contains("did you mean"));
}

TEST_CASE("a value a flag set is named by the flag") {
    auto config = ferrox::parse_config("cpu:\n  threads: 2\n", "f.yaml");
    REQUIRE(config.has_value());
    ferrox::BackendConfig cpu = *config->backend("cpu");
    cpu.set_option("threads", "2000", "--threads");
    CHECK(cpu.options == Options{{"threads", "2000"}});
    const auto refused = ferrox::apply_option_schema(cpu, kCpuLike);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().message() ==
          "--threads: cpu.threads must be between 0 and 1024, got 2000");
}
