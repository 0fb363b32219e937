#include "openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>

#include "auth.h"
#include "chat_tools.h"
#include "embeddings_api.h"
#include "error_shape.h"
#include "ferrox/escape.h"
#include "ferrox/log.h"
#include "messages_dialect.h"
#include "model_registry.h"
#include "openai_dialects.h"
#include "request_spans.h"
#include "rerank_api.h"
#include "responses_dialect.h"

namespace ferrox::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A client-chosen request id is echoed when it is short and printable.
std::string request_id_from(const HttpRequest& r, uint64_t serial) {
    const auto it = r.find("X-Request-Id");
    if (it != r.end()) {
        const std::string_view v(it->value().data(), it->value().size());
        const bool printable =
            !v.empty() && v.size() <= 128 && std::all_of(v.begin(), v.end(), [](char c) {
                return c > 0x20 && c < 0x7f && c != '"' && c != '\\';
            });
        if (printable) return std::string(v);
    }
    static const uint32_t boot = std::random_device{}();
    return fmt::format("{:08x}-{:06d}", boot, serial);
}

// The generation endpoints, each served by its dialect (server/dialect.h).
// `operation` is its gen_ai.operation.name in a trace.
struct GenerationEndpoint {
    std::string_view path;
    std::unique_ptr<Dialect> (*make)(ReplyIds ids);
    std::string_view operation;
};
constexpr GenerationEndpoint kGenerationEndpoints[] = {
    {"/v1/chat/completions", chat_completions, "chat"},
    {"/v1/completions", completions, "text_completion"},
    {"/v1/responses", responses, "chat"},
    {"/v1/messages", anthropic_messages, "chat"},
};

const GenerationEndpoint* generation_endpoint(std::string_view path) {
    for (const GenerationEndpoint& e : kGenerationEndpoints)
        if (e.path == path) return &e;
    return nullptr;
}

// The endpoints that are not generations; with those, a trace's http.route.
constexpr std::string_view kOtherEndpoints[] = {
    "/health",   "/ready",      "/metrics",        "/v1/models",
    "/tokenize", "/detokenize", "/apply-template", "/v1/messages/count_tokens"};

}  // namespace

std::optional<ApiError> cut_short(const Event& done) {
    switch (done.finish) {
        case FinishReason::EndOfGeneration:
        case FinishReason::StopString:
        case FinishReason::Length:
            return std::nullopt;
        case FinishReason::Cancelled:
            return ApiError{499, done.why, ""};  // the client closed the request
        case FinishReason::Timeout:
            return ApiError{504, done.why, ""};
        case FinishReason::NoRoom:
        case FinishReason::Shutdown:
            return ApiError{503, done.why, ""};
        case FinishReason::Failed:
        case FinishReason::None:
            break;
    }
    return ApiError{500, done.why, ""};
}

struct Api::Call {
    const HttpRequest& request;
    Responder& responder;
    std::string id;
    Headers headers;  // sent with every response of this call
    ordered_json body;
    std::string tenant;  // whose prefix-cache entries this request may share
    ErrorShape error_shape = ErrorShape::OpenAI;  // the path's API's
    uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
    double ttft = -1;
    // From the job's Done, for the request's log record; -1: not reached.
    const char* finish = nullptr;
    double queue_s = -1, prefill_s = -1, decode_s = -1;
    // Set when traces are on: the request span's context, and the generation's facts.
    std::optional<RequestTrace> trace{};
    std::optional<GenerationRecord> generation{};
    // The model this request runs on: the server's one, or the registry's lease.
    const LoadedModel* model = nullptr;
    std::string model_id{};
    std::optional<ModelRegistry::Lease> lease{};

    void note_done(const Event& done, const Job& job) {
        if (trace) generation = generation_record(job, done);
        prompt_tokens = done.prompt_tokens;
        completion_tokens = done.completion_tokens;
        cached_tokens = done.cached_tokens;
        finish = to_string(done.finish);
        const auto secs = [](Clock::duration d) {
            return std::chrono::duration<double>(d).count();
        };
        const Clock::time_point arrival = job.request.arrival;
        const Clock::time_point end = job.finished_at.value_or(Clock::now());
        queue_s = secs(job.admitted_at.value_or(end) - arrival);
        if (job.admitted_at) prefill_s = secs(job.first_token_at.value_or(end) - *job.admitted_at);
        if (job.first_token_at) decode_s = secs(end - *job.first_token_at);
    }

