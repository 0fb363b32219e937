#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace ferrox::server {

void Histogram::observe(double seconds) {
    std::lock_guard lock(m_);
    for (size_t i = 0; i < kBounds.size(); ++i)
        if (seconds <= kBounds[i]) {
            ++buckets_[i];
            break;
        }
    ++count_;
    sum_ += seconds;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
    std::lock_guard lock(m_);
    std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
        cumulative += buckets_[i];
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
    }
    out += fmt::format("{0}_bucket{{le=\"+Inf\"}} {1}\n{0}_sum {2}\n{0}_count {1}\n", name, count_,
                       sum_);
    return out;
}

void Metrics::count_outcome(int http_status) {
    std::lock_guard lock(m_);
    ++outcomes_[http_status];
}

std::string Metrics::render(const LoadTotals* totals) const {
    std::string out;
    const auto one = [&](const char* name, const char* type, const char* help, auto value) {
        out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
    };
    const LoadTotals now =
        totals ? *totals
               : LoadTotals{running.load(), waiting.load(), kv_used.load(), kv_total.load()};
    one("ferrox:num_requests_running", "gauge", "Requests holding a sequence (prefill or decode).",
        now.running);
    one("ferrox:num_requests_waiting", "gauge", "Requests admitted and waiting for a sequence.",
        now.waiting);
    one("ferrox:kv_cache_usage_perc", "gauge",
        "Fraction of KV-cache cells in use, 0..1 (finished prompts kept for prefix reuse count).",
        double(now.kv_used) / double(std::max<uint64_t>(1, now.kv_total)));
    one("ferrox:prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
        prompt_tokens.load());
    one("ferrox:generation_tokens_total", "counter", "Generated tokens.", generation_tokens.load());
    one("ferrox:prefix_cache_hits_total", "counter",
        "Requests whose prompt reused cached cells of an earlier prompt.", prefix_hits.load());
    one("ferrox:prefix_cache_hit_tokens_total", "counter",
        "Prompt tokens taken from the cache instead of computed.", prefix_tokens.load());
    one("ferrox:spec_decode_num_draft_tokens_total", "counter",
        "Draft tokens verified by n-gram speculation.", spec_drafted_tokens.load());
    one("ferrox:spec_decode_num_accepted_tokens_total", "counter",
        "Draft tokens that verification emitted.", spec_accepted_tokens.load());
    one("ferrox:state_checkpoint_bytes", "gauge",
        "Bytes the recurrent-state checkpoints of hybrid models hold (within "
        "server.checkpoint_memory).",
        checkpoint_bytes.load());
    one("ferrox:state_checkpoints_taken_total", "counter",
        "Recurrent-state checkpoints taken at prefill chunk ends.", checkpoints_taken.load());
    one("ferrox:state_checkpoints_evicted_total", "counter",
        "Recurrent-state checkpoints evicted, least recently used first, to stay within budget.",
        checkpoints_evicted.load());
    one("ferrox:state_checkpoint_resumes_total", "counter",
        "Requests of a hybrid model that resumed from a recurrent-state checkpoint.",
        checkpoint_resumes.load());
    one("ferrox:trace_spans_exported_total", "counter",
        "Trace spans the OTLP receiver took (docs/operations.md, \"Traces\").",
        traces.exported.load());
    one("ferrox:trace_spans_dropped_total", "counter",
        "Trace spans dropped unsent: the export queue was full, or the shutdown left no time.",
        traces.dropped.load());
    one("ferrox:trace_spans_failed_total", "counter",
        "Trace spans whose POST failed (receiver down, timed out, or not 2xx).",
        traces.failed.load());
    {
        std::lock_guard lock(m_);
        out +=
            "# HELP ferrox:request_outcomes_total Finished HTTP requests by status code.\n"
            "# TYPE ferrox:request_outcomes_total counter\n";
        for (const auto& [code, n] : outcomes_)
            out += fmt::format("ferrox:request_outcomes_total{{code=\"{}\"}} {}\n", code, n);
    }
    out += ttft.render("ferrox:time_to_first_token_seconds",
                       "Seconds from arrival to the first generated token.");
    out += tpot.render("ferrox:time_per_output_token_seconds",
                       "Seconds per generated token after the first.");
    out += e2e.render("ferrox:e2e_request_latency_seconds",
                      "Seconds from arrival to the last token of a generation request.");
    return out;
}

}  // namespace ferrox::server
