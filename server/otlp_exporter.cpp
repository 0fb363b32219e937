#include "otlp_exporter.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "ferrox/log.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxUrlBytes = 2048;

ordered_json string_value(const std::string& s) { return {{"stringValue", s}}; }

ordered_json attribute_json(const SpanAttribute& a) {
    ordered_json value;
    if (const auto* s = std::get_if<std::string>(&a.value)) {
        value = string_value(*s);
    } else if (const auto* i = std::get_if<int64_t>(&a.value)) {
        value = {{"intValue", std::to_string(*i)}};  // int64 is a string in the JSON mapping
    } else {
        ordered_json values = ordered_json::array();
        for (const std::string& item : std::get<std::vector<std::string>>(a.value))
            values.push_back(string_value(item));
        value = {{"arrayValue", {{"values", values}}}};
    }
    return {{"key", a.key}, {"value", value}};
}

ordered_json span_json(const Span& s) {
    ordered_json j = {{"traceId", hex_id(s.trace_id)}, {"spanId", hex_id(s.span_id)}};
    if (s.parent) j["parentSpanId"] = hex_id(*s.parent);
    j["name"] = s.name;
    j["kind"] = static_cast<int>(s.kind);
    j["startTimeUnixNano"] = std::to_string(s.start_unix_ns);
    j["endTimeUnixNano"] = std::to_string(s.end_unix_ns);
    ordered_json attributes = ordered_json::array();
    for (const SpanAttribute& a : s.attributes) attributes.push_back(attribute_json(a));
    j["attributes"] = std::move(attributes);
    if (s.error) j["status"] = {{"code", 2}, {"message", s.status_message}};  // STATUS_CODE_ERROR
    return j;
}

// Reads an endpoint URL from `where`: http or https, bounded.
Expected<std::string> checked_url(std::string url, std::string_view where) {
    if (url.size() > kMaxUrlBytes)
        return make_error("{}: the URL is {} bytes, more than {}", where, url.size(), kMaxUrlBytes);
    if (!url.starts_with("http://") && !url.starts_with("https://"))
        return make_error("{}: '{}' must begin with http:// or https://", where, url);
    return url;
}

// A base endpoint with the traces path appended (one '/' between them).
std::string traces_url(std::string base) {
    if (!base.ends_with('/')) base += '/';
    return base + "v1/traces";
}

size_t discard_body(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

std::string otlp_json(std::span<const Span> spans, const std::string& service_name) {
    ordered_json list = ordered_json::array();
    for (const Span& s : spans) list.push_back(span_json(s));
    const ordered_json resource = {
        {"attributes",
         ordered_json::array({{{"key", "service.name"}, {"value", string_value(service_name)}}})}};
    const ordered_json request = {
        {"resourceSpans",
         ordered_json::array({{{"resource", resource},
                               {"scopeSpans", ordered_json::array({{{"scope", {{"name", "ferrox"}}},
                                                                    {"spans", list}}})}}})}};
    return request.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

Expected<std::optional<TraceExportOptions>> trace_export_options(const std::string& setting) {
    const auto env = [](const char* name) -> std::string {
        const char* v = std::getenv(name);
        return v ? v : "";
    };
    Expected<std::string> url = std::string();
    if (!setting.empty())
        url = checked_url(traces_url(setting), "server.otlp_endpoint");
    else if (const std::string v = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); !v.empty())
        url = checked_url(v, "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    else if (const std::string b = env("OTEL_EXPORTER_OTLP_ENDPOINT"); !b.empty())
        url = checked_url(traces_url(b), "$OTEL_EXPORTER_OTLP_ENDPOINT");
    if (!url) return url.error();
    if (url->empty()) return std::optional<TraceExportOptions>();
    TraceExportOptions o;
    o.url = std::move(*url);
    if (const std::string name = env("OTEL_SERVICE_NAME"); !name.empty()) {
        if (name.size() > 256)
            return make_error("$OTEL_SERVICE_NAME is {} bytes, more than 256", name.size());
        o.service_name = name;
    }
    return std::optional<TraceExportOptions>(std::move(o));
}

TraceExporter::TraceExporter(TraceExportOptions options, TraceCounters& counters)
    : options_(std::move(options)), counters_(counters) {
    static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    (void)curl_ready;  // a failed init shows as failed exports
    thread_ = std::thread([this] { run(); });
}

TraceExporter::~TraceExporter() { flush_and_stop(std::chrono::steady_clock::now()); }

void TraceExporter::export_spans(std::vector<Span> spans) {
    {
        std::lock_guard lock(m_);
        if (stopping_ || queue_.size() + spans.size() > options_.max_queue) {
            counters_.dropped += spans.size();
            return;
        }
        for (Span& s : spans) queue_.push_back(std::move(s));
        if (queue_.size() < options_.max_batch) return;
    }
    wake_.notify_one();
}

void TraceExporter::flush_and_stop(std::chrono::steady_clock::time_point deadline) {
    {
        std::lock_guard lock(m_);
        if (!stopping_) deadline_ = deadline;
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void TraceExporter::run() {
    std::unique_lock lock(m_);
    bool failing = false;
    for (;;) {
        wake_.wait_for(lock, options_.interval,
                       [&] { return stopping_ || queue_.size() >= options_.max_batch; });
        if (stopping_ && (queue_.empty() || std::chrono::steady_clock::now() >= deadline_)) {
            counters_.dropped += queue_.size();  // what the shutdown left no time for
            queue_.clear();
            return;
        }
        if (queue_.empty()) continue;
        const size_t n = std::min(queue_.size(), options_.max_batch);
        std::vector<Span> batch(std::make_move_iterator(queue_.begin()),
                                std::make_move_iterator(queue_.begin() + long(n)));
        queue_.erase(queue_.begin(), queue_.begin() + long(n));
        lock.unlock();
        const bool sent = post(otlp_json(batch, options_.service_name));
        (sent ? counters_.exported : counters_.failed) += n;
        if (sent == failing) {  // a change of state, logged once rather than every batch
            failing = !sent;
            if (failing)
                logger().warn(
                    "traces: the OTLP receiver at {} did not take {} spans; dropping "
                    "spans until it does (ferrox:trace_spans_failed_total)",
                    options_.url, n);
            else
                logger().info("traces: the OTLP receiver at {} takes spans again", options_.url);
        }
        lock.lock();
    }
}

bool TraceExporter::post(const std::string& body) {
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return false;
    CURL* c = curl.get();
    // No "Expect: 100-continue" for a large batch: a receiver that ignores it
    // would cost every POST a second's wait.
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(
        curl_slist_append(curl_slist_append(nullptr, "Content-Type: application/json"), "Expect:"),
        curl_slist_free_all);
    auto timeout = options_.timeout;
    {
        std::lock_guard lock(m_);  // a shutdown shortens the last POSTs to its deadline
        if (stopping_) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline_ - std::chrono::steady_clock::now());
            timeout = std::clamp(left, std::chrono::milliseconds(1), timeout);
        }
    }
    curl_easy_setopt(c, CURLOPT_URL, options_.url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
    if (curl_easy_perform(c) != CURLE_OK) return false;
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status >= 200 && status < 300;
}

}  // namespace ferrox::server