    void send_json(int status, const ordered_json& j) {
        responder.send(status, "application/json", json_text(j), headers);
    }
    void send_error(const ApiError& e, Headers extra = {}) {
        Headers h = headers;
        h.insert(h.end(), extra.begin(), extra.end());
        responder.send(e.status, "application/json", error_json(error_shape, e), h);
    }
    // The body as JSON, or a 400 naming where it broke or the limit it crossed.
    void parse_body(const JsonLimits& limits) {
        auto parsed = parse_bounded_json(request.body(), limits);
        if (!parsed) throw ApiError{400, parsed.error().message(), ""};
        body = std::move(*parsed);
        if (!body.is_object()) throw ApiError{400, "the body must be a JSON object", ""};
    }
};

ErrorBody openai_error_body(int status, std::string_view message) {
    json j;
    j["error"] = {{"message", message},
                  {"type", status == 503   ? "unavailable"
                           : status >= 500 ? "server_error"
                                           : "invalid_request_error"}};
    return {"application/json", j.dump(-1, ' ', false, json::error_handler_t::replace)};
}

ErrorBody transport_error_body(int status, std::string_view message, std::string_view target) {
    if (error_shape_of(target.substr(0, target.find('?'))) == ErrorShape::OpenAI)
        return openai_error_body(status, message);
    return {"application/json",
            error_json(ErrorShape::Anthropic, {status, std::string(message), ""})};
}

Api::Api(ApiOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics), started_at_(std::time(nullptr)) {}

void Api::set_model(LoadedModel model) { model_ = std::move(model); }

void Api::handle(const HttpRequest& request, Responder& responder) {
    const auto t0 = Clock::now();
    const std::string_view target(request.target().data(), request.target().size());
    Call call{request,
              responder,
              request_id_from(request, next_id_++),
              {},
              {},
              {},
              error_shape_of(target.substr(0, target.find('?')))};
    call.headers.emplace_back("X-Request-Id", call.id);
    // Probes: no log line and no trace each.
    const bool probe = target == "/health" || target == "/ready" || target == "/metrics";
    if (options_.traces && !probe) {
        call.trace = start_request_trace(request);
        call.headers.emplace_back("traceparent", format_traceparent(call.trace->self));
    }
    if (!options_.guard.cors_origin.empty()) {
        call.headers.emplace_back("Access-Control-Allow-Origin", options_.guard.cors_origin);
        call.headers.emplace_back("Vary", "Origin");
    }
    try {
        route(call);
    } catch (const ApiError& e) {
        call.send_error(e);
    } catch (const std::exception& e) {
        call.send_error({500, fmt::format("internal error: {}", e.what()), ""});
    }
    if (!probe) metrics_.count_outcome(responder.status());
    if (call.lease) call.lease->count(call.prompt_tokens, call.completion_tokens);
    if (!probe) log_request(call, target, Clock::now() - t0);
    if (call.trace) trace_request(call, target);
}

// The request's spans to the exporter, which only queues them.
void Api::trace_request(const Call& call, std::string_view target) const {
    if (!call.trace->self.sampled) return;  // the caller's trace records nothing
    RequestFacts facts;
    facts.method = std::string(call.request.method_string());
    const std::string_view path = target.substr(0, target.find('?'));
    if (const GenerationEndpoint* endpoint = generation_endpoint(path)) {
        facts.route = path;
        facts.operation = endpoint->operation;
    } else if (std::find(std::begin(kOtherEndpoints), std::end(kOtherEndpoints), path) !=
               std::end(kOtherEndpoints)) {
        facts.route = path;
    }
    facts.request_id = call.id;
    facts.model = call.model_id.empty() ? options_.model_id : call.model_id;
    facts.status = call.responder.status();
    facts.generation = call.generation;
    options_.traces->export_spans(request_spans(*call.trace, facts, Clock::now()));
}

