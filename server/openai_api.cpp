#include "openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <set>

#include "auth.h"
#include "ferrox/escape.h"
#include "ferrox/log.h"

namespace ferrox::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A refused request: the HTTP status, the message, and the field at fault.
struct ApiError {
    int status;
    std::string message;
    std::string param;
};

std::string dump(const ordered_json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_body(const ApiError& e) {
    ordered_json j;
    j["error"] = {{"message", e.message},
                  {"type", e.status >= 500 ? "server_error" : "invalid_request_error"},
                  {"param", e.param.empty() ? ordered_json(nullptr) : ordered_json(e.param)},
                  {"code", e.status}};
    return dump(j);
}

// Fields OpenAI defines that ferrox does not implement: refused by name.
const std::set<std::string, std::less<>> kUnsupported{"tools",
                                                      "tool_choice",
                                                      "functions",
                                                      "function_call",
                                                      "parallel_tool_calls",
                                                      "modalities",
                                                      "audio",
                                                      "prediction",
                                                      "web_search_options",
                                                      "reasoning_effort",
                                                      "store",
                                                      "metadata",
                                                      "service_tier",
                                                      "echo",
                                                      "suffix",
                                                      "best_of"};

// Reads one JSON object's fields, each checked, and refuses what is left.
class Fields {
  public:
    Fields(const ordered_json& object, std::string where) : o_(object), where_(std::move(where)) {
        if (!o_.is_object()) fail(where_.empty() ? "the body" : where_, "must be a JSON object");
    }
    bool has(const char* key) {
        seen_.insert(key);
        return o_.contains(key) && !o_.at(key).is_null();
    }
    const ordered_json& raw(const char* key) {
        seen_.insert(key);
        if (!o_.contains(key)) fail(key, "is required");
        return o_.at(key);
    }
    double number(const char* key, double lo, double hi, double fallback) {
        if (!has(key)) return fallback;
        const auto& v = o_.at(key);
        if (!v.is_number()) fail(key, "must be a number");
        const double d = v.get<double>();
        if (!(d >= lo && d <= hi)) fail(key, fmt::format("must be between {} and {}", lo, hi));
        return d;
    }
    int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) {
        if (!has(key)) return fallback;
        const auto& v = o_.at(key);
        if (!v.is_number_integer()) fail(key, "must be an integer");
        const int64_t i =
            v.is_number_unsigned()
                ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(INT64_MAX)))
                : v.get<int64_t>();
        if (i < lo || i > hi) fail(key, fmt::format("must be between {} and {}", lo, hi));
        return i;
    }
    bool boolean(const char* key, bool fallback) {
        if (!has(key)) return fallback;
        if (!o_.at(key).is_boolean()) fail(key, "must be true or false");
        return o_.at(key).get<bool>();
    }
    std::string string(const char* key, std::string fallback) {
        if (!has(key)) return fallback;
        if (!o_.at(key).is_string()) fail(key, "must be a string");
        return o_.at(key).get<std::string>();
    }
    // Every field not read is refused: unimplemented ones by name.
    void refuse_the_rest() {
        for (auto it = o_.begin(); it != o_.end(); ++it) {
            if (seen_.count(it.key())) continue;
            if (kUnsupported.count(it.key())) fail(it.key(), "is not supported by ferrox");
            fail(it.key(), "is not a field this endpoint knows");
        }
    }
    [[noreturn]] void fail(const std::string& key, const std::string& why) const {
        const std::string name = where_.empty() ? key : where_ + "." + key;
        throw ApiError{400, fmt::format("'{}' {}", name, why), name};
    }

  private:
    const ordered_json& o_;
    std::string where_;
    std::set<std::string, std::less<>> seen_;
};

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

ordered_json logprob_entry(const TokenLogprob& lp) {
    const auto bytes = [](const std::string& s) {
        ordered_json b = ordered_json::array();
        for (unsigned char c : s) b.push_back(int(c));
        return b;
    };
    ordered_json top = ordered_json::array();
    for (const auto& [piece, value] : lp.top)
        top.push_back({{"token", piece}, {"logprob", value}, {"bytes", bytes(piece)}});
    return {{"token", lp.piece},
            {"logprob", lp.logprob},
            {"bytes", bytes(lp.piece)},
            {"top_logprobs", top}};
}

