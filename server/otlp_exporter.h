// OpenTelemetry traces over OTLP/HTTP with a JSON body (docs/operations.md,
// "Traces"). Requests hand their finished spans to export(), which only
// queues them: one exporter thread sends them in batches (every second, or
// at once when a batch is full) to the endpoint with libcurl, each POST
// bounded by a timeout. When the queue is full, spans are dropped and
// counted, so a receiver that is down or slow never holds a request up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "ferrox/expected.h"
#include "metrics.h"
#include "trace_context.h"

namespace ferrox::server {

struct SpanAttribute {
    std::string key;
    std::variant<std::string, int64_t, std::vector<std::string>> value;
};

// One finished span, as OTLP's Span message names its fields.
struct Span {
    enum class Kind { Internal = 1, Server = 2 };  // OTLP's SpanKind numbers
    TraceId trace_id{};
    SpanId span_id{};
    std::optional<SpanId> parent;
    std::string name;
    Kind kind = Kind::Internal;
    uint64_t start_unix_ns = 0, end_unix_ns = 0;
    std::vector<SpanAttribute> attributes;
    bool error = false;  // status ERROR (else UNSET)
    std::string status_message;
};

// An ExportTraceServiceRequest in OTLP's JSON encoding (the protobuf JSON
// mapping: ids as hex strings, 64-bit integers and times as decimal strings,
// enums as numbers), one resource with `service_name`.
std::string otlp_json(std::span<const Span> spans, const std::string& service_name);

struct TraceExportOptions {
    std::string url;  // the full traces URL, <endpoint>/v1/traces
    std::string service_name = "ferrox";
    size_t max_queue = 4096;  // spans waiting; more are dropped
    size_t max_batch = 256;   // spans a POST
    std::chrono::milliseconds interval{1000};
    std::chrono::milliseconds timeout{5000};  // one POST, connect included
};

// Where the traces go, from the settings and the environment as the OTLP
// exporter specification says: server.otlp_endpoint (a base URL, /v1/traces
// appended), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is), else
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); none: traces are off. An URL that
// is not http:// or https://, or longer than 2048 bytes, is an error naming
// where it came from. OTEL_SERVICE_NAME names the service.
Expected<std::optional<TraceExportOptions>> trace_export_options(const std::string& setting);

class TraceExporter {
  public:
    TraceExporter(TraceExportOptions options, TraceCounters& counters);
    ~TraceExporter();  // flush(now)
    TraceExporter(const TraceExporter&) = delete;
    TraceExporter& operator=(const TraceExporter&) = delete;

    // Queues the spans of one request, or drops them all (counted) when they
    // do not fit. Never waits for the network.
    void export_spans(std::vector<Span> spans);
    // Sends what is queued and stops the thread, giving up at `deadline`
    // (what is left then is counted as dropped). Idempotent.
    void flush_and_stop(std::chrono::steady_clock::time_point deadline);
    const TraceExportOptions& options() const { return options_; }

  private:
    void run();
    bool post(const std::string& body);  // true when the receiver answered 2xx

    TraceExportOptions options_;
    TraceCounters& counters_;
    std::mutex m_;
    std::condition_variable wake_;
    std::vector<Span> queue_;
    bool stopping_ = false;
    std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
    std::thread thread_;
};

}  // namespace ferrox::server