// One record a request (never its prompt or text): a line in the text log
// format, an object of these fields in the json one (docs/server.md, "Logs").
void Api::log_request(const Call& call, std::string_view target, Clock::duration elapsed) const {
    const double total = std::chrono::duration<double>(elapsed).count();
    const std::string method(call.request.method_string());
    const int status = call.responder.status();
    if (!log_format_json()) {
        log_record("request",
                   fmt::format(
                       "request {} {} {} -> {}: prompt {} generated {} ttft {} total {:.3f}s",
                       call.id, method, escape_text(target, EscapeFor::Line), status,
                       call.prompt_tokens, call.completion_tokens,
                       call.ttft < 0 ? std::string("-") : fmt::format("{:.3f}s", call.ttft), total),
                   {});
        return;
    }
    const auto ms = [](double s) -> ordered_json {
        return s < 0 ? ordered_json(nullptr) : ordered_json(std::round(s * 1e6) / 1e3);
    };
    const ordered_json record = {
        {"id", escape_text(call.id, EscapeFor::Json)},
        {"method", method},
        {"path", escape_text(target, EscapeFor::Json)},
        {"status", status},
        {"model",
         escape_text(call.model_id.empty() ? options_.model_id : call.model_id, EscapeFor::Json)},
        {"prompt_tokens", call.prompt_tokens},
        {"cached_tokens", call.cached_tokens},
        {"generated_tokens", call.completion_tokens},
        {"finish_reason", call.finish ? ordered_json(call.finish) : ordered_json(nullptr)},
        {"queue_ms", ms(call.queue_s)},
        {"prefill_ms", ms(call.prefill_s)},
        {"decode_ms", ms(call.decode_s)},
        {"ttft_ms", ms(call.ttft)},
        {"total_ms", ms(total)},
    };
    const std::string object = record.dump();
    log_record("request", {}, std::string_view(object).substr(1, object.size() - 2));
}