// The legacy Completions form: parallel arrays.
void add_completion_logprobs(ordered_json& out, const std::vector<TokenLogprob>& lps,
                             size_t& text_offset) {
    for (const TokenLogprob& lp : lps) {
        out["tokens"].push_back(lp.piece);
        out["token_logprobs"].push_back(lp.logprob);
        ordered_json top = ordered_json::object();
        for (const auto& [piece, value] : lp.top) top[piece] = value;
        out["top_logprobs"].push_back(top);
        out["text_offset"].push_back(text_offset);
        text_offset += lp.piece.size();
    }
}

std::string sse(const ordered_json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

struct Api::Call {
    const HttpRequest& request;
    Responder& responder;
    std::string id;
    Headers headers;  // sent with every response of this call
    ordered_json body;
    std::string tenant;  // whose prefix-cache entries this request may share
    uint32_t prompt_tokens = 0, completion_tokens = 0;
    double ttft = -1;

    void send_json(int status, const ordered_json& j) {
        responder.send(status, "application/json", dump(j), headers);
    }
    void send_error(const ApiError& e, Headers extra = {}) {
        Headers h = headers;
        h.insert(h.end(), extra.begin(), extra.end());
        responder.send(e.status, "application/json", error_body(e), h);
    }
    // The body as JSON, or a 400 naming where it broke or the limit it crossed.
    void parse_body(const JsonLimits& limits) {
        auto parsed = parse_bounded_json(request.body(), limits);
        if (!parsed) throw ApiError{400, parsed.error().message(), ""};
        body = std::move(*parsed);
        if (!body.is_object()) throw ApiError{400, "the body must be a JSON object", ""};
    }
};

Api::Api(ApiOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics), started_at_(std::time(nullptr)) {}

void Api::set_model(LoadedModel model) { model_ = std::move(model); }

void Api::handle(const HttpRequest& request, Responder& responder) {
    const auto t0 = Clock::now();
    Call call{request, responder, request_id_from(request, next_id_++), {}, {}, {}, 0, 0, -1};
    call.headers.emplace_back("X-Request-Id", call.id);
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
    const std::string_view target(request.target().data(), request.target().size());
    const bool probe = target == "/health" || target == "/ready" || target == "/metrics";
    if (!probe) metrics_.count_outcome(responder.status());
    if (!probe) {  // probes are polled every few seconds: no line each
        const double total = std::chrono::duration<double>(Clock::now() - t0).count();
        logger().info("request {} {} {} -> {}: prompt {} generated {} ttft {} total {:.3f}s",
                      call.id, std::string(request.method_string()),
                      escape_text(target, EscapeFor::Line), responder.status(), call.prompt_tokens,
                      call.completion_tokens,
                      call.ttft < 0 ? std::string("-") : fmt::format("{:.3f}s", call.ttft), total);
    }
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
        h.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id");
        h.emplace_back("Access-Control-Max-Age", "600");
        call.responder.send(204, "text/plain", "", h);
        return;
    }
    const auto auth = call.request.find(http::field::authorization);
    const std::string_view auth_value =
        auth == call.request.end() ? std::string_view()
                                   : std::string_view(auth->value().data(), auth->value().size());
    const int key = matching_key(options_.api_keys, auth_value);
    if (key < 0) {
        ApiError e{401, "missing or wrong API key (Authorization: Bearer <key>)", ""};
        return call.send_error(e, {{"WWW-Authenticate", "Bearer"}});
    }
    call.tenant = std::to_string(key);
    if (target == "/metrics") {
        if (method != http::verb::get) throw ApiError{405, "use GET", ""};
        call.responder.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(),
                            call.headers);
        return;
    }
    if (target == "/v1/models") {
        if (method != http::verb::get) throw ApiError{405, "use GET", ""};
        ordered_json data = ordered_json::array();
        data.push_back({{"id", options_.model_id},
                        {"object", "model"},
                        {"created", started_at_},
                        {"owned_by", "ferrox"}});
        return call.send_json(200, {{"object", "list"}, {"data", data}});
    }
    const bool known = target == "/v1/chat/completions" || target == "/v1/completions" ||
                       target == "/tokenize" || target == "/detokenize" ||
                       target == "/apply-template";
    if (!known)
        throw ApiError{404, fmt::format("no endpoint {}", escape_text(target, EscapeFor::Line)),
                       ""};
    if (method != http::verb::post) throw ApiError{405, "use POST", ""};
    if (state == ServerState::Loading)
        return call.send_error({503, "the model is still loading", ""}, {{"Retry-After", "5"}});
    if (state != ServerState::Ready)
        return call.send_error({503, "the server is shutting down", ""}, {{"Retry-After", "5"}});
    call.parse_body(options_.limits.json);
    if (target == "/v1/chat/completions") return generate(call, true);
    if (target == "/v1/completions") return generate(call, false);
    if (target == "/tokenize") return tokenize(call);
    if (target == "/detokenize") return detokenize(call);
    return apply_template(call);
}

