// API keys: the file format, the Bearer and x-api-key headers, constant-time equality.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "auth.h"

using namespace ferrox::server;

TEST_CASE("constant_time_equal agrees with == on equal, different and prefix strings") {
    CHECK(constant_time_equal("secret", "secret"));
    CHECK_FALSE(constant_time_equal("secreT", "secret"));
    CHECK_FALSE(constant_time_equal("secre", "secret"));
    CHECK_FALSE(constant_time_equal("secrets", "secret"));
    CHECK_FALSE(constant_time_equal("", "secret"));
    CHECK(constant_time_equal("", ""));
}

TEST_CASE("authorized wants 'Bearer <one of the keys>' and is open without keys") {
    const std::vector<std::string> keys{"k1", "key-two"};
    CHECK(authorized(keys, "Bearer k1"));
    CHECK(authorized(keys, "Bearer key-two"));
    CHECK_FALSE(authorized(keys, "Bearer k2"));
    CHECK_FALSE(authorized(keys, "bearer k1"));
    CHECK_FALSE(authorized(keys, "k1"));
    CHECK_FALSE(authorized(keys, ""));
    CHECK(authorized({}, ""));
}

TEST_CASE("x-api-key carries a key as is when there is no Authorization header") {
    const std::vector<std::string> keys{"k1", "key-two"};
    CHECK(matching_key(keys, "", "key-two") == 1);
    CHECK(matching_key(keys, "", "k1") == 0);
    CHECK(matching_key(keys, "", "Bearer k1") == -1);  // Anthropic's header has no scheme
    CHECK(matching_key(keys, "", "k2") == -1);
    CHECK(matching_key(keys, "", "") == -1);
    // An Authorization header decides, whatever x-api-key says.
    CHECK(matching_key(keys, "Bearer k1", "key-two") == 0);
    CHECK(matching_key(keys, "Bearer wrong", "k1") == -1);
    CHECK(matching_key({}, "", "") == 0);
}

TEST_CASE("load_api_keys reads one key a line, skips comments, refuses an empty file") {
    const auto dir = std::filesystem::temp_directory_path() / "ferrox_test_auth";
    std::filesystem::create_directories(dir);
    {
        std::ofstream(dir / "keys") << "# ops keys\n\n  alpha  \r\nbeta\n";
        std::ofstream(dir / "empty") << "# nothing\n\n";
    }
    auto keys = load_api_keys((dir / "keys").string());
    REQUIRE(keys.has_value());
    CHECK(*keys == std::vector<std::string>{"alpha", "beta"});
    auto empty = load_api_keys((dir / "empty").string());
    REQUIRE_FALSE(empty.has_value());
    CHECK(empty.error().message().find("holds no key") != std::string::npos);
    CHECK_FALSE(load_api_keys((dir / "missing").string()).has_value());
    std::filesystem::remove_all(dir);
}