void Api::route(Call& call) {
    namespace http = boost::beast::http;
    const auto method = call.request.method();
    std::string_view target(call.request.target().data(), call.request.target().size());
    if (const auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    const ServerState state = state_;

    if (target == "/health") {
        if (method != http::verb::get) throw ApiError{405, "use GET", ""};
        return call.send_json(200, {{"status", "ok"}});
    }
    if (target == "/ready") {
        if (method != http::verb::get) throw ApiError{405, "use GET", ""};
        static constexpr const char* kNames[] = {"loading", "ready", "draining", "failed"};
        return call.send_json(state == ServerState::Ready ? 200 : 503,
                              {{"status", kNames[static_cast<int>(state)]}});
    }
    // The probes tell nothing and must answer whatever sent them.
    if (auto refused = guard_request(call.request, options_.guard))
        throw ApiError{refused->status, refused->why, ""};
    if (method == http::verb::options && !options_.guard.cors_origin.empty()) {
        Headers h = call.headers;
        h.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        h.emplace_back("Access-Control-Allow-Headers",
                       "Authorization, X-Api-Key, Anthropic-Version, Content-Type, X-Request-Id");
        h.emplace_back("Access-Control-Max-Age", "600");
        call.responder.send(204, "text/plain", "", h);
        return;
    }
    const auto header = [&call](std::string_view name) {
        const auto it = call.request.find(boost::beast::string_view(name.data(), name.size()));
        return it == call.request.end() ? std::string_view()
                                        : std::string_view(it->value().data(), it->value().size());
    };
    const int key = matching_key(options_.api_keys, header("Authorization"), header("X-Api-Key"));
    if (key < 0) {
        ApiError e{
            401, "missing or wrong API key (Authorization: Bearer <key>, or x-api-key: <key>)", ""};
        return call.send_error(e, {{"WWW-Authenticate", "Bearer"}});
    }
    call.tenant = std::to_string(key);
    if (target == "/metrics") {
        if (method != http::verb::get) throw ApiError{405, "use GET", ""};
        // Many models: the unlabelled gauges are the sums of the models' own.
        std::string text;
        if (options_.models) {
            const LoadTotals totals = options_.models->load_totals();
            text = metrics_.render(&totals) + options_.models->render_metrics();
        } else {
            text = metrics_.render();
        }
        call.responder.send(200, "text/plain; version=0.0.4; charset=utf-8", text, call.headers);
        return;
    }
    if (target == "/v1/models") {
        if (method != http::verb::get) throw ApiError{405, "use GET", ""};
        ordered_json data = ordered_json::array();
        if (!options_.models)
            data.push_back({{"id", options_.model_id},
                            {"object", "model"},
                            {"created", started_at_},
                            {"owned_by", "ferrox"}});
        else
            for (const ModelStatus& m : options_.models->list())
                data.push_back({{"id", m.id},
                                {"object", "model"},
                                {"created", started_at_},
                                {"owned_by", "ferrox"},
                                {"state", model_state_name(m.state)}});
        return call.send_json(200, {{"object", "list"}, {"data", data}});
    }
    const GenerationEndpoint* endpoint = generation_endpoint(target);
    // llama-server's four names for one endpoint.
    const bool rerank_target = target == "/v1/rerank" || target == "/rerank" ||
                               target == "/v1/reranking" || target == "/reranking";
    const bool known = endpoint || target == "/v1/embeddings" || rerank_target ||
                       target == "/tokenize" || target == "/detokenize" ||
                       target == "/apply-template" || target == "/v1/messages/count_tokens";
    if (!known)
        throw ApiError{404, fmt::format("no endpoint {}", escape_text(target, EscapeFor::Line)),
                       ""};
    if (method != http::verb::post) throw ApiError{405, "use POST", ""};
    if (state == ServerState::Loading)
        return call.send_error({503, "the model is still loading", ""}, {{"Retry-After", "5"}});
    if (state != ServerState::Ready)
        return call.send_error({503, "the server is shutting down", ""}, {{"Retry-After", "5"}});
    call.parse_body(options_.limits.json);
    if (!choose_model(call, target)) return;
    if (endpoint) {
        if (!call.model->scheduler)
            throw ApiError{
                400,
                fmt::format("the model '{}' is {}: it answers {}, not {}", call.model_id,
                            call.model->reranker ? "a reranking model" : "an embedding model",
                            call.model->reranker ? "/v1/rerank" : "/v1/embeddings", target),
                "model"};
        return generate(call, *endpoint->make({call.id, call.model_id}));
    }
    if (target == "/v1/embeddings") return embeddings(call);
    if (rerank_target) return rerank(call);
    if (target == "/tokenize") return tokenize(call);
    if (target == "/detokenize") return detokenize(call);
    if (target == "/v1/messages/count_tokens") return count_tokens(call);
    return apply_template(call);
}

// The request's model: the one served, or (many models) the one its `model`
// names, loaded if it is not; false when a refusal was sent.
bool Api::choose_model(Call& call, std::string_view target) {
    if (!options_.models) {
        call.model = &model_;
        call.model_id = options_.model_id;
        return true;
    }
    const auto it = call.body.find("model");
    if (it == call.body.end() || !it->is_string() || it->get<std::string>().empty())
        throw ApiError{400, "'model' must name one of the models GET /v1/models lists", "model"};
    const std::string id = it->get<std::string>();
    std::optional<int64_t> keep_alive;
    if (const auto k = call.body.find("keep_alive"); k != call.body.end()) {
        keep_alive = parse_keep_alive(*k);
        call.body.erase("keep_alive");  // the registry's, not the dialect's
    }
    // The endpoints without a `model` of their own read every field they are given.
    if (target == "/tokenize" || target == "/detokenize" || target == "/apply-template")
        call.body.erase("model");
    auto acquired =
        options_.models->acquire(id, keep_alive, Clock::now() + options_.request_timeout);
    if (!acquired.lease) {
        if (acquired.refusal.status == 503)
            call.send_error(acquired.refusal, {{"Retry-After", "5"}});
        else
            call.send_error(acquired.refusal);
        return false;
    }
    call.lease.emplace(std::move(*acquired.lease));
    call.model = &call.lease->model();
    call.model_id = id;
    return true;
}

void Api::generate(Call& call, Dialect& dialect) {
    GenerationRequest g;
    g.arrival = Clock::now();
    g.deadline = g.arrival + options_.request_timeout;
    const ParseInput in{*call.model->tokenizer,
                        call.model->render_chat,
                        call.model->max_positions,
                        options_.limits,
                        call.tenant,
                        call.model->grammar_vocab,
                        options_.reasoning_budget};
    try {
        dialect.parse(call.body, in, g);
    } catch (const ApiError&) {
        call.prompt_tokens = static_cast<uint32_t>(g.prompt.size());  // for the log line
        throw;
    }
    call.prompt_tokens = static_cast<uint32_t>(g.prompt.size());
    // What the request holds from here on: its body (until the handler
    // returns) and the prompt's tokens; the parsed JSON goes now.
    call.body = nullptr;
    call.responder.keep_memory(call.request.body().size() + g.prompt.size() * sizeof(int32_t));
    const std::shared_ptr<Job> job = submit(call, std::move(g));
    if (!job) return;
    if (dialect.streamed())
        stream(call, dialect, *job);
    else
        collect(call, dialect, *job);
}

// The job, or nullptr when the scheduler refused it (and the refusal was sent).
std::shared_ptr<Job> Api::submit(Call& call, GenerationRequest request) {
    auto submitted = call.model->scheduler->submit(std::move(request));
    switch (submitted.refusal) {
        case Scheduler::Refusal::None:
            return submitted.job;
        case Scheduler::Refusal::TooLong:
            throw ApiError{400, submitted.why, "max_tokens"};
        case Scheduler::Refusal::QueueFull:
        case Scheduler::Refusal::Draining:
            break;
    }
    call.send_error({503, submitted.why, ""}, {{"Retry-After", "1"}});
    return nullptr;
}

// The job's next event, or none when the client went away (the job is then
// cancelled). The client is looked at every 100 ms whether or not tokens
// flow, so a non-streamed request is cancelled as soon as a streamed one would be.
std::optional<Event> Api::next_event(Call& call, Job& job, Clock::time_point& next_look) {
    for (;;) {
        auto event = job.next(std::chrono::milliseconds(100));
        if (!event || Clock::now() >= next_look) {
            next_look = Clock::now() + std::chrono::milliseconds(100);
            if (call.responder.client_gone()) {
                job.cancel();
                return std::nullopt;
            }
            if (!event) continue;
        }
        if (call.ttft < 0 && job.first_token_at)
            call.ttft =
                std::chrono::duration<double>(*job.first_token_at - job.request.arrival).count();
        return event;
    }
}

void Api::stream(Call& call, Dialect& dialect, Job& job) {
    Responder& out = call.responder;
    if (!out.start_stream(200, "text/event-stream", call.headers)) {
        job.cancel();
        return;
    }
    for (const std::string& chunk : dialect.stream_start()) out.write_chunk(chunk);
    auto next_look = Clock::now();
    while (auto event = next_event(call, job, next_look)) {
        if (event->kind == Event::Kind::Text) {
            for (const std::string& chunk : dialect.stream_text(*event)) {
                if (out.write_chunk(chunk)) continue;
                job.cancel();
                out.end_stream();
                out.set_outcome(499);
                return;
            }
            continue;
        }
        call.note_done(*event, job);
        if (const auto e = cut_short(*event)) {
            for (const std::string& chunk : dialect.stream_error(*e)) out.write_chunk(chunk);
            out.end_stream();
            // The 200 went out with the headers; a stream cut short (by the
            // drain, a timeout) is counted and logged as what cut it.
            out.set_outcome(e->status);
            return;
        }
        for (const std::string& chunk : dialect.stream_end(*event)) out.write_chunk(chunk);
        out.end_stream();
        return;
    }
    out.end_stream();
    out.set_outcome(499);  // the client closed the request
}

void Api::collect(Call& call, Dialect& dialect, Job& job) {
    auto next_look = Clock::now();
    while (auto event = next_event(call, job, next_look)) {
        if (event->kind == Event::Kind::Text) {
            dialect.collect(*event);
            continue;
        }
        call.note_done(*event, job);
        if (const auto e = cut_short(*event)) return call.send_error(*e);
        return call.responder.send(200, "application/json", dialect.answer(*event), call.headers);
    }
    call.responder.send(499, "application/json", "", call.headers);
    call.responder.set_outcome(499);  // the client closed the request
}

void Api::embeddings(Call& call) {
    if (!call.model->embedder)
        throw ApiError{400,
                       fmt::format("the model '{}' is not an embedding model (its file sets no "
                                   "pooling_type); /v1/embeddings needs one such as "
                                   "Qwen3-Embedding",
                                   call.model_id),
                       "model"};
    if (call.model->reranker)
        throw ApiError{400,
                       fmt::format("the model '{}' is a reranking model: it scores query/document "
                                   "pairs at /v1/rerank and gives no embeddings",
                                   call.model_id),
                       "model"};
    EmbeddingsLimits limits;
    limits.max_tokens = call.model->embedder->context();
    limits.n_embd = call.model->n_embd;
    limits.truncatable = call.model->embedding_truncation;
    EmbeddingsRequest request = parse_embeddings_request(call.body, *call.model->tokenizer, limits);
    call.prompt_tokens = static_cast<uint32_t>(request.prompt_tokens);
    call.body = nullptr;
    auto vectors = pooled_outputs(call, std::move(request.inputs));
    if (!vectors) return;
    call.send_json(200, embeddings_response(std::move(*vectors), request, call.model_id));
}

std::optional<Embedder::Vectors> Api::pooled_outputs(Call& call,
                                                     std::vector<std::vector<int32_t>> inputs) {
    const Clock::time_point deadline = Clock::now() + options_.request_timeout;
    auto outcome = call.model->embedder->embed(std::move(inputs), deadline);
    if (outcome.refusal != Embedder::Refusal::None) {
        call.send_error({503, outcome.why, ""}, {{"Retry-After", "1"}});
        return std::nullopt;
    }
    if (outcome.failed) throw ApiError{500, outcome.why, ""};
    return std::move(outcome.vectors);
}

void Api::rerank(Call& call) {
    if (!call.model->reranker)
        throw ApiError{400,
                       fmt::format("the model '{}' is not a reranking model (its file's "
                                   "pooling_type is not rank); /v1/rerank needs one such as "
                                   "Qwen3-Reranker",
                                   call.model_id),
                       "model"};
    RerankLimits limits;
    limits.max_tokens = call.model->embedder->context();
    RerankRequest request = parse_rerank_request(call.body, *call.model->tokenizer,
                                                 call.model->rerank_template, limits);
    call.prompt_tokens = static_cast<uint32_t>(request.prompt_tokens);
    call.body = nullptr;
    const auto vectors = pooled_outputs(call, std::move(request.inputs));
    if (!vectors) return;
    call.send_json(200, rerank_response(*vectors, request, call.model_id));
}

void Api::tokenize(Call& call) {
    Fields f(call.body, "");
    if (!f.has("content") || !f.raw("content").is_string()) f.fail("content", "must be a string");
    const std::string content = f.raw("content").get<std::string>();
    const bool add_special = f.boolean("add_special", false);
    const bool with_pieces = f.boolean("with_pieces", false);
    f.refuse_the_rest();
    const auto tokens = call.model->tokenizer->encode(content, add_special, false);
    ordered_json out = ordered_json::array();
    for (int32_t t : tokens)
        if (with_pieces)
            out.push_back({{"id", t}, {"piece", call.model->tokenizer->token_to_piece(t)}});
        else
            out.push_back(t);
    call.send_json(200, {{"tokens", out}});
}

void Api::detokenize(Call& call) {
    Fields f(call.body, "");
    if (!f.has("tokens") || !f.raw("tokens").is_array()) f.fail("tokens", "must be an array");
    const ordered_json& list = f.raw("tokens");
    f.refuse_the_rest();
    const size_t vocab = call.model->tokenizer->vocab_size();
    std::vector<int32_t> ids;
    for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_number_integer() || list[i].get<int64_t>() < 0 ||
            size_t(list[i].get<int64_t>()) >= vocab)
            throw ApiError{400, fmt::format("'tokens[{}]' is not a token id below {}", i, vocab),
                           fmt::format("tokens[{}]", i)};
        ids.push_back(static_cast<int32_t>(list[i].get<int64_t>()));
    }
    call.send_json(200, {{"content", call.model->tokenizer->decode(ids)}});
}

void Api::count_tokens(Call& call) {
    const ParseInput in{*call.model->tokenizer, call.model->render_chat, call.model->max_positions,
                        options_.limits, call.tenant};
    call.send_json(200, {{"input_tokens", count_message_tokens(call.body, in)}});
}

void Api::apply_template(Call& call) {
    Fields f(call.body, "");
    const ordered_json messages = checked_messages(f.raw("messages"), options_.limits.max_messages);
    // The template's inputs exactly as a chat completion passes them.
    const ChatToolFields tools =
        read_chat_tools(f, call.model->render_chat.family(), options_.limits.max_tools);
    f.refuse_the_rest();
    auto rendered = call.model->render_chat(messages, tools.tools, tools.kwargs);
    if (!rendered) throw ApiError{400, rendered.error().message(), "messages"};
    call.send_json(200, {{"prompt", rendered->text}});
}

}  // namespace ferrox::server
