// Many models per server (`ferrox serve --models-dir`, docs/server.md "Many
// models"): the registry knows every model the server may serve by its id,
// loads one on its first request when the memory budget leaves room beside
// the loaded ones (else it first unloads the least recently used idle model:
// no request in flight), and unloads a model that stayed idle past its
// keep-alive. Loads and unloads run on the registry's own worker thread, and
// no lock is held while a model loads, so one model's load never holds up
// another model's requests. The loader and the clock are given, so the rules
// are tested without a model (tests/server/test_model_registry.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ferrox/expected.h"
#include "metrics.h"
#include "openai_api.h"

namespace ferrox::server {

// One model the server may serve: its id (what a request's `model` names,
// and the label of its /metrics series), any more ids it answers to, and the
// file it loads from.
struct ModelSpec {
    std::string id;
    std::filesystem::path path;
    uint64_t file_bytes = 0;
    std::vector<std::string> aliases = {};  // more ids: a server.models entry's later `alias` items
    std::optional<size_t> entry = std::nullopt;  // its server.models entry; none: a models_dir file
    // Its own keep_alive (a server.models entry's); none: the registry's default.
    std::optional<int64_t> keep_alive_s = std::nullopt;
};

// A loaded model: what the endpoints use, and the memory its plan counted.
// Destroying it stops its scheduler and frees the model.
class ModelInstance {
  public:
    virtual ~ModelInstance() = default;
    virtual const LoadedModel& api() const = 0;
    virtual uint64_t bytes() const = 0;
    virtual void begin_drain() {}
    virtual bool wait_idle(Clock::time_point /*deadline*/) { return true; }
    // Its scheduler's running, waiting and KV gauges; null: none (an embedder).
    virtual const LoadGauges* gauges() const { return nullptr; }
};

class ModelLoader {
  public:
    virtual ~ModelLoader() = default;
    // The bytes a model is counted at before it is loaded (after the load,
    // the instance's own bytes() replace them).
    virtual uint64_t bytes_needed(const ModelSpec& spec) const = 0;
    virtual Expected<std::unique_ptr<ModelInstance>> load(const ModelSpec& spec) = 0;
};

enum class ModelState { Unloaded, Loading, Loaded };
const char* model_state_name(ModelState state);

// Ollama's keep_alive: seconds as a number, or a duration string of numbers
// with units ("5m", "1h30m", "90s", "250ms", "-1"); a bare number string is
// seconds. Negative: keep the model loaded; 0: unload once idle. Throws
// ApiError 400 naming `keep_alive` for anything else.
int64_t parse_keep_alive(const nlohmann::ordered_json& value);

struct RegistryOptions {
    uint64_t budget_bytes = 0;   // memory the loaded models may take together
    int64_t keep_alive_s = 300;  // a model's idle seconds before it is unloaded; < 0: never
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
    // How often the expiry runs on its own; zero: only when expire() is called (tests).
    std::chrono::milliseconds expire_every{1000};
};

// One row per id: a model with aliases shows once under each.
struct ModelStatus {
    std::string id;
    ModelState state;
    uint64_t bytes;  // counted against the budget (0 when unloaded)
    uint32_t in_flight;
};

class ModelRegistry {
  public:
    ModelRegistry(std::vector<ModelSpec> specs, ModelLoader& loader, RegistryOptions options);
    ~ModelRegistry();  // stops the worker and unloads every model
    ModelRegistry(const ModelRegistry&) = delete;
    ModelRegistry& operator=(const ModelRegistry&) = delete;

    // A request's hold on a loaded model: the model stays loaded while any
    // lease on it lives; the last one to end starts its keep-alive.
    class Lease {
      public:
        Lease(Lease&& o) noexcept;
        Lease& operator=(Lease&&) = delete;
        Lease(const Lease&) = delete;
        ~Lease();
        const LoadedModel& model() const { return instance_->api(); }
        const std::string& id() const;
        // The request's tokens, for the model's series on /metrics.
        void count(uint64_t prompt_tokens, uint64_t generated_tokens);

      private:
        friend class ModelRegistry;
        Lease(ModelRegistry* r, size_t index, std::shared_ptr<ModelInstance> instance)
            : registry_(r), index_(index), instance_(std::move(instance)) {}
        ModelRegistry* registry_;
        size_t index_;
        std::shared_ptr<ModelInstance> instance_;
    };

    // The model `id` loaded (waiting for its load until `deadline`), or the
    // refusal: 404 (no such model), 503 (no room, with the arithmetic; still
    // loading at the deadline; draining), 500 (its load failed). A request's
    // `keep_alive` (seconds, parse_keep_alive) says how long the model stays
    // loaded after this request, as Ollama's; without one, the model's default.
    struct Acquired {
        std::optional<Lease> lease;
        ApiError refusal{0, "", ""};
    };
    Acquired acquire(std::string_view id, std::optional<int64_t> keep_alive_s,
                     Clock::time_point deadline);

    std::vector<ModelStatus> list() const;
    // The per-model series of /metrics (Prometheus text): requests served,
    // prompt and generated tokens, loads, failed loads and unloads, whether
    // each model is loaded, and its
    // scheduler's running, waiting and KV gauges (0 while unloaded), each
    // with a `model` label (the model's first id).
    std::string render_metrics() const;
    // The gauges summed over the loaded models, for the unlabelled series.
    LoadTotals load_totals() const;
    // Unloads every idle model whose keep-alive has passed.
    void expire();
    // No new leases; each loaded model drains until `deadline`. True when all did.
    bool drain(Clock::time_point deadline);
    // Waits until the worker has nothing queued (tests: after an unload).
    void wait_worker_idle();

  private:
    struct Entry {
        ModelSpec spec;
        uint64_t need = 0;  // bytes counted before the load
        ModelState state = ModelState::Unloaded;
        std::shared_ptr<ModelInstance> instance;
        uint64_t bytes = 0;  // counted against the budget while loading or loaded
        uint32_t in_flight = 0;
        int64_t default_keep_alive_s = 0;  // the spec's, else RegistryOptions'
        int64_t keep_alive_s = 0;          // the last request's, else the default
        Clock::time_point last_used{};
        std::optional<Clock::time_point> expires;  // none: kept
        uint64_t attempts = 0;                     // loads started
        std::string load_error;                    // of the last failed load
        uint64_t requests = 0, prompt_tokens = 0, generated_tokens = 0;
        // Loads that succeeded or failed, and unloads (keep-alive, room, shutdown).
        uint64_t loads = 0, load_failures = 0, unloads = 0;
    };
    void release(size_t index);
    // Under m_: unloads `e` (its instance is destroyed on the worker).
    void unload_locked(Entry& e);
    // Under m_: the refusal when `e` cannot fit even after evicting every idle model.
    std::optional<ApiError> make_room_locked(Entry& e);
    void post(std::function<void()> job);
    void work();
    void expire_loop();

    ModelLoader& loader_;
    RegistryOptions options_;
    mutable std::mutex m_;
    std::condition_variable changed_;  // a load ended, or the worker went idle
    std::vector<Entry> entries_;
    bool draining_ = false, stopping_ = false;
    std::deque<std::function<void()>> jobs_;
    bool working_ = false;
    std::condition_variable work_cv_;
    std::thread worker_, expirer_;
};

}  // namespace ferrox::server