namespace {

// messages[] checked and reduced to {role, content: string} for the template.
ordered_json checked_messages(const ordered_json& messages, uint32_t max_messages) {
    if (!messages.is_array() || messages.empty())
        throw ApiError{400, "'messages' must be a non-empty array", "messages"};
    if (messages.size() > max_messages)
        throw ApiError{
            400,
            fmt::format("'messages' has {} entries; at most {}", messages.size(), max_messages),
            "messages"};
    static const std::set<std::string, std::less<>> kRoles{"system", "user", "assistant", "tool"};
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string where = fmt::format("messages[{}]", i);
        Fields f(messages[i], where);
        const std::string role = f.string("role", "");
        if (!kRoles.count(role)) f.fail("role", "must be one of system, user, assistant, tool");
        std::string content;
        if (f.has("content")) {
            const ordered_json& c = f.raw("content");
            if (c.is_string()) {
                content = c.get<std::string>();
            } else if (c.is_array()) {
                for (size_t j = 0; j < c.size(); ++j) {
                    Fields part(c[j], fmt::format("{}.content[{}]", where, j));
                    const std::string type = part.string("type", "");
                    if (type != "text")
                        part.fail("type",
                                  fmt::format("'{}' is not supported by ferrox (only text)", type));
                    if (!part.has("text") || !part.raw("text").is_string())
                        part.fail("text", "must be a string");
                    content += part.raw("text").get<std::string>();
                    part.refuse_the_rest();
                }
            } else {
                f.fail("content", "must be a string or an array of text parts");
            }
        } else if (role != "assistant") {
            f.fail("content", "is required");
        }
        ordered_json m{{"role", role}, {"content", content}};
        if (f.has("name")) m["name"] = f.string("name", "");
        if (f.has("tool_call_id")) m["tool_call_id"] = f.string("tool_call_id", "");
        f.refuse_the_rest();
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace

void Api::generate(Call& call, bool chat) {
    Fields f(call.body, "");
    (void)f.string("model", "");  // one model is served, whatever the client names
    (void)f.string("user", "");
    if (f.integer("n", 1, 1000, 1) != 1) f.fail("n", "other than 1 is not supported by ferrox");
    const bool stream = f.boolean("stream", false);
    bool include_usage = false;
    if (f.has("stream_options")) {
        if (!stream) f.fail("stream_options", "is only allowed with stream: true");
        Fields so(f.raw("stream_options"), "stream_options");
        include_usage = so.boolean("include_usage", false);
        so.refuse_the_rest();
    }
    if (f.has("response_format")) {
        Fields rf(f.raw("response_format"), "response_format");
        if (rf.string("type", "") != "text")
            rf.fail("type", "other than 'text' is not supported by ferrox");
        rf.refuse_the_rest();
    }

    GenerationRequest g;
    g.arrival = Clock::now();
    g.deadline = g.arrival + options_.request_timeout;
    const uint32_t limit = model_.max_positions;
    std::string prompt_text;
    if (chat) {
        const ordered_json messages =
            checked_messages(f.raw("messages"), options_.limits.max_messages);
        auto rendered = model_.render_chat(messages);
        if (!rendered) throw ApiError{400, rendered.error().message(), "messages"};
        g.prompt = std::move(rendered->tokens);
    } else {
        if (!f.has("prompt")) f.fail("prompt", "is required");
        const ordered_json& p = f.raw("prompt");
        if (p.is_string()) {
            prompt_text = p.get<std::string>();
        } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
            prompt_text = p[0].get<std::string>();
        } else {
            f.fail("prompt", "must be a string (or a list of one string)");
        }
        // Text from a client stays text: "<start_of_turn>" in it is not that token.
        g.prompt = model_.tokenizer->encode(prompt_text, true, false);
    }
    if (g.prompt.empty()) throw ApiError{400, "the prompt encodes to no tokens", "prompt"};
    call.prompt_tokens = static_cast<uint32_t>(g.prompt.size());
    if (g.prompt.size() >= limit)
        throw ApiError{400,
                       fmt::format("the prompt is {} tokens; this server takes at most {} "
                                   "positions per request (prompt + max_tokens)",
                                   g.prompt.size(), limit),
                       chat ? "messages" : "prompt"};
    const int64_t room = int64_t(limit) - int64_t(g.prompt.size());
    int64_t max_tokens = f.integer("max_tokens", 1, limit, room);
    if (chat) max_tokens = f.integer("max_completion_tokens", 1, limit, max_tokens);
    if (max_tokens > room)
        throw ApiError{
            400,
            fmt::format("{} prompt tokens + max_tokens {} = {} exceed the {} positions "
                        "a request may use",
                        g.prompt.size(), max_tokens, int64_t(g.prompt.size()) + max_tokens, limit),
            "max_tokens"};
    g.max_tokens = static_cast<uint32_t>(max_tokens);

    ChainParams& s = g.sampling;
    s.base.temperature = static_cast<float>(f.number("temperature", 0, 2, s.base.temperature));
    s.base.top_p = static_cast<float>(f.number("top_p", 0, 1, s.base.top_p));
    if (f.has("top_p") && s.base.top_p <= 0) f.fail("top_p", "must be greater than 0");
    s.base.top_k = static_cast<uint32_t>(f.integer("top_k", 0, 1 << 20, s.base.top_k));
    s.base.min_p = static_cast<float>(f.number("min_p", 0, 1, s.base.min_p));
    s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2, 0));
    s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2, 0));
    if (f.has("seed")) {
        s.base.seed = static_cast<uint64_t>(f.integer("seed", INT64_MIN, INT64_MAX, 0));
    } else {
        static std::mt19937_64 seeds{std::random_device{}()};
        static std::mutex seeds_m;
        std::lock_guard lock(seeds_m);
        s.base.seed = seeds();
    }
    if (f.has("logit_bias")) {
        const ordered_json& lb = f.raw("logit_bias");
        if (!lb.is_object()) f.fail("logit_bias", "must be an object of token id to bias");
        // Applied to every token sampled: bounded so one request cannot stall the step.
        if (lb.size() > options_.limits.max_logit_bias)
            f.fail("logit_bias", fmt::format("has {} entries; at most {}", lb.size(),
                                             options_.limits.max_logit_bias));
        const size_t vocab = model_.tokenizer->vocab_size();
        for (auto it = lb.begin(); it != lb.end(); ++it) {
            const std::string name = "logit_bias." + it.key();
            char* end = nullptr;
            const long long id = std::strtoll(it.key().c_str(), &end, 10);
            if (it.key().empty() || *end != '\0' || id < 0 || size_t(id) >= vocab)
                throw ApiError{400, fmt::format("'{}': not a token id below {}", name, vocab),
                               name};
            if (!it.value().is_number() || !(std::abs(it.value().get<double>()) <= 100))
                throw ApiError{400, fmt::format("'{}' must be a number in -100..100", name), name};
            s.logit_bias.emplace_back(static_cast<int32_t>(id), it.value().get<float>());
        }
    }
    if (f.has("stop")) {
        const ordered_json& st = f.raw("stop");
        std::vector<std::string> stops;
        if (st.is_string())
            stops.push_back(st.get<std::string>());
        else if (st.is_array())
            for (const auto& one : st) {
                if (!one.is_string()) f.fail("stop", "must be a string or a list of strings");
                stops.push_back(one.get<std::string>());
            }
        else
            f.fail("stop", "must be a string or a list of strings");
        const RequestLimits& l = options_.limits;
        if (stops.size() > l.max_stop_strings)
            f.fail("stop", fmt::format("has more than {} strings", l.max_stop_strings));
        for (const auto& one : stops)
            if (one.size() > l.max_stop_bytes)
                f.fail("stop", fmt::format("strings must be at most {} bytes", l.max_stop_bytes));
        g.stop = std::move(stops);
    }
    // Prefix-cache entries are shared only within one API key and salt, so
    // that cached_tokens never tells one tenant what another sent.
    const std::string salt = f.string("cache_salt", "");
    if (salt.size() > options_.limits.max_cache_salt_bytes)
        f.fail("cache_salt",
               fmt::format("must be at most {} bytes", options_.limits.max_cache_salt_bytes));
    g.cache_scope = call.tenant + '\n' + salt;
    if (chat) {
        g.logprobs = f.boolean("logprobs", false);
        g.top_logprobs = static_cast<uint32_t>(f.integer("top_logprobs", 0, 20, 0));
        if (g.top_logprobs > 0 && !g.logprobs) f.fail("top_logprobs", "needs logprobs: true");
    } else {
        const int64_t n = f.integer("logprobs", 0, 5, -1);
        g.logprobs = n >= 0;
        g.top_logprobs = static_cast<uint32_t>(std::max<int64_t>(n, 0));
    }
    f.refuse_the_rest();
    // What the request holds from here on: its body (until the handler
    // returns) and the prompt's tokens; the parsed JSON goes now.
    call.body = nullptr;
    call.responder.keep_memory(call.request.body().size() + g.prompt.size() * sizeof(int32_t));

    auto submitted = model_.scheduler->submit(std::move(g));
    if (!submitted.job) {
        using R = Scheduler::Refusal;
        if (submitted.refusal == R::TooLong) throw ApiError{400, submitted.why, "max_tokens"};
        return call.send_error({503, submitted.why, ""}, {{"Retry-After", "1"}});
    }
    Job& job = *submitted.job;
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + call.id;
    const int64_t created = std::time(nullptr);
    const char* object = chat ? "chat.completion" : "text_completion";
    const auto chunk = [&](ordered_json choice) {
        return ordered_json{{"id", id},
                            {"object", chat ? "chat.completion.chunk" : "text_completion"},
                            {"created", created},
                            {"model", options_.model_id},
                            {"choices", ordered_json::array({std::move(choice)})}};
    };
    const auto usage_of = [&](const Event& done) {
        return ordered_json{{"prompt_tokens", done.prompt_tokens},
                            {"completion_tokens", done.completion_tokens},
                            {"total_tokens", done.prompt_tokens + done.completion_tokens},
                            {"prompt_tokens_details", {{"cached_tokens", done.cached_tokens}}}};
    };
    const auto note_first_token = [&] {
        if (call.ttft < 0 && job.first_token_at)
            call.ttft =
                std::chrono::duration<double>(*job.first_token_at - job.request.arrival).count();
    };

    std::string text;
    ordered_json logprobs_out = chat ? ordered_json{{"content", ordered_json::array()}}
                                     : ordered_json{{"tokens", ordered_json::array()},
                                                    {"token_logprobs", ordered_json::array()},
                                                    {"top_logprobs", ordered_json::array()},
                                                    {"text_offset", ordered_json::array()}};
    size_t text_offset = prompt_text.size();
    if (stream) {
        if (!call.responder.start_stream(200, "text/event-stream", call.headers)) {
            job.cancel();
            return;
        }
        if (chat)
            call.responder.write_chunk(
                sse(chunk({{"index", 0},
                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                           {"logprobs", nullptr},
                           {"finish_reason", nullptr}})));
    }
    // The client is looked at every 100 ms whether or not tokens flow, so a
    // non-streamed request is cancelled as soon as a streamed one would be.
    auto next_look = Clock::now();
    for (;;) {
        auto event = job.next(std::chrono::milliseconds(100));
        if (!event || Clock::now() >= next_look) {
            next_look = Clock::now() + std::chrono::milliseconds(100);
            if (call.responder.client_gone()) {
                job.cancel();
                if (stream)
                    call.responder.end_stream();
                else
                    call.responder.send(499, "application/json", "", call.headers);
                call.responder.set_outcome(499);  // the client closed the request
                return;
            }
            if (!event) continue;
        }
        note_first_token();
        if (event->kind == Event::Kind::Text) {
            if (!stream) {
                text += event->text;
                if (chat)
                    for (const auto& lp : event->logprobs)
                        logprobs_out["content"].push_back(logprob_entry(lp));
                else
                    add_completion_logprobs(logprobs_out, event->logprobs, text_offset);
                continue;
            }
            ordered_json lp = nullptr;
            if (!event->logprobs.empty()) {
                if (chat) {
                    lp = {{"content", ordered_json::array()}};
                    for (const auto& one : event->logprobs)
                        lp["content"].push_back(logprob_entry(one));
                } else {
                    lp = {{"tokens", ordered_json::array()},
                          {"token_logprobs", ordered_json::array()},
                          {"top_logprobs", ordered_json::array()},
                          {"text_offset", ordered_json::array()}};
                    add_completion_logprobs(lp, event->logprobs, text_offset);
                }
            }
            ordered_json choice = chat ? ordered_json{{"index", 0},
                                                      {"delta", {{"content", event->text}}},
                                                      {"logprobs", lp},
                                                      {"finish_reason", nullptr}}
                                       : ordered_json{{"text", event->text},
                                                      {"index", 0},
                                                      {"logprobs", lp},
                                                      {"finish_reason", nullptr}};
            if (!call.responder.write_chunk(sse(chunk(std::move(choice))))) {
                job.cancel();
                call.responder.end_stream();
                call.responder.set_outcome(499);
                return;
            }
            continue;
        }
        if (event->kind == Event::Kind::Error) {
            const ApiError e{event->http_status, event->error, ""};
            if (!stream) return call.send_error(e);
            call.responder.write_chunk(sse(ordered_json::parse(error_body(e))));
            call.responder.end_stream();
            // The 200 went out with the headers; a stream cut short (by the
            // drain, a timeout) is counted and logged as what cut it.
            call.responder.set_outcome(e.status);
            return;
        }
        // Done.
        call.prompt_tokens = event->prompt_tokens;
        call.completion_tokens = event->completion_tokens;
        if (stream) {
            ordered_json choice = chat ? ordered_json{{"index", 0},
                                                      {"delta", ordered_json::object()},
                                                      {"logprobs", nullptr},
                                                      {"finish_reason", event->finish_reason}}
                                       : ordered_json{{"text", ""},
                                                      {"index", 0},
                                                      {"logprobs", nullptr},
                                                      {"finish_reason", event->finish_reason}};
            ordered_json last = chunk(std::move(choice));
            if (include_usage) last["usage"] = nullptr;
            call.responder.write_chunk(sse(last));
            if (include_usage) {
                ordered_json u = chunk({});
                u["choices"] = ordered_json::array();
                u["usage"] = usage_of(*event);
                call.responder.write_chunk(sse(u));
            }
            call.responder.write_chunk("data: [DONE]\n\n");
            call.responder.end_stream();
            return;
        }
        ordered_json choice =
            chat ? ordered_json{{"index", 0},
                                {"message", {{"role", "assistant"}, {"content", text}}},
                                {"logprobs", job.request.logprobs ? logprobs_out : nullptr},
                                {"finish_reason", event->finish_reason}}
                 : ordered_json{{"text", text},
                                {"index", 0},
                                {"logprobs", job.request.logprobs ? logprobs_out : nullptr},
                                {"finish_reason", event->finish_reason}};
        return call.send_json(200, {{"id", id},
                                    {"object", object},
                                    {"created", created},
                                    {"model", options_.model_id},
                                    {"choices", ordered_json::array({std::move(choice)})},
                                    {"usage", usage_of(*event)}});
    }
}

