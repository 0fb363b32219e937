// The pieces of the server's traces (docs/operations.md, "Traces"): W3C
// traceparent parsing, OTLP's JSON encoding, a request's span tree and the
// exporter's bounded queue. tests/server/test_traces.py runs them end to end.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "otlp_exporter.h"
#include "request_spans.h"
#include "trace_context.h"

using namespace ferrox::server;

namespace {

std::mt19937 rng(38);

std::string random_hex(size_t digits) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s;
    while (s.size() < digits) s += kDigits[rng() % 16];
    if (s.find_first_not_of('0') == std::string::npos) s.back() = '7';  // never all zero
    return s;
}

// A loopback port nothing listens on.
uint16_t closed_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("traceparent: a valid header is read, a malformed one is none") {
    const std::string trace = random_hex(32), parent = random_hex(16);
    const auto ok = parse_traceparent("00-" + trace + "-" + parent + "-01");
    REQUIRE(ok);
    CHECK(hex_id(ok->trace_id) == trace);
    CHECK(hex_id(ok->span_id) == parent);
    CHECK(ok->sampled);
    CHECK(format_traceparent(*ok) == "00-" + trace + "-" + parent + "-01");
    const auto quiet = parse_traceparent("00-" + trace + "-" + parent + "-00");
    REQUIRE(quiet);
    CHECK_FALSE(quiet->sampled);
    // A later version may carry more after a '-'.
    CHECK(parse_traceparent("01-" + trace + "-" + parent + "-01-more"));

    std::string upper = trace;
    upper[0] = 'A';
    upper[1] = 'F';
    for (const std::string& bad :
         {"00-" + upper + "-" + parent + "-01",                 // uppercase hex
          "00-" + std::string(32, '0') + "-" + parent + "-01",  // all-zero trace id
          "00-" + trace + "-" + std::string(16, '0') + "-01",   // all-zero parent id
          "ff-" + trace + "-" + parent + "-01",                 // the forbidden version
          "00-" + trace + "-" + parent + "-01-more",            // version 00 is 55 bytes
          "01-" + trace + "-" + parent + "-01more",             // more without '-'
          "00-" + trace + "-" + parent.substr(1) + "-01",       // short parent id
          "00_" + trace + "-" + parent + "-01",                 // wrong separator
          "00-" + trace + "-" + parent + "-0g",                 // flags not hex
          std::string(""), std::string("garbage")}) {
        INFO(bad);
        CHECK_FALSE(parse_traceparent(bad));
    }
}

TEST_CASE("new ids are random and never zero") {
    const TraceId a = new_trace_id(), b = new_trace_id();
    CHECK(a != b);
    CHECK(hex_id(a) != std::string(32, '0'));
    CHECK(hex_id(new_span_id()).size() == 16);
}

TEST_CASE("a request's spans: the request, its phases and its prefill chunks") {
    HttpRequest request;
    const std::string trace = random_hex(32), parent = random_hex(16);
    request.set("traceparent", "00-" + trace + "-" + parent + "-01");
    const RequestTrace t = start_request_trace(request);
    REQUIRE(hex_id(t.self.trace_id) == trace);
    REQUIRE(t.parent);
    REQUIRE(hex_id(*t.parent) == parent);

    using std::chrono::milliseconds;
    GenerationRecord g;
    g.arrival = t.start + milliseconds(1);
    g.admitted = t.start + milliseconds(3);
    for (int i = 0; i < 3; ++i)
        g.chunks.push_back({*g.admitted + milliseconds(2 * i),
                            *g.admitted + milliseconds(2 * i + 1), uint32_t(100 + i)});
    g.chunk_count = 3;
    g.first_token = t.start + milliseconds(9);
    g.finished = t.start + milliseconds(20);
    g.prompt_tokens = 303;
    g.completion_tokens = 7;
    g.max_tokens = 16;
    g.finish_reason = "length";
    RequestFacts f{"POST", "/v1/completions", "text_completion", "req-1", "tiny", 200, g};
    const auto spans = request_spans(t, f, t.start + milliseconds(25));
    REQUIRE(spans.size() == 7);  // request, queue, prefill, 3 chunks, decode
    const Span& root = spans[0];
    CHECK(root.name == "POST /v1/completions");
    CHECK(root.kind == Span::Kind::Server);
    CHECK(root.span_id == t.self.span_id);
    CHECK(root.end_unix_ns - root.start_unix_ns == 25'000'000);
    std::map<std::string, int> names;
    SpanId prefill{};
    for (const Span& s : spans) {
        CHECK(s.trace_id == t.self.trace_id);
        ++names[s.name];
        if (s.name == "prefill") prefill = s.span_id;
    }
    CHECK(names == std::map<std::string, int>{{"POST /v1/completions", 1},
                                              {"queue", 1},
                                              {"prefill", 1},
                                              {"prefill chunk", 3},
                                              {"decode", 1}});
    for (const Span& s : spans) {
        if (&s == &root) continue;
        INFO(s.name);
        CHECK(s.kind == Span::Kind::Internal);
        REQUIRE(s.parent);
        CHECK(*s.parent == (s.name == "prefill chunk" ? prefill : root.span_id));
        CHECK(s.start_unix_ns >= root.start_unix_ns);
        CHECK(s.end_unix_ns <= root.end_unix_ns);
    }
    // A 5xx marks the request span an error; a 4xx does not.
    f.status = 503;
    CHECK(request_spans(t, f, t.start)[0].error);
    f.status = 429;
    CHECK_FALSE(request_spans(t, f, t.start)[0].error);
}

