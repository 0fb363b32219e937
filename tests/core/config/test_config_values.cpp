// Valid files: what each key turns into.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "config_test_support.h"
#include "ferrox/config.h"

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

ferrox::Config parse_ok(std::string_view text) {
    auto config = ferrox::parse_config(text, "values.yaml");
    if (!config) FAIL("unexpected error: " << config.error().message());
    return std::move(*config);
}

}  // namespace

TEST_CASE("backends come out in backends.order with their own required defaults") {
    const ferrox::Config config = parse_ok("backends:\n  order: [cuda, cpu]\n");
    CHECK(config.backend_order == std::vector<std::string>{"cuda", "cpu"});
    REQUIRE(config.backends.size() == 2);
    CHECK(config.backends[0].name == "cuda");
    CHECK_FALSE(config.backends[0].required);
    // Defaults are the plugin's to declare: the loader adds them (test_plugin_options).
    CHECK(config.backends[0].options.empty());
    CHECK(config.backends[1].name == "cpu");
    CHECK(config.backends[1].required);
}

TEST_CASE("cpu and cuda options are kept as written, in file order, with where they were") {
    const ferrox::Config config = parse_ok(
        "backends:\n  order: [cpu, cuda]\n"
        "cpu:\n  required: false\n  threads: 2\n"
        "cuda:\n  vram_budget: 8GiB\n  device: 3\n  required: TRUE\n");
    const ferrox::BackendConfig* cpu = config.backend("cpu");
    REQUIRE(cpu != nullptr);
    CHECK_FALSE(cpu->required);
    CHECK(cpu->options == Options{{"threads", "2"}});
    const ferrox::BackendConfig* cuda = config.backend("cuda");
    REQUIRE(cuda != nullptr);
    CHECK(cuda->required);
    CHECK(cuda->options == Options{{"vram_budget", "8GiB"}, {"device", "3"}});
    REQUIRE(cuda->origins.size() == 2);
    CHECK(cuda->origins[0].key == "values.yaml:7:3");
    CHECK(cuda->origins[0].value == "values.yaml:7:16");
    CHECK(cuda->origins[1].value == "values.yaml:8:11");
}

TEST_CASE("a third-party backend section passes its options through in file order") {
    const ferrox::Config config = parse_ok(
        "backends:\n  order: [my_npu, cpu]\n"
        "my_npu:\n  zeta: last letter\n  required: true\n  alpha: 42\n  flag: false\n"
        "  quoted: \"a: b\"\n");
    const ferrox::BackendConfig* npu = config.backend("my_npu");
    REQUIRE(npu != nullptr);
    CHECK(npu->required);
    CHECK(npu->options ==
          Options{{"zeta", "last letter"}, {"alpha", "42"}, {"flag", "false"}, {"quoted", "a: b"}});
    CHECK(config.backends[0].name == "my_npu");
}

TEST_CASE("a third-party backend is optional by default and gets no invented options") {
    const ferrox::Config config = parse_ok("backends:\n  order: [cpu, vulkan2]\n");
    const ferrox::BackendConfig* other = config.backend("vulkan2");
    REQUIRE(other != nullptr);
    CHECK_FALSE(other->required);
    CHECK(other->options.empty());
}

TEST_CASE("a cuda section is accepted, but not opened, while backends.order leaves it out") {
    const ferrox::Config config = parse_ok("cuda:\n  device: 1\n");
    CHECK(config.backend("cuda") == nullptr);
    CHECK(config.backend_order == std::vector<std::string>{"cpu"});
}

TEST_CASE("registry.strict and log.level are read") {
    const ferrox::Config config = parse_ok("registry:\n  strict: true\nlog:\n  level: debug\n");
    CHECK(config.registry_strict);
    CHECK(config.log_level == "debug");
    for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
        CHECK(parse_ok(std::string("log: {level: ") + level + "}").log_level == level);
    }
}

TEST_CASE("empty sections keep every default") {
    const ferrox::Config config = parse_ok("plugins:\nbackends:\ncpu:\ncuda:\nregistry:\nlog:\n");
    CHECK(config.backend_order == std::vector<std::string>{"cpu"});
    CHECK(config.plugin_paths.empty());
    REQUIRE(config.backend("cpu") != nullptr);
    CHECK(config.backend("cpu")->required);
}

TEST_CASE("relative plugin paths are resolved against the config file's folder") {
    ferrox::test::TempDir dir;
    const auto file = dir.path() / "etc" / "ferrox.yaml";
    ferrox::test::write_file(file,
                             "plugins:\n  paths: [plugins, ../lib/extra, /opt/ferrox/plugins]\n");
    const auto config = ferrox::load_config_file(file);
    REQUIRE(config.has_value());
    CHECK(config->plugin_paths == std::vector<std::filesystem::path>{dir.path() / "etc" / "plugins",
                                                                     dir.path() / "lib" / "extra",
                                                                     "/opt/ferrox/plugins"});
}

TEST_CASE("parse_config anchors relative plugin paths to the folder of its source name") {
    const auto from_file = ferrox::parse_config("plugins:\n  paths: [p]\n", "conf/ferrox.yaml");
    REQUIRE(from_file.has_value());
    CHECK(from_file->plugin_paths == std::vector<std::filesystem::path>{"conf/p"});
    const auto from_stdin = ferrox::parse_config("plugins:\n  paths: [p]\n", "<stdin>");
    REQUIRE(from_stdin.has_value());
    CHECK(from_stdin->plugin_paths == std::vector<std::filesystem::path>{"p"});
}

TEST_CASE("the server section: every key, and its defaults") {
    const ferrox::Config d = parse_ok("server:\n");
    CHECK(d.server.host == "127.0.0.1");
    CHECK(d.server.port == 8080);
    CHECK(d.server.parallel == 4);
    const ferrox::Config c = parse_ok(
        "server:\n  host: 0.0.0.0\n  port: 0\n  parallel: 16\n  context: 2048\n"
        "  kv_type: f16\n  api_key_file: /etc/ferrox/keys\n  alias: gemma\n  max_queue: 8\n"
        "  request_timeout: 30\n  drain_timeout: 5\n  max_body_bytes: 1MiB\n");
    CHECK(c.server.host == "0.0.0.0");
    CHECK(c.server.port == 0);
    CHECK(c.server.parallel == 16);
    CHECK(c.server.context == 2048);
    CHECK(c.server.kv_type == "f16");
    CHECK(c.server.api_key_file == "/etc/ferrox/keys");
    CHECK(c.server.alias == "gemma");
    CHECK(c.server.max_queue == 8);
    CHECK(c.server.request_timeout == 30);
    CHECK(c.server.drain_timeout == 5);
    CHECK(c.server.max_body_bytes == (1u << 20));
}
