// The endpoints of `ferrox serve` (docs/server.md): the OpenAI Completions
// and Chat Completions APIs (JSON and Server-Sent Events), /v1/models,
// /health, /ready, /metrics, /tokenize, /detokenize and /apply-template.
// Every request field is checked; a field ferrox does not implement is
// refused with 400 naming it, never ignored.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bounded_json.h"
#include "ferrox/expected.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "http_server.h"
#include "metrics.h"
#include "request_guard.h"
#include "scheduler.h"

namespace ferrox::server {

struct RenderedChat {
    std::string text;
    std::vector<int32_t> tokens;
};
// Messages (already checked: role and string content each) to the prompt.
using ChatRenderFn = std::function<Expected<RenderedChat>(const nlohmann::ordered_json&)>;

// Limits on what one request may ask for, fixed (docs/security.md states
// each): every array and object a client controls is bounded by count, and
// the per-step work it causes by that count.
struct RequestLimits {
    JsonLimits json{64, 1u << 18, 4096};  // depth, values, members of one object
    uint32_t max_messages = 1024;
    uint32_t max_stop_strings = 16;
    uint32_t max_stop_bytes = 1024;  // each
    uint32_t max_logit_bias = 1024;  // entries, applied to every sampled token
    uint32_t max_cache_salt_bytes = 256;
};

struct ApiOptions {
    std::string model_id;
    std::vector<std::string> api_keys;  // empty: open
    GuardOptions guard;                 // Host, Origin (cors_origin)
    std::chrono::seconds request_timeout{0};
    RequestLimits limits;
};

// What the endpoints need once the model is loaded.
struct LoadedModel {
    const Tokenizer* tokenizer = nullptr;
    Scheduler* scheduler = nullptr;
    ChatRenderFn render_chat;
    uint32_t max_positions = 0;  // prompt + max_tokens of one request
};

enum class ServerState { Loading, Ready, Draining, Failed };

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
    void generate(Call& call, bool chat);
    void tokenize(Call& call);
    void detokenize(Call& call);
    void apply_template(Call& call);

    ApiOptions options_;
    Metrics& metrics_;
    LoadedModel model_;
    std::atomic<ServerState> state_{ServerState::Loading};
    std::atomic<uint64_t> next_id_{1};
    int64_t started_at_ = 0;
};

}  // namespace ferrox::server
