// The JSON depth pre-check (stop strings are tested with the output stage,
// tests/output/test_stop_strings.cpp).
#include <catch2/catch.hpp>
#include <string>

#include "openai_api.h"

using namespace ferrox::server;

TEST_CASE("json_depth counts brackets outside strings only") {
    CHECK(json_depth("{}") == 1);
    CHECK(json_depth(R"({"a": [[1], {"b": []}]})") == 4);
    CHECK(json_depth(R"({"a": "[[[[[[[[\"]]]]"})") == 1);
    CHECK(json_depth(std::string(100, '[') + std::string(100, ']')) == 100);
    CHECK(json_depth("") == 0);
}
