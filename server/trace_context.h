// W3C Trace Context (https://www.w3.org/TR/trace-context/) for the server's
// traces: a request's `traceparent` header read, and the request span's own
// written back. A header that breaks the format is ignored, as the
// specification says: the request then starts a trace of its own.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferrox::server {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct SpanContext {
    TraceId trace_id{};
    SpanId span_id{};
    bool sampled = true;  // trace-flags bit 0
};

// The parent a `traceparent` value names; none when it is malformed: a
// version other than 2 lowercase hex digits or "ff", a trace id or parent id
// not lowercase hex of its length or all zeros, a version-00 value of any
// length but 55, a later version whose extra part does not begin with '-'.
std::optional<SpanContext> parse_traceparent(std::string_view value);
// "00-<trace id>-<span id>-<flags>"
std::string format_traceparent(const SpanContext& context);

// Lowercase hex, as the header and OTLP's JSON write ids.
std::string hex_id(const uint8_t* bytes, size_t size);
template <size_t N>
std::string hex_id(const std::array<uint8_t, N>& id) {
    return hex_id(id.data(), N);
}

// Random, never all zeros (an all-zero id is invalid), from a generator per
// thread seeded by the system's random source.
TraceId new_trace_id();
SpanId new_span_id();

}  // namespace ferrox::server