void Api::tokenize(Call& call) {
    Fields f(call.body, "");
    if (!f.has("content") || !f.raw("content").is_string()) f.fail("content", "must be a string");
    const std::string content = f.raw("content").get<std::string>();
    const bool add_special = f.boolean("add_special", false);
    const bool with_pieces = f.boolean("with_pieces", false);
    f.refuse_the_rest();
    const auto tokens = model_.tokenizer->encode(content, add_special, false);
    ordered_json out = ordered_json::array();
    for (int32_t t : tokens)
        if (with_pieces)
            out.push_back({{"id", t}, {"piece", model_.tokenizer->token_to_piece(t)}});
        else
            out.push_back(t);
    call.send_json(200, {{"tokens", out}});
}

void Api::detokenize(Call& call) {
    Fields f(call.body, "");
    if (!f.has("tokens") || !f.raw("tokens").is_array()) f.fail("tokens", "must be an array");
    const ordered_json& list = f.raw("tokens");
    f.refuse_the_rest();
    const size_t vocab = model_.tokenizer->vocab_size();
    std::vector<int32_t> ids;
    for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_number_integer() || list[i].get<int64_t>() < 0 ||
            size_t(list[i].get<int64_t>()) >= vocab)
            throw ApiError{400, fmt::format("'tokens[{}]' is not a token id below {}", i, vocab),
                           fmt::format("tokens[{}]", i)};
        ids.push_back(static_cast<int32_t>(list[i].get<int64_t>()));
    }
    call.send_json(200, {{"content", model_.tokenizer->decode(ids)}});
}

void Api::apply_template(Call& call) {
    Fields f(call.body, "");
    const ordered_json messages = checked_messages(f.raw("messages"), options_.limits.max_messages);
    f.refuse_the_rest();
    auto rendered = model_.render_chat(messages);
    if (!rendered) throw ApiError{400, rendered.error().message(), "messages"};
    call.send_json(200, {{"prompt", rendered->text}});
}

}  // namespace ferrox::server
