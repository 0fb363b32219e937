// The shipped config/ferrox.yaml and the built-in default say the same thing.
#include <string>
#include <utility>
#include <vector>

#include "config_test_support.h"
#include "ferrox/config.h"

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

// The documented defaults, written out by hand from the schema in the brief.
void require_documented_defaults(const ferrox::Config& config) {
    CHECK(config.plugin_paths.empty());
    CHECK_FALSE(config.plugins.allow_without_note);
    CHECK(config.plugins.create_timeout == 60);
    CHECK(config.backend_order == std::vector<std::string>{"cpu"});
    REQUIRE(config.backends.size() == 1);
    CHECK(config.backends[0].name == "cpu");
    CHECK(config.backends[0].required);
    CHECK_FALSE(config.registry_strict);
    CHECK(config.log_level == "info");
}

}  // namespace

TEST_CASE("the shipped config/ferrox.yaml parses to the documented defaults") {
    const auto config = ferrox::load_config_file(FERROX_SHIPPED_CONFIG);
    REQUIRE(config.has_value());
    CHECK(config->source == FERROX_SHIPPED_CONFIG);
    require_documented_defaults(*config);
    // Spelt out as written; that they are the CPU plugin's declared defaults is
    // test_plugin_options' to check.
    CHECK(config->backends[0].options == Options{{"threads", "0"}, {"isa", "auto"}});
}

TEST_CASE("the built-in default is the documented defaults") {
    const ferrox::Config config = ferrox::default_config();
    CHECK(config.source == "<built-in default>");
    require_documented_defaults(config);
    // No options: the loader adds the CPU plugin's declared defaults.
    CHECK(config.backends[0].options.empty());
}

TEST_CASE("an empty file, or one with only comments, means the built-in default") {
    for (const char* text : {"", "\n\n", "# nothing but a comment\n", "---\n", "~\n"}) {
        INFO("text: '" << text << "'");
        const auto config = ferrox::parse_config(text, "empty.yaml");
        REQUIRE(config.has_value());
        CHECK(config->source == "empty.yaml");
        require_documented_defaults(*config);
    }
}

TEST_CASE("every key of the shipped file has a comment right above it") {
    const std::string text = ferrox::test::read_file(FERROX_SHIPPED_CONFIG);
    for (const std::string key :
         {"  paths:", "  allow_without_note:", "  create_timeout:", "  order:", "  threads:",
          "  required:", "  device:", "  vram_budget:", "  strict:", "  level:"}) {
        INFO("key " << key);
        std::size_t at = text.find("\n" + key);
        REQUIRE(at != std::string::npos);
        while (at != std::string::npos) {
            const std::size_t line_start = text.rfind('\n', at - 1) + 1;
            const std::string previous_line = text.substr(line_start, at - line_start);
            CHECK(previous_line.find('#') != std::string::npos);
            at = text.find("\n" + key, at + 1);
        }
    }
}

TEST_CASE("Config::backend finds listed backends only") {
    const auto config = ferrox::parse_config("backends:\n  order: [cuda, cpu]\n", "t.yaml");
    REQUIRE(config.has_value());
    REQUIRE(config->backend("cuda") != nullptr);
    CHECK(config->backend("cuda")->name == "cuda");
    REQUIRE(config->backend("cpu") != nullptr);
    CHECK(config->backend("rocm") == nullptr);
}
