// Where the configuration comes from: --config, $FERROX_CONFIG, XDG, sysconfdir,
// built-in default, in that order.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config_test_support.h"
#include "ferrox/config.h"

namespace {

namespace fs = std::filesystem;
using ferrox::test::ScopedEnv;
using ferrox::test::TempDir;
using ferrox::test::write_file;

// A sandbox: XDG and sysconfdir inside a temp folder, FERROX_CONFIG unset, so the
// host's own ~/.config and /etc never leak in.
struct LookupSandbox {
    TempDir dir;
    fs::path xdg = dir.path() / "xdg";
    fs::path etc = dir.path() / "etc";
    ScopedEnv no_ferrox_config{"FERROX_CONFIG", std::nullopt};
    ScopedEnv xdg_home{"XDG_CONFIG_HOME", xdg.string()};

    fs::path user_file() const { return xdg / "ferrox" / "ferrox.yaml"; }
    fs::path system_file() const { return etc / "ferrox" / "ferrox.yaml"; }
    ferrox::ConfigSearch search() const { return {std::nullopt, etc}; }
};

std::string loaded_level(const ferrox::Expected<ferrox::Config>& config) {
    if (!config) FAIL("unexpected error: " << config.error().message());
    return config->log_level;
}

}  // namespace

TEST_CASE("the candidates are the XDG file, then the system file") {
    LookupSandbox sandbox;
    CHECK(ferrox::config_candidates(sandbox.search()) ==
          std::vector<fs::path>{sandbox.user_file(), sandbox.system_file()});
}

TEST_CASE("without XDG_CONFIG_HOME the user file is under ~/.config") {
    LookupSandbox sandbox;
    ScopedEnv home("HOME", sandbox.dir.path().string());
    for (const std::optional<std::string>& xdg :
         {std::optional<std::string>(), std::optional<std::string>(""),
          std::optional<std::string>("relative/is/ignored")}) {
        ScopedEnv xdg_home("XDG_CONFIG_HOME", xdg);
        CHECK(ferrox::config_candidates(sandbox.search()) ==
              std::vector<fs::path>{sandbox.dir.path() / ".config" / "ferrox" / "ferrox.yaml",
                                    sandbox.system_file()});
    }
}

TEST_CASE("the system folder defaults to the compiled-in sysconfdir") {
    LookupSandbox sandbox;
    const auto candidates = ferrox::config_candidates(ferrox::ConfigSearch{});
    REQUIRE(candidates.size() == 2);
    CHECK(candidates[1] == ferrox::default_sysconfdir() / "ferrox" / "ferrox.yaml");
    CHECK(ferrox::default_sysconfdir().is_absolute());
}

TEST_CASE("with no file anywhere the built-in default is used") {
    LookupSandbox sandbox;
    const auto config = ferrox::load_config(sandbox.search());
    CHECK(loaded_level(config) == "info");
    CHECK(config->source == "<built-in default>");
}

TEST_CASE("the system file is used when there is no user file") {
    LookupSandbox sandbox;
    write_file(sandbox.system_file(), "log: {level: error}\n");
    const auto config = ferrox::load_config(sandbox.search());
    CHECK(loaded_level(config) == "error");
    CHECK(config->source == sandbox.system_file().string());
}

TEST_CASE("the user file wins over the system file, which is then not read") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log: {level: debug}\n");
    write_file(sandbox.system_file(), "this: is: not: valid: yaml\n");
    CHECK(loaded_level(ferrox::load_config(sandbox.search())) == "debug");
}

TEST_CASE("FERROX_CONFIG wins over the user and system files") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log: {level: debug}\n");
    write_file(sandbox.system_file(), "log: {level: error}\n");
    const fs::path named = sandbox.dir.path() / "named.yaml";
    write_file(named, "log: {level: warn}\n");
    ScopedEnv env("FERROX_CONFIG", named.string());
    CHECK(ferrox::config_candidates(sandbox.search()) == std::vector<fs::path>{named});
    CHECK(loaded_level(ferrox::load_config(sandbox.search())) == "warn");
}

TEST_CASE("an empty FERROX_CONFIG counts as unset") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log: {level: debug}\n");
    ScopedEnv env("FERROX_CONFIG", "");
    CHECK(loaded_level(ferrox::load_config(sandbox.search())) == "debug");
}

TEST_CASE("the file named by --config wins over FERROX_CONFIG and everything else") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log: {level: debug}\n");
    const fs::path from_env = sandbox.dir.path() / "env.yaml";
    const fs::path from_flag = sandbox.dir.path() / "flag.yaml";
    write_file(from_env, "log: {level: warn}\n");
    write_file(from_flag, "log: {level: trace}\n");
    ScopedEnv env("FERROX_CONFIG", from_env.string());
    const ferrox::ConfigSearch search{from_flag, sandbox.etc};
    CHECK(ferrox::config_candidates(search) == std::vector<fs::path>{from_flag});
    CHECK(loaded_level(ferrox::load_config(search)) == "trace");
}

TEST_CASE("a missing file named by --config is an error, not a fallback") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log: {level: debug}\n");
    const fs::path missing = sandbox.dir.path() / "missing.yaml";
    const auto config = ferrox::load_config({missing, sandbox.etc});
    REQUIRE_FALSE(config.has_value());
    CHECK(config.error().message() ==
          missing.string() + ": the configuration file named by --config does not exist");
}

TEST_CASE("a missing file named by FERROX_CONFIG is an error, not a fallback") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log: {level: debug}\n");
    const fs::path missing = sandbox.dir.path() / "missing.yaml";
    ScopedEnv env("FERROX_CONFIG", missing.string());
    const auto config = ferrox::load_config(sandbox.search());
    REQUIRE_FALSE(config.has_value());
    CHECK(config.error().message() ==
          missing.string() + ": the configuration file named by $FERROX_CONFIG does not exist");
}

TEST_CASE("an invalid user file is an error and the system file is not tried instead") {
    LookupSandbox sandbox;
    write_file(sandbox.user_file(), "log:\n  level: loud\n");
    write_file(sandbox.system_file(), "log: {level: error}\n");
    const auto config = ferrox::load_config(sandbox.search());
    REQUIRE_FALSE(config.has_value());
    CHECK(config.error().message().rfind(sandbox.user_file().string() + ":2:10: ", 0) == 0);
}

TEST_CASE("environment variables are restored after a test changes them") {
    // Guards the scaffolding the other lookup tests rely on.
    const std::optional<std::string> before =
        std::getenv("XDG_CONFIG_HOME") ? std::optional<std::string>(std::getenv("XDG_CONFIG_HOME"))
                                       : std::nullopt;
    {
        ScopedEnv changed("XDG_CONFIG_HOME", "/somewhere/else");
        CHECK(std::string(std::getenv("XDG_CONFIG_HOME")) == "/somewhere/else");
    }
    const char* after = std::getenv("XDG_CONFIG_HOME");
    CHECK(before.has_value() == (after != nullptr));
    if (before && after) CHECK(*before == after);
}
