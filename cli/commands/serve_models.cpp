#include "commands/serve_models.h"

#include <algorithm>

#include "chat_prompt.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/log.h"
#include "ferrox/model/capacity.h"
#include "ferrox/model/context.h"
#include "model_session.h"
#include "models_dir.h"
#include "scheduler.h"

namespace ferrox::cli {
namespace {

// Tokens per decode each model's context asks for (as the one-model server).
constexpr uint32_t kServeBatch = 512;

// One model loaded for the server: the engine, and the scheduler (a
// generation model) or the embedder (an embedding model) over its context.
class EngineInstance final : public server::ModelInstance {
  public:
    ~EngineInstance() override {
        if (scheduler) scheduler->stop();
        if (embedder) embedder->stop();
    }
    const server::LoadedModel& api() const override { return loaded; }
    uint64_t bytes() const override { return engine->model().capacity().total_bytes; }
    void begin_drain() override {
        if (scheduler) scheduler->begin_drain();
        if (embedder) embedder->begin_drain();
    }
    bool wait_idle(server::Clock::time_point deadline) override {
        return scheduler ? scheduler->wait_idle(deadline) : embedder->wait_idle(deadline);
    }

    std::unique_ptr<Engine> engine;
    std::unique_ptr<ChatRenderer> renderer;
    std::unique_ptr<server::Scheduler> scheduler;
    std::unique_ptr<server::Embedder> embedder;
    server::LoadedModel loaded;
};

class EngineLoader final : public server::ModelLoader {
  public:
    EngineLoader(const CommonOptions& common, const ServerConfig& s, std::string chat_template,
                 unsigned threads, server::Metrics& metrics)
        : common_(common), s_(s), chat_template_(std::move(chat_template)), metrics_(metrics) {
        choices_.threads = threads;
        choices_.kv_type = s.kv_type;
        choices_.context = s.context;
        choices_.sequences = s.parallel;
        choices_.batch = kServeBatch;
        choices_.embeddings = true;
    }
    // Before its first load a model is counted at its weights (the file);
    // the registry then keeps the capacity plan's total.
    uint64_t bytes_needed(const server::ModelSpec& spec) const override { return spec.file_bytes; }

    Expected<std::unique_ptr<server::ModelInstance>> load(const server::ModelSpec& spec) override {
        logger().info("serve: loading model '{}' from {}", spec.id, spec.path.string());
        auto engine = open_engine(common_, spec.path.string(), choices_);
        if (!engine) return engine.error();
        auto m = std::make_unique<EngineInstance>();
        m->engine = std::move(*engine);
        const Engine& e = *m->engine;
        const model::ContextOptions co = e.context_options();
        auto ctx = model::Context::create(e.model(), co);
        if (!ctx) return ctx.error();
        m->loaded.tokenizer = &e.tokenizer();
        if (e.model().hparams().pooling != model::Pooling::None) {
            server::EmbedderOptions eo;
            eo.pooling = e.model().hparams().pooling;
            eo.max_queue = s_.max_queue;
            m->embedder = std::make_unique<server::Embedder>(std::move(*ctx), eo);
            m->loaded.embedder = m->embedder.get();
            m->loaded.n_embd = e.model().hparams().n_embd;
            m->loaded.embedding_truncation = s_.embedding_truncation;
            m->loaded.max_positions = co.context;
        } else {
            auto tmpl = choose_chat_template(e.file(), chat_template_);
            if (!tmpl) return tmpl.error();
            m->renderer = std::make_unique<ChatRenderer>(std::move(*tmpl), e.file(), e.tokenizer());
            server::SchedulerOptions so;
            so.sequences = co.sequences;
            so.prefill_chunk = std::min(so.prefill_chunk, co.batch);
            so.max_queue = s_.max_queue;
            so.draft_max = s_.spec_draft_n_max;
            m->scheduler = std::make_unique<server::Scheduler>(
                e.tokenizer(), server::context_over(std::move(*ctx)), so, metrics_);
            m->scheduler->start();
            m->loaded.scheduler = m->scheduler.get();
            m->loaded.max_positions = std::min(co.context, e.model().hparams().n_ctx_train);
            m->loaded.grammar_vocab = grammar::TokenTrie::from_tokenizer(e.tokenizer());
            const DetectedChatFamily family = detect_family(m->renderer->chat_template().source());
            const ChatRenderer* renderer = m->renderer.get();
            m->loaded.render_chat = server::ChatRenderFn(
                [renderer](const nlohmann::ordered_json& messages,
                           const nlohmann::ordered_json& tools,
                           const nlohmann::ordered_json& kwargs) -> Expected<server::RenderedChat> {
                    auto p = renderer->render(messages, true, tools, kwargs);
                    if (!p) return p.error();
                    return server::RenderedChat{std::move(p->text), std::move(p->tokens)};
                },
                family);
        }
        logger().info("serve: model '{}' loaded: {}", spec.id, e.model().capacity().summary());
        return std::unique_ptr<server::ModelInstance>(std::move(m));
    }

  private:
    const CommonOptions& common_;
    const ServerConfig s_;
    const std::string chat_template_;
    server::Metrics& metrics_;
    ModelChoices choices_;
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
