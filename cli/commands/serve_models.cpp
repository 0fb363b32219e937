#include "commands/serve_models.h"

#include <algorithm>

#include "commands/served_model.h"
#include "ferrox/log.h"
#include "ferrox/model/capacity.h"
#include "model_session.h"
#include "models_dir.h"

namespace ferrox::cli {
namespace {

// One model loaded for the server: the engine and what serves it.
class EngineInstance final : public server::ModelInstance {
  public:
    const server::LoadedModel& api() const override { return served->api(); }
    uint64_t bytes() const override { return engine->model().capacity().total_bytes; }
    void begin_drain() override { served->begin_drain(); }
    bool wait_idle(server::Clock::time_point deadline) override {
        return served->wait_idle(deadline);
    }

    std::unique_ptr<Engine> engine;
    std::unique_ptr<ServedModel> served;  // declared after the engine: freed first
};

class EngineLoader final : public server::ModelLoader {
  public:
    EngineLoader(const CommonOptions& common, const ServerConfig& s, std::string chat_template,
                 unsigned threads, server::Metrics& metrics)
        : common_(common),
          s_(s),
          chat_template_(std::move(chat_template)),
          metrics_(metrics),
          choices_(serve_model_choices(s, threads)) {}
    // Before its first load a model is counted at its weights (the file);
    // the registry then keeps the capacity plan's total.
    uint64_t bytes_needed(const server::ModelSpec& spec) const override { return spec.file_bytes; }

    Expected<std::unique_ptr<server::ModelInstance>> load(const server::ModelSpec& spec) override {
        logger().info("serve: loading model '{}' from {}", spec.id, spec.path.string());
        auto engine = open_engine(common_, spec.path.string(), choices_);
        if (!engine) return engine.error();
        auto m = std::make_unique<EngineInstance>();
        m->engine = std::move(*engine);
        auto served = make_served_model(*m->engine, s_, chat_template_, metrics_);
        if (!served) return served.error();
        m->served = std::move(*served);
        logger().info("serve: model '{}' loaded: {}; {}", spec.id,
                      m->engine->model().capacity().summary(), m->served->summary());
        return std::unique_ptr<server::ModelInstance>(std::move(m));
    }

  private:
    const CommonOptions& common_;
    const ServerConfig s_;
    const std::string chat_template_;
    server::Metrics& metrics_;
    const ModelChoices choices_;
};

}  // namespace

Expected<ServedModels> open_models_dir(const CommonOptions& common, const ServerConfig& s,
                                       const std::string& chat_template, unsigned threads,
                                       server::Metrics& metrics) {
    auto specs = server::scan_models_dir(s.models_dir);
    if (!specs) return specs.error();
    server::RegistryOptions ro;
    ro.keep_alive_s = s.keep_alive;
    ro.budget_bytes = s.models_memory;
    if (ro.budget_bytes == 0) {
        const auto available = model::mem_available_bytes();
        if (!available)
            return make_error(
                "server.models_memory is 0 (MemAvailable) and /proc/meminfo cannot be read: set "
                "--models-memory");
        ro.budget_bytes = *available;
    }
    std::string ids;
    for (const server::ModelSpec& spec : *specs) ids += (ids.empty() ? "" : ", ") + spec.id;
    logger().info(
        "serve: {} models in {} ({}), loaded on first use within {} bytes; idle ones "
        "unloaded after {} s",
        specs->size(), s.models_dir, ids, ro.budget_bytes, s.keep_alive);
    ServedModels out;
    out.loader = std::make_unique<EngineLoader>(common, s, chat_template, threads, metrics);
    out.registry =
        std::make_unique<server::ModelRegistry>(std::move(*specs), *out.loader, std::move(ro));
    return out;
}

}  // namespace ferrox::cli
