// The endpoints of `ferrox serve` (docs/server.md): the OpenAI Completions,
// Chat Completions and Responses APIs and Anthropic's Messages API (JSON and
// Server-Sent Events), /v1/models, /health, /ready, /metrics, /tokenize,
// /detokenize and /apply-template. Every request field is checked; a field
// ferrox does not implement is refused with 400 naming it, never ignored.
// This layer alone speaks HTTP: it maps the scheduler's refusals and ends to
// statuses (the dialects word finish reasons), answers errors in the shape of
// the path's API (server/error_shape.h), and shapes the errors the transport
// answers by itself (openai_error_body).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bounded_json.h"
#include "dialect.h"
#include "embedder.h"
#include "ferrox/expected.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "http_server.h"
#include "metrics.h"
#include "otlp_exporter.h"
#include "request_guard.h"
#include "scheduler.h"

namespace ferrox::server {

class ModelRegistry;

struct ApiOptions {
    std::string model_id;
    // Many models (--models-dir): a request's `model` picks one from here, and
    // model_id and set_model are unused; null: the one model set_model gives.
    ModelRegistry* models = nullptr;
    std::vector<std::string> api_keys;  // empty: open
    GuardOptions guard;                 // Host, Origin (cors_origin)
    std::chrono::seconds request_timeout{0};
    RequestLimits limits;
    int32_t reasoning_budget = -1;  // --reasoning-budget: a chat request's default
    // Where each request's spans go (docs/operations.md, "Traces"); null: traces off.
    TraceExporter* traces = nullptr;
};

// What the endpoints need once the model is loaded.
struct LoadedModel {
    const Tokenizer* tokenizer = nullptr;
    Scheduler* scheduler = nullptr;
    ChatRenderFn render_chat;
    uint32_t max_positions = 0;  // prompt + max_tokens of one request
    GrammarVocab grammar_vocab;  // shared by every grammar stage, built on first use
    // An embedding model's server has an embedder and no scheduler (each
    // refuses the other's endpoints by name).
    Embedder* embedder = nullptr;
    uint32_t n_embd = 0;
    bool embedding_truncation = false;  // /v1/embeddings' `dimensions` may cut vectors
    // A reranker's embedder scores query/document pairs (/v1/rerank) and
    // answers no /v1/embeddings; its pairs are formed with the file's
    // `tokenizer.chat_template.rerank` (empty: none).
    bool reranker = false;
    std::string rerank_template;
};

enum class ServerState { Loading, Ready, Draining, Failed };

// The HTTP error a job's end stands for (499 cancelled, 504 timeout, 503 no
// room or shutdown, 500 failed); none when the answer is whole.
std::optional<ApiError> cut_short(const Event& done);

// An error the transport answers by itself, OpenAI-shaped:
// {"error": {"message", "type"}}.
ErrorBody openai_error_body(int status, std::string_view message);
// HttpServer's ErrorFormatter: the shape of `target`'s API (server/error_shape.h),
// OpenAI's when the target is not known.
ErrorBody transport_error_body(int status, std::string_view message, std::string_view target);

class Api {
  public:
    Api(ApiOptions options, Metrics& metrics);
    void set_model(LoadedModel model);  // before set_state(Ready)
    void set_state(ServerState state) { state_ = state; }
    ServerState state() const { return state_; }

    void handle(const HttpRequest& request, Responder& responder);

  private:
    struct Call;
    void route(Call& call);
    bool choose_model(Call& call, std::string_view target);
    // parse -> submit -> stream | collect, over the endpoint's dialect.
    void generate(Call& call, Dialect& dialect);
    std::shared_ptr<Job> submit(Call& call, GenerationRequest request);
    void stream(Call& call, Dialect& dialect, Job& job);
    void collect(Call& call, Dialect& dialect, Job& job);
    std::optional<Event> next_event(Call& call, Job& job, Clock::time_point& next_look);
    void embeddings(Call& call);  // POST /v1/embeddings
    void rerank(Call& call);      // POST /v1/rerank and its aliases
    // The model's pooled outputs for `inputs` through its embedder; nullopt
    // when the embedder refused (the 503 is sent); throws a 500 on failure.
    std::optional<Embedder::Vectors> pooled_outputs(Call& call,
                                                    std::vector<std::vector<int32_t>> inputs);
    void tokenize(Call& call);
    void detokenize(Call& call);
    void apply_template(Call& call);
    void count_tokens(Call& call);  // Anthropic's /v1/messages/count_tokens
    void log_request(const Call& call, std::string_view target, Clock::duration elapsed) const;
    void trace_request(const Call& call, std::string_view target) const;

    ApiOptions options_;
    Metrics& metrics_;
    LoadedModel model_;
    std::atomic<ServerState> state_{ServerState::Loading};
    std::atomic<uint64_t> next_id_{1};
    int64_t started_at_ = 0;
};

}  // namespace ferrox::server
