// ferrox/c_boundary.h: what an exception escaping a C entry's body becomes
// (the plugins' guarded() and the C API's catch_all).
#include <catch2/catch.hpp>
#include <new>
#include <stdexcept>
#include <string>

#include "ferrox/c_boundary.h"

using namespace ferrox;

TEST_CASE("guarded passes a body's status through and leaves the message alone") {
    ferrox_message m{};
    std::snprintf(m.text, sizeof m.text, "untouched");
    CHECK(guarded("cpu", &m, [] { return FERROX_ERR_UNSUPPORTED; }) == FERROX_ERR_UNSUPPORTED);
    CHECK(std::string(m.text) == "untouched");
}

TEST_CASE("guarded turns an escaping exception into a status and a message naming the plugin") {
    ferrox_message m{};
    CHECK(guarded("cpu", &m, []() -> ferrox_status { throw std::bad_alloc(); }) ==
          FERROX_ERR_OUT_OF_MEMORY);
    CHECK(std::string(m.text) == "cpu: out of host memory");

    CHECK(guarded("cuda", &m, []() -> ferrox_status { throw std::runtime_error("bad row"); }) ==
          FERROX_ERR_INTERNAL);
    CHECK(std::string(m.text) == "cuda: internal error: bad row");

    CHECK(guarded("resident add", &m, []() -> ferrox_status { throw 42; }) == FERROX_ERR_INTERNAL);
    CHECK(std::string(m.text) == "resident add: internal error (unknown exception)");

    // No message buffer: still a status, nothing written anywhere.
    CHECK(guarded("cpu", nullptr, []() -> ferrox_status { throw std::logic_error("x"); }) ==
          FERROX_ERR_INTERNAL);
}

TEST_CASE("catch_all hands on_escape what escaped, and write_message cuts to the capacity") {
    const auto kind_of = [](auto&& body) {
        return catch_all(body, [](const Escaped& e) {
            return std::string(e.what) + "/" + std::to_string(int(e.kind));
        });
    };
    CHECK(kind_of([]() -> std::string { return "ran"; }) == "ran");
    CHECK(kind_of([]() -> std::string { throw std::invalid_argument("arg"); }) ==
          "arg/" + std::to_string(int(Escaped::Exception)));
    CHECK(kind_of([]() -> std::string { throw "c string"; }) ==
          "/" + std::to_string(int(Escaped::Unknown)));

    ferrox_message m{};
    const std::string long_text(2 * sizeof m.text, 'x');
    write_message(&m, long_text);
    CHECK(std::string(m.text) == long_text.substr(0, sizeof m.text - 1));
    write_message(nullptr, "ignored");  // allowed
}
