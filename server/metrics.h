// The server's Prometheus metrics, kept by hand (text exposition format 0.0.4):
// gauges of running and waiting requests and KV-cache use, token counters,
// prefix-cache hits, outcomes by HTTP status, and three latency histograms.
// Names follow vLLM's (which the Gateway API Inference Extension reads) with
// a ferrox: prefix; docs/server.md lists them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace ferrox::server {

class Histogram {
  public:
    static constexpr std::array<double, 14> kBounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                    1,     2.5,  5,     10,   30,  60,   300};
    void observe(double seconds);
    std::string render(const std::string& name, const std::string& help) const;

  private:
    mutable std::mutex m_;
    std::array<uint64_t, kBounds.size()> buckets_{};  // cumulative when rendered
    uint64_t count_ = 0;
    double sum_ = 0;
};

// The trace exporter's counts of spans (server/otlp_exporter.h); zero while
// traces are off.
struct TraceCounters {
    std::atomic<uint64_t> exported{0};  // taken by the receiver (2xx)
    std::atomic<uint64_t> dropped{0};   // the queue was full, or the shutdown left no time
    std::atomic<uint64_t> failed{0};    // their POST failed: refused, timed out, not 2xx
};

// What one scheduler's requests and KV cache hold now: the one-model server's
// are the Metrics' own; with many models each loaded model has its own, which
// /metrics shows labelled by model and summed (server/model_registry.h).
struct LoadGauges {
    std::atomic<int64_t> running{0}, waiting{0};
    std::atomic<uint32_t> kv_used{0}, kv_total{1};
};

// The gauges' values at one moment, the sums over the models.
struct LoadTotals {
    int64_t running = 0, waiting = 0;
    uint64_t kv_used = 0, kv_total = 0;
};

struct Metrics : LoadGauges {
    std::atomic<uint64_t> prompt_tokens{0}, generation_tokens{0};
    std::atomic<uint64_t> prefix_hits{0}, prefix_tokens{0};
    // N-gram speculation: draft tokens verified, and those emitted.
    std::atomic<uint64_t> spec_drafted_tokens{0}, spec_accepted_tokens{0};
    // Recurrent-state checkpoints (server/state_checkpoints.h): held now, and counts.
    std::atomic<int64_t> checkpoint_bytes{0};
    std::atomic<uint64_t> checkpoints_taken{0}, checkpoints_evicted{0}, checkpoint_resumes{0};
    Histogram ttft, tpot, e2e;
    TraceCounters traces;

    void count_outcome(int http_status);
    // `totals`: the gauges' values where several models keep them (else the own ones).
    std::string render(const LoadTotals* totals = nullptr) const;

  private:
    mutable std::mutex m_;
    std::map<int, uint64_t> outcomes_;
};

}  // namespace ferrox::server
