// Request bodies parse in one linear pass with their shape bounded.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>

#include "bounded_json.h"

using ferrox::server::JsonLimits;
using ferrox::server::parse_bounded_json;

namespace {
const JsonLimits kLimits{64, 1u << 18, 4096};

std::string wide_object(size_t members) {
    std::string s = "{";
    for (size_t i = 0; i < members; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    return s + "}";
}
}  // namespace

TEST_CASE("bounded JSON equals nlohmann's own parse, key order included") {
    std::mt19937 rng(20261206);
    std::string text = R"({"z":1,"a":[true,null,-3,2.5,"x\u00e9"],"m":{"q":{},"b":[]}})";
    const auto parsed = parse_bounded_json(text, kLimits);
    REQUIRE(parsed);
    CHECK(*parsed == nlohmann::ordered_json::parse(text));
    CHECK(parsed->begin().key() == "z");
    // Random flat objects too.
    for (int round = 0; round < 20; ++round) {
        std::string o = "{";
        const int n = 1 + int(rng() % 50);
        for (int i = 0; i < n; ++i)
            o += (i ? "," : "") + ("\"" + std::to_string(rng()) + "_" + std::to_string(i) + "\":") +
                 std::to_string(int(rng() % 1000) - 500);
        o += "}";
        const auto p = parse_bounded_json(o, kLimits);
        REQUIRE(p);
        CHECK(*p == nlohmann::ordered_json::parse(o));
    }
}

TEST_CASE("depth, value count, object width and duplicate keys are refused by name") {
    const auto deep =
        parse_bounded_json(std::string(100000, '[') + std::string(100000, ']'), kLimits);
    REQUIRE(!deep);
    CHECK(deep.error().message() == "JSON nested deeper than 64 levels");

    std::string many = "[";
    for (size_t i = 0; i < (1u << 18) + 5; ++i) many += i ? ",7" : "7";
    const auto values = parse_bounded_json(many + "]", kLimits);
    REQUIRE(!values);
    CHECK(values.error().message() == "the body holds more than 262144 JSON values");

    const auto wide = parse_bounded_json(R"({"a":)" + wide_object(5000) + "}", kLimits);
    REQUIRE(!wide);
    CHECK(wide.error().message() == "the object at '/a' has more than 4096 members");

    const auto twice = parse_bounded_json(R"({"a":{"b":1,"b":2}})", kLimits);
    REQUIRE(!twice);
    CHECK(twice.error().message() == "the key 'b' appears twice in the object at '/a'");

    const auto broken = parse_bounded_json(R"({"a": [1, 2)", kLimits);
    REQUIRE(!broken);
    CHECK(broken.error().message().find("malformed JSON at byte") == 0);
}

TEST_CASE("a wide object parses in time linear in its size") {
    // nlohmann's ordered_json checks every key against the earlier ones
    // (4096^2/2 compares an object). Measured as a ratio, so that a loaded
    // machine slows both alike: the same bytes as 60 objects of 4096 members
    // and as 480 of 512 must parse in about the same time (quadratic: 8x).
    const auto body_of = [](int objects, int members) {
        std::string body = "[";
        for (int i = 0; i < objects; ++i) body += (i ? "," : "") + wide_object(members);
        return body + "]";
    };
    const std::string wide = body_of(60, 4096), narrow = body_of(480, 512);
    const auto fastest = [](const std::string& body, size_t objects) {
        double best = 1e9;
        for (int run = 0; run < 3; ++run) {
            const auto t0 = std::chrono::steady_clock::now();
            const auto parsed = parse_bounded_json(body, kLimits);
            const auto t1 = std::chrono::steady_clock::now();
            REQUIRE(parsed);
            CHECK(parsed->size() == objects);
            best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
        }
        return best;
    };
    const double t_wide = fastest(wide, 60), t_narrow = fastest(narrow, 480);
    INFO("wide " << t_wide << " s, narrow " << t_narrow << " s, " << wide.size() << " and "
                 << narrow.size() << " bytes");
    CHECK(t_wide < 3 * t_narrow);
}
