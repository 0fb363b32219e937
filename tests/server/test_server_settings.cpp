// The server section's settings table is the one declaration of each
// setting: docs/config.md shows it, and the file and the flags read through it.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "ferrox/config.h"
#include "ferrox/server_settings.h"

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("docs/config.md's server table is the one the settings table renders") {
    const std::string docs = read_text(FERROX_TEST_DATA_DIR "/../../docs/config.md");
    REQUIRE(!docs.empty());
    const std::string table = ferrox::server_settings_markdown();
    INFO("docs/config.md must hold, under ### `server`, exactly:\n" << table);
    CHECK(docs.find(table) != std::string::npos);
}

TEST_CASE("every setting is found by its key, has a flag and help, and takes its extreme") {
    for (const ferrox::ServerSetting& s : ferrox::server_settings()) {
        INFO(s.key);
        CHECK(ferrox::find_server_setting(s.key) == &s);
        CHECK(!s.help.empty());
        CHECK(s.flags.find("--") != std::string_view::npos);
        // Its largest value (or its last choice, or true) is accepted.
        ferrox::ServerConfig changed;
        REQUIRE(ferrox::set_server_setting(changed, s,
                                           s.kind == ferrox::SettingKind::Switch ? "true"
                                           : s.kind == ferrox::SettingKind::Choice
                                               ? std::string(s.choices.back())
                                               : std::to_string(s.max ? s.max : 1)));
        CHECK(!ferrox::server_setting_default(s).empty());
    }
    // + checkpoint_memory, kv_type_k, kv_type_v, model_draft
    CHECK(ferrox::server_settings().size() == 31);
}

TEST_CASE("a setting's text is checked by its kind and range, naming the key") {
    ferrox::ServerConfig c;
    const auto* port = ferrox::find_server_setting("port");
    REQUIRE(port);
    CHECK(ferrox::set_server_setting(c, *port, "8081"));
    CHECK(c.port == 8081);
    auto bad = ferrox::set_server_setting(c, *port, "70000");
    REQUIRE(!bad);
    CHECK(bad.error().message() == "server.port must be between 0 and 65535, got 70000");
    const auto* memory = ferrox::find_server_setting("request_memory");
    REQUIRE(memory);
    CHECK(ferrox::set_server_setting(c, *memory, "64MiB"));
    CHECK(c.request_memory == (64u << 20));
    auto small = ferrox::set_server_setting(c, *memory, "1MiB");
    REQUIRE(!small);
    CHECK(small.error().message().find("between 16MiB and 1TiB") != std::string::npos);
    const auto* open = ferrox::find_server_setting("insecure_open");
    REQUIRE(open);
    CHECK(ferrox::set_server_setting(c, *open, "true"));
    CHECK(c.insecure_open);
    CHECK(!ferrox::set_server_setting(c, *open, "yes"));
}

TEST_CASE("the new keys read from the file") {
    auto config = ferrox::parse_config(
        "server:\n  idle_timeout: 7\n  max_connections: 9\n  max_client_connections: 3\n"
        "  request_memory: 32MiB\n  allowed_hosts: a.example\n  insecure_open: true\n",
        "t.yaml");
    REQUIRE(config);
    CHECK(config->server.idle_timeout == 7);
    CHECK(config->server.max_connections == 9);
    CHECK(config->server.max_client_connections == 3);
    CHECK(config->server.request_memory == (32u << 20));
    CHECK(config->server.allowed_hosts == "a.example");
    CHECK(config->server.insecure_open);
    auto bad = ferrox::parse_config("server:\n  max_connections: 1\n", "t.yaml");
    REQUIRE(!bad);
    CHECK(bad.error().message() ==
          "t.yaml:2:20: server.max_connections must be between 2 and "
          "65536, got 1");
}

TEST_CASE("reasoning_budget takes -1 (unlimited) and 0, and refuses below -1 naming the key") {
    ferrox::ServerConfig c;
    CHECK(c.reasoning_budget == -1);
    const auto* budget = ferrox::find_server_setting("reasoning_budget");
    REQUIRE(budget);
    CHECK(ferrox::set_server_setting(c, *budget, "0"));
    CHECK(c.reasoning_budget == 0);
    CHECK(ferrox::set_server_setting(c, *budget, "-1"));
    CHECK(c.reasoning_budget == -1);
    CHECK(ferrox::set_server_setting(c, *budget, "37"));
    CHECK(c.reasoning_budget == 37);
    auto bad = ferrox::set_server_setting(c, *budget, "-2");
    REQUIRE(!bad);
    CHECK(bad.error().message() ==
          "server.reasoning_budget must be between -1 and 1048576, got -2");
    CHECK(c.reasoning_budget == 37);
    CHECK(ferrox::server_setting_default(*budget) == "-1");
}
