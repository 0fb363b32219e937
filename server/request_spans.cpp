#include "request_spans.h"

#include <fmt/format.h>

namespace ferrox::server {
namespace {

// A steady-clock instant as Unix nanoseconds, by the trace's pair of clocks.
uint64_t unix_ns(const RequestTrace& t, Clock::time_point at) {
    using std::chrono::nanoseconds;
    const auto wall = std::chrono::duration_cast<nanoseconds>(t.wall_start.time_since_epoch());
    const auto since = std::chrono::duration_cast<nanoseconds>(at - t.start);
    const int64_t ns = (wall + since).count();
    return ns < 0 ? 0 : static_cast<uint64_t>(ns);
}

Span child(const RequestTrace& t, const SpanId& parent, std::string name, Clock::time_point from,
           Clock::time_point to) {
    Span s;
    s.trace_id = t.self.trace_id;
    s.span_id = new_span_id();
    s.parent = parent;
    s.name = std::move(name);
    s.start_unix_ns = unix_ns(t, from);
    s.end_unix_ns = unix_ns(t, std::max(from, to));
    return s;
}

// The generation's phases under the request span.
void add_phases(const RequestTrace& t, const GenerationRecord& g, Clock::time_point end,
                std::vector<Span>& out) {
    const SpanId& request = t.self.span_id;
    const Clock::time_point finished = g.finished.value_or(end);
    out.push_back(child(t, request, "queue", g.arrival, g.admitted.value_or(finished)));
    if (!g.admitted) return;
    Span prefill = child(t, request, "prefill", *g.admitted, g.first_token.value_or(finished));
    prefill.attributes = {{"ferrox.prefill.chunks", int64_t(g.chunk_count)},
                          {"ferrox.prefill.cached_tokens", int64_t(g.cached_tokens)}};
    const SpanId prefill_id = prefill.span_id;
    out.push_back(std::move(prefill));
    for (size_t i = 0; i < g.chunks.size(); ++i) {
        Span chunk = child(t, prefill_id, "prefill chunk", g.chunks[i].start, g.chunks[i].end);
        chunk.attributes = {{"ferrox.prefill.chunk_index", int64_t(i)},
                            {"ferrox.prefill.chunk_tokens", int64_t(g.chunks[i].tokens)}};
        out.push_back(std::move(chunk));
    }
    if (!g.first_token) return;
    Span decode = child(t, request, "decode", *g.first_token, finished);
    decode.attributes = {{"ferrox.decode.tokens", int64_t(g.completion_tokens)}};
    out.push_back(std::move(decode));
}

}  // namespace

RequestTrace start_request_trace(const HttpRequest& request) {
    RequestTrace t;
    t.wall_start = std::chrono::system_clock::now();
    t.start = Clock::now();
    const auto [first, last] = request.equal_range("traceparent");
    std::optional<SpanContext> parent;
    if (first != last && std::next(first) == last)  // several: which one is meant is unknown
        parent = parse_traceparent(std::string_view(first->value().data(), first->value().size()));
    if (parent) {
        t.self.trace_id = parent->trace_id;
        t.self.sampled = parent->sampled;
        t.parent = parent->span_id;
    } else {
        t.self.trace_id = new_trace_id();
    }
    t.self.span_id = new_span_id();
    return t;
}

GenerationRecord generation_record(const Job& job, const Event& done) {
    GenerationRecord g;
    g.arrival = job.request.arrival;
    g.admitted = job.admitted_at;
    g.first_token = job.first_token_at;
    g.finished = job.finished_at;
    g.chunks = job.prefill_chunks;
    g.chunk_count = job.prefill_chunk_count;
    g.prompt_tokens = done.prompt_tokens;
    g.completion_tokens = done.completion_tokens;
    g.cached_tokens = done.cached_tokens;
    g.max_tokens = job.request.max_tokens;
    switch (done.finish) {
        case FinishReason::EndOfGeneration:
        case FinishReason::StopString:
            g.finish_reason = "stop";
            break;
        default:
            g.finish_reason = to_string(done.finish);
    }
    return g;
}

std::vector<Span> request_spans(const RequestTrace& t, const RequestFacts& f,
                                Clock::time_point end) {
    Span request;
    request.trace_id = t.self.trace_id;
    request.span_id = t.self.span_id;
    request.parent = t.parent;
    request.kind = Span::Kind::Server;
    // The HTTP semantic conventions' name: "{method} {route}", the method alone without a route.
    request.name = f.route.empty() ? f.method : fmt::format("{} {}", f.method, f.route);
    request.start_unix_ns = unix_ns(t, t.start);
    request.end_unix_ns = unix_ns(t, end);
    auto& a = request.attributes;
    a.push_back({"http.request.method", f.method});
    if (!f.route.empty()) a.push_back({"http.route", f.route});
    a.push_back({"http.response.status_code", int64_t(f.status)});
    a.push_back({"ferrox.request.id", f.request_id});
    if (f.status >= 500) {  // a server span's 4xx is the client's error, not the span's
        request.error = true;
        a.push_back({"error.type", std::to_string(f.status)});
    }
    if (!f.operation.empty()) {
        a.push_back({"gen_ai.operation.name", f.operation});
        a.push_back({"gen_ai.request.model", f.model});
    }
    std::vector<Span> spans;
    if (const auto& g = f.generation) {
        a.push_back({"gen_ai.response.model", f.model});
        a.push_back({"gen_ai.request.max_tokens", int64_t(g->max_tokens)});
        a.push_back({"gen_ai.usage.input_tokens", int64_t(g->prompt_tokens)});
        a.push_back({"gen_ai.usage.output_tokens", int64_t(g->completion_tokens)});
        a.push_back({"gen_ai.response.finish_reasons", std::vector<std::string>{g->finish_reason}});
        a.push_back({"ferrox.usage.cached_tokens", int64_t(g->cached_tokens)});
    }
    spans.push_back(std::move(request));
    if (f.generation) add_phases(t, *f.generation, end, spans);
    return spans;
}

}  // namespace ferrox::server
