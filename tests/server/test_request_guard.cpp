// What a web page may make a local server do: Host, Origin, Content-Type.
#include <catch2/catch.hpp>

#include "memory_budget.h"
#include "request_guard.h"

using namespace ferrox::server;
namespace http = boost::beast::http;

namespace {
HttpRequest request(http::verb verb, std::initializer_list<std::pair<http::field, const char*>> h) {
    HttpRequest r{verb, "/v1/completions", 11};
    for (auto& [f, v] : h) r.set(f, v);
    return r;
}
int status_of(const HttpRequest& r, const GuardOptions& o) {
    auto refused = guard_request(r, o);
    return refused ? refused->status : 0;
}
}  // namespace

TEST_CASE("Host must be an IP literal, localhost, or an allowed name") {
    GuardOptions o;
    o.allowed_hosts = {"llm.example"};
    const auto get = [&](const char* host) {
        return status_of(request(http::verb::get, {{http::field::host, host}}), o);
    };
    CHECK(get("127.0.0.1:8080") == 0);
    CHECK(get("[::1]:8080") == 0);
    CHECK(get("localhost:8080") == 0);
    CHECK(get("LocalHost") == 0);
    CHECK(get("10.1.2.3") == 0);
    CHECK(get("llm.example:80") == 0);
    CHECK(get("attacker.example:8080") == 403);  // DNS rebinding
    CHECK(get("localhost.attacker.example") == 403);
}

TEST_CASE("Origin is refused unless cors_origin allows it") {
    GuardOptions none, one, any;
    one.cors_origin = "https://app.example";
    any.cors_origin = "*";
    const auto with_origin = [](const char* origin) {
        return request(http::verb::get,
                       {{http::field::host, "127.0.0.1"}, {http::field::origin, origin}});
    };
    CHECK(status_of(with_origin("https://evil.example"), none) == 403);
    CHECK(status_of(with_origin("null"), none) == 403);
    CHECK(status_of(with_origin("https://app.example"), one) == 0);
    CHECK(status_of(with_origin("https://evil.example"), one) == 403);
    CHECK(status_of(with_origin("https://evil.example"), any) == 0);
    CHECK(status_of(request(http::verb::get, {{http::field::host, "127.0.0.1"}}), none) == 0);
}

TEST_CASE("a POST body must be declared application/json") {
    GuardOptions o;
    const auto post = [&](const char* type) {
        return status_of(request(http::verb::post, {{http::field::host, "127.0.0.1"},
                                                    {http::field::content_type, type}}),
                         o);
    };
    CHECK(post("application/json") == 0);
    CHECK(post("Application/JSON; charset=utf-8") == 0);
    CHECK(post("text/plain") == 415);
    CHECK(post("application/x-www-form-urlencoded") == 415);
    CHECK(post("multipart/form-data; boundary=x") == 415);
    CHECK(status_of(request(http::verb::post, {{http::field::host, "127.0.0.1"}}), o) == 415);
}

TEST_CASE("cors_origin is checked as an origin") {
    CHECK(*checked_origin("") == "");
    CHECK(*checked_origin("*") == "*");
    CHECK(*checked_origin("HTTPS://App.Example:8443") == "https://app.example:8443");
    CHECK(*checked_origin("http://[::1]:3000") == "http://[::1]:3000");
    CHECK(!checked_origin("https://a.example\r\nSet-Cookie: x=1"));
    CHECK(!checked_origin("https://a.example/path"));
    CHECK(!checked_origin("ftp://a.example"));
    CHECK(!checked_origin("https://a.example:99999"));
    CHECK(!checked_origin("a.example"));
    CHECK(!checked_host_list("a.example, b c"));
    CHECK(*checked_host_list(" A.example ,b.example,") ==
          std::vector<std::string>{"a.example", "b.example"});
}

TEST_CASE("the request-memory budget charges, refuses past its total and returns") {
    MemoryBudget budget(100);
    auto a = budget.try_charge(60);
    CHECK(a.bytes() == 60);
    auto b = budget.try_charge(50);
    CHECK(b.bytes() == 0);  // 60 + 50 > 100
    a.shrink_to(10);
    CHECK(budget.in_use() == 10);
    auto c = budget.try_charge(90);
    CHECK(c.bytes() == 90);
    c.release();
    a = MemoryBudget::Charge();
    CHECK(budget.in_use() == 0);
}
