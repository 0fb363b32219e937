#include "commands/serve_models.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "commands/served_model.h"
#include "ferrox/log.h"
#include "ferrox/model/capacity.h"
#include "ferrox/server_settings.h"
#include "model_list.h"
#include "model_session.h"

namespace ferrox::cli {
namespace {

// One model loaded for the server: the engine and what serves it.
class EngineInstance final : public server::ModelInstance {
  public:
    const server::LoadedModel& api() const override { return served->api(); }
    // The plan's total (and its draft model's) and, for a hybrid model, its
    // state checkpoints' budget.
    uint64_t bytes() const override {
        return engine->model().capacity().total_bytes +
               (draft ? draft->model().capacity().total_bytes : 0) + checkpoint_memory;
    }
    void begin_drain() override { served->begin_drain(); }
    const server::LoadGauges* gauges() const override { return &load; }
    bool wait_idle(server::Clock::time_point deadline) override {
        return served->wait_idle(deadline);
    }

    server::LoadGauges load;  // its scheduler's; declared first: freed after it
    std::unique_ptr<Engine> engine;
    std::unique_ptr<Engine> draft;        // its entry's model_draft; freed after `served` too
    uint64_t checkpoint_memory = 0;       // server.checkpoint_memory when the model is hybrid
    std::unique_ptr<ServedModel> served;  // declared after the engine: freed first
};

// What one model is served with: the server's settings, or a server.models
// entry's over them.
struct ModelSettings {
    ServerConfig server;
    ModelChoices choices;
};

class EngineLoader final : public server::ModelLoader {
  public:
    // `entries`: one per server.models entry, in order; `plain`: a models_dir file's.
    EngineLoader(const CommonOptions& common, ModelSettings plain,
                 std::vector<ModelSettings> entries, std::string chat_template,
                 server::Metrics& metrics)
        : common_(common),
          plain_(std::move(plain)),
          entries_(std::move(entries)),
          chat_template_(std::move(chat_template)),
          metrics_(metrics) {}
    // Before its first load a model is counted at its weights (the file, and
    // its draft model's); the registry then keeps the capacity plan's total.
    uint64_t bytes_needed(const server::ModelSpec& spec) const override {
        const ModelSettings& settings = spec.entry ? entries_.at(*spec.entry) : plain_;
        std::error_code ec;
        const auto draft = settings.server.model_draft.empty()
                               ? uintmax_t(0)
                               : std::filesystem::file_size(settings.server.model_draft, ec);
        return spec.file_bytes + (ec ? 0 : uint64_t(draft));
    }

    Expected<std::unique_ptr<server::ModelInstance>> load(const server::ModelSpec& spec) override {
        const ModelSettings& settings = spec.entry ? entries_.at(*spec.entry) : plain_;
        logger().info("serve: loading model '{}' from {}", spec.id, spec.path.string());
        auto engine = open_engine(common_, spec.path.string(), settings.choices);
        if (!engine) return engine.error();
        auto m = std::make_unique<EngineInstance>();
        m->engine = std::move(*engine);
        if (!settings.server.model_draft.empty()) {
            logger().info("serve: loading model '{}''s draft model from {}", spec.id,
                          settings.server.model_draft);
            auto draft = open_engine(common_, settings.server.model_draft, settings.choices);
            if (!draft) return draft.error();
            m->draft = std::move(*draft);
        }
        auto served = make_served_model(*m->engine, settings.server, chat_template_, metrics_,
                                        &m->load, m->draft.get());
        if (!served) return served.error();
        m->served = std::move(*served);
        if (m->engine->model().recurrent())
            m->checkpoint_memory = settings.server.checkpoint_memory;
        logger().info("serve: model '{}' loaded: {}; {}", spec.id,
                      m->engine->model().capacity().summary(), m->served->summary());
        return std::unique_ptr<server::ModelInstance>(std::move(m));
    }

  private:
    const CommonOptions& common_;
    const ModelSettings plain_;
    const std::vector<ModelSettings> entries_;
    const std::string chat_template_;
    server::Metrics& metrics_;
};

}  // namespace

Expected<ServedModels> open_models_dir(const CommonOptions& common, const ServerConfig& s,
                                       const std::string& chat_template, unsigned threads,
                                       server::Metrics& metrics) {
    // Every entry's settings are checked before the port opens.
    std::vector<ModelSettings> entries;
    for (const ServedModelEntry& entry : s.models) {
        auto own = server_config_for(s, entry);
        if (!own) return own.error();
        ModelChoices choices = serve_model_choices(*own, threads);
        choices.backend_order = entry.backend_order;
        entries.push_back({std::move(*own), std::move(choices)});
    }
    auto specs = server::served_model_specs(s);
    if (!specs) return specs.error();
    for (server::ModelSpec& spec : *specs)
        if (spec.entry) spec.keep_alive_s = entries[*spec.entry].server.keep_alive;
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
    for (const server::ModelSpec& spec : *specs) {
        ids += (ids.empty() ? "" : ", ") + spec.id;
        for (const std::string& alias : spec.aliases) ids += " = " + alias;
    }
    logger().info(
        "serve: {} models ({} from server.models{}{}: {}), loaded on first use within {} bytes; "
        "idle ones unloaded after {} s",
        specs->size(), s.models.size(), s.models_dir.empty() ? "" : ", the rest from ",
        s.models_dir, ids, ro.budget_bytes, s.keep_alive);
    ServedModels out;
    out.loader =
        std::make_unique<EngineLoader>(common, ModelSettings{s, serve_model_choices(s, threads)},
                                       std::move(entries), chat_template, metrics);
    out.registry =
        std::make_unique<server::ModelRegistry>(std::move(*specs), *out.loader, std::move(ro));
    return out;
}

}  // namespace ferrox::cli
