// The spans of one request's trace (docs/operations.md, "Traces"): the
// request (a server span with HTTP and GenAI attributes) and, for a
// generation that ran, its children queue, prefill (with one child a prefill
// chunk, at most Job::kRecordedChunks) and decode. What they carry is counts,
// times, ids and names; never a prompt or generated text.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "http_server.h"
#include "otlp_exporter.h"
#include "scheduler.h"
#include "trace_context.h"

namespace ferrox::server {

// Where a request's trace stands from its first moment.
struct RequestTrace {
    SpanContext self;              // the request span's: its trace id is the caller's if given
    std::optional<SpanId> parent;  // the caller's span, from a valid traceparent
    std::chrono::system_clock::time_point wall_start;
    Clock::time_point start;  // the same instant, on the clock the scheduler's times use
};

// Reads `traceparent`: one valid header makes the request its child (same
// trace id, its sampled flag); none, several or a malformed one: a new trace.
RequestTrace start_request_trace(const HttpRequest& request);

// A generation's facts from its job, copied once its Done was seen.
struct GenerationRecord {
    Clock::time_point arrival;
    std::optional<Clock::time_point> admitted, first_token, finished;
    std::vector<Job::PrefillChunk> chunks;
    uint32_t chunk_count = 0;
    uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, max_tokens = 0;
    std::string finish_reason;  // the API's word: "stop", "length", or the engine's for a cut
};
GenerationRecord generation_record(const Job& job, const Event& done);

struct RequestFacts {
    std::string method;
    std::string route;      // the endpoint's path; empty when the target is none
    std::string operation;  // gen_ai.operation.name, for a generation endpoint
    std::string request_id, model;
    int status = 0;
    std::optional<GenerationRecord> generation;
};

std::vector<Span> request_spans(const RequestTrace& trace, const RequestFacts& facts,
                                Clock::time_point end);

}  // namespace ferrox::server
