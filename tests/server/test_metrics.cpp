// The Prometheus exposition: gauges, counters by code, cumulative histogram buckets.
#include <catch2/catch.hpp>
#include <string>

#include "metrics.h"

using namespace ferrox::server;

TEST_CASE("metrics render gauges, outcomes and cumulative histograms") {
    Metrics m;
    m.running = 3;
    m.waiting = 2;
    m.kv_used = 25;
    m.kv_total = 100;
    m.count_outcome(200);
    m.count_outcome(200);
    m.count_outcome(503);
    m.ttft.observe(0.003);  // first bucket
    m.ttft.observe(0.2);    // le 0.25
    m.ttft.observe(1000);   // only +Inf
    const std::string text = m.render();
    CHECK(text.find("ferrox:num_requests_running 3\n") != std::string::npos);
    CHECK(text.find("ferrox:num_requests_waiting 2\n") != std::string::npos);
    CHECK(text.find("ferrox:kv_cache_usage_perc 0.25\n") != std::string::npos);
    CHECK(text.find("ferrox:request_outcomes_total{code=\"200\"} 2\n") != std::string::npos);
    CHECK(text.find("ferrox:request_outcomes_total{code=\"503\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:time_to_first_token_seconds_bucket{le=\"300\"} 2\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:time_to_first_token_seconds_count 3\n") != std::string::npos);
    CHECK(text.find("# TYPE ferrox:e2e_request_latency_seconds histogram\n") != std::string::npos);
}

TEST_CASE("metrics render the trace exporter's span counters") {
    Metrics m;
    m.traces.exported = 7;
    m.traces.dropped = 3;
    m.traces.failed = 5;
    const std::string text = m.render();
    CHECK(text.find("# TYPE ferrox:trace_spans_exported_total counter\n") != std::string::npos);
    CHECK(text.find("ferrox:trace_spans_exported_total 7\n") != std::string::npos);
    CHECK(text.find("ferrox:trace_spans_dropped_total 3\n") != std::string::npos);
    CHECK(text.find("ferrox:trace_spans_failed_total 5\n") != std::string::npos);
}