TEST_CASE("OTLP JSON: ids as hex, integers and times as strings, kinds as numbers") {
    Span s;
    s.trace_id = new_trace_id();
    s.span_id = new_span_id();
    s.parent = new_span_id();
    s.name = "decode";
    s.kind = Span::Kind::Server;
    s.start_unix_ns = 1'700'000'000'123'456'789ULL;
    s.end_unix_ns = s.start_unix_ns + 5;
    s.attributes = {
        {"a", std::string("x")}, {"n", int64_t(42)}, {"l", std::vector<std::string>{"stop"}}};
    s.error = true;
    s.status_message = "boom";
    const auto j = nlohmann::json::parse(otlp_json(std::vector<Span>{s}, "svc"));
    const auto& rs = j.at("resourceSpans").at(0);
    CHECK(rs.at("resource").at("attributes").at(0) ==
          nlohmann::json::parse(R"({"key":"service.name","value":{"stringValue":"svc"}})"));
    const auto& span = rs.at("scopeSpans").at(0).at("spans").at(0);
    CHECK(span.at("traceId") == hex_id(s.trace_id));
    CHECK(span.at("spanId") == hex_id(s.span_id));
    CHECK(span.at("parentSpanId") == hex_id(*s.parent));
    CHECK(span.at("kind") == 2);
    CHECK(span.at("startTimeUnixNano") == "1700000000123456789");
    CHECK(span.at("endTimeUnixNano") == "1700000000123456794");
    CHECK(span.at("attributes").at(1).at("value").at("intValue") == "42");
    CHECK(span.at("attributes")
              .at(2)
              .at("value")
              .at("arrayValue")
              .at("values")
              .at(0)
              .at("stringValue") == "stop");
    CHECK(span.at("status").at("code") == 2);
}

TEST_CASE("the exporter drops what does not fit, and counts failed POSTs") {
    const auto make = [](size_t n) {
        std::vector<Span> v(n);
        for (Span& s : v) s.trace_id = new_trace_id(), s.span_id = new_span_id();
        return v;
    };
    TraceExportOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1/traces";
    SECTION("a full queue drops whole requests; the shutdown drops what it has no time for") {
        TraceCounters counters;
        o.max_queue = 10;
        o.max_batch = 100;  // never full: nothing is sent before the interval
        o.interval = std::chrono::hours(1);
        TraceExporter exporter(o, counters);
        for (int i = 0; i < 4; ++i) exporter.export_spans(make(3));  // the 4th does not fit
        CHECK(counters.dropped == 3);
        exporter.flush_and_stop(std::chrono::steady_clock::now());
        CHECK(counters.dropped == 12);
        exporter.export_spans(make(2));  // after the stop
        CHECK(counters.dropped == 14);
        CHECK(counters.exported + counters.failed == 0);
    }
    SECTION("a receiver that is down: the batch's spans count as failed") {
        TraceCounters counters;
        o.max_batch = 2;
        TraceExporter exporter(o, counters);
        exporter.export_spans(make(2));  // a full batch: sent at once
        for (int i = 0; i < 500 && counters.failed < 2; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        CHECK(counters.failed == 2);
        CHECK(counters.exported == 0);
    }
}

TEST_CASE("the traces' endpoint: the setting, else the OTEL variables, else off") {
    ::unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    ::unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    ::unsetenv("OTEL_SERVICE_NAME");
    auto off = trace_export_options("");
    REQUIRE(off);
    CHECK_FALSE(*off);
    auto set = trace_export_options("http://collector:4318");
    REQUIRE((set && *set));
    CHECK((*set)->url == "http://collector:4318/v1/traces");
    CHECK((*set)->service_name == "ferrox");
    ::setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://base:4318/otlp/", 1);
    ::setenv("OTEL_SERVICE_NAME", "svc", 1);
    auto base = trace_export_options("");
    REQUIRE((base && *base));
    CHECK((*base)->url == "https://base:4318/otlp/v1/traces");
    CHECK((*base)->service_name == "svc");
    ::setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:1/custom", 1);
    auto exact = trace_export_options("");
    REQUIRE((exact && *exact));
    CHECK((*exact)->url == "http://traces:1/custom");  // as is, no path appended
    auto flag = trace_export_options("http://flag:2");
    REQUIRE((flag && *flag));
    CHECK((*flag)->url == "http://flag:2/v1/traces");  // the setting wins
    ::setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318", 1);
    auto bad = trace_export_options("");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message().find("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != std::string::npos);
    ::unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    ::unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    ::unsetenv("OTEL_SERVICE_NAME");
}
