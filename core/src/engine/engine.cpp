#include "ferrox/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "ferrox/log.h"
#include "ferrox/model/defaults.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/kv_cells.h"
#include "ferrox/quant_kind.h"

namespace ferrox {
namespace {

// backends.order replaced by `order`; a backend the configuration already
// describes keeps its options.
void override_backend_order(Config& config, const std::vector<std::string>& order) {
    std::vector<BackendConfig> backends;
    for (const std::string& name : order) {
        const BackendConfig* known = config.backend(name);
        backends.push_back(known ? *known : BackendConfig{name, false, {}, {}});
    }
    config.backend_order = order;
    config.backends = std::move(backends);
}

// cpu.threads, replaced (or added) in the options the plugin is created with;
// the CPU plugin's declared range checks it as it checks the file's value, and
// an error names the flag.
void override_threads(Config& config, unsigned threads) {
    for (auto& b : config.backends)
        if (b.name == "cpu") b.set_option("threads", std::to_string(threads), "--threads");
}

// A required backend that did not load, or no backend ready at all: refused
// now, not at the first token, naming each backend's state.
Expected<void> require_ready_backend(const PluginSet& plugins, const Config& config) {
    for (const PluginRecord* r : plugins.required_failures())
        return make_error("required backend '{}' is {}: {}", r->name, state_name(r->state),
                          r->reason);
    if (!plugins.selected().empty()) return {};
    std::vector<std::string> states;
    for (const auto& r : plugins.records())
        if (r.state != PluginState::NotSelected)
            states.push_back(fmt::format("{} is {}: {}", r.name, state_name(r.state), r.reason));
    return make_error("no backend of backends.order [{}] is ready ({}); see `ferrox backends`",
                      fmt::join(config.backend_order, ", "), fmt::join(states, "; "));
}

Expected<void> check_options(const EngineOptions& o) {
    if (o.sequences == 0 || o.sequences > model::KvCells::kMaxSeq)
        return make_error("sequences {} is outside 1..{}", o.sequences, model::KvCells::kMaxSeq);
    if (auto r = model::check_kv_cache_kind(o.kv_kinds.key); !r) return r;
    return model::check_kv_cache_kind(o.kv_kinds.value);
}

// Above each sequence's share of the training context, positions are ones
// the model never learned: allowed (a user may know better), but said.
void warn_past_training(const std::filesystem::path& path, uint32_t context, uint32_t sequences,
                        uint32_t n_ctx_train) {
    if (uint64_t{context} <= uint64_t{sequences} * n_ctx_train) return;
    logger().warn(
        "context {} exceeds the {} positions {} was trained on; positions past {} are outside "
        "what the model learned",
        context, uint64_t{sequences} * n_ctx_train, path.string(), n_ctx_train);
}

}  // namespace

Engine::~Engine() = default;

model::ContextOptions Engine::context_options() const {
    model::ContextOptions o;
    o.context = context();
    o.sequences = sequences_;
    o.batch = batch();
    return o;
}

// The steps of Engine::open, each refusing with the failure it stands for.
struct Engine::Opening {
    Engine& e;
    OpenFailure& why;

    Error refuse(OpenFailure kind, Error error) {
        why = kind;
        return error;
    }

    // The file, what it is, and its tokenizer: before any plugin or weight,
    // so that an adapter, a projector or a refused tokenizer costs nothing.
    Expected<model::Hparams> read_file(const std::filesystem::path& path, bool embeddings) {
        auto file = gguf::File::open(path);
        if (!file) return refuse(OpenFailure::Io, file.error());
        e.file_ = std::make_unique<gguf::File>(std::move(*file));
        if (auto r = model::refuse_non_decoder(*e.file_, embeddings); !r)
            return refuse(OpenFailure::BadModel, r.error());
        auto tokenizer = Tokenizer::from_gguf(*e.file_);
        if (!tokenizer) return refuse(OpenFailure::BadModel, tokenizer.error());
        e.tokenizer_ = std::move(*tokenizer);
        auto hp = model::read_hparams(*e.file_);
        if (!hp) return refuse(OpenFailure::BadModel, hp.error());
        return hp;
    }

    Expected<void> load_plugins(EngineOptions& options) {
        e.config_ = std::move(options.config);
        if (!options.backend_order.empty())
            override_backend_order(e.config_, options.backend_order);
        if (options.threads > 0) override_threads(e.config_, options.threads);
        LoaderOptions loader;
        loader.plugin_dirs = std::move(options.plugin_dirs);
        e.plugins_ = std::make_unique<PluginSet>(PluginSet::load(e.config_, loader));
        // A section its plugin refused is a configuration error, required or not.
        for (const PluginRecord* r : e.plugins_->option_errors())
            return refuse(OpenFailure::BadModel, make_error("backend '{}' is {}: {}", r->name,
                                                            state_name(r->state), r->reason));
        if (auto r = require_ready_backend(*e.plugins_, e.config_); !r)
            return refuse(OpenFailure::Backend, r.error());
        e.registry_ = std::make_unique<KernelRegistry>();
        e.dispatcher_ = std::make_unique<Dispatcher>(e.plugins_->selected(), *e.registry_);
        return {};
    }

    // The weights, planned once for the decided context, batch and sequences.
    Expected<void> load_model(const EngineOptions& options, const model::Hparams& train) {
        const uint32_t context = options.context
                                     ? options.context
                                     : model::default_context(train.n_ctx_train, options.sequences);
        warn_past_training(e.file_->path(), context, options.sequences, train.n_ctx_train);
        model::ModelOptions mo;
        mo.context = context;
        mo.batch = model::derived_batch(options.batch, context);
        mo.sequences = options.sequences;
        mo.registry_strict = e.config_.registry_strict;
        mo.kv_kinds = options.kv_kinds;
        mo.allow_resident = options.allow_resident;
        mo.profile = options.profile;
        const auto& progress = options.progress;
        if (progress && progress(0.0f))
            return refuse(OpenFailure::Cancelled, Error("cancelled before loading the model"));
        bool cancelled = false;
        if (progress)
            mo.on_upload = [&](uint64_t done, uint64_t total) {
                const float f =
                    total ? 0.1f + 0.9f * static_cast<float>(done) / static_cast<float>(total)
                          : 1.0f;
                if (!cancelled && progress(f)) cancelled = true;
            };
        auto loaded = model::Model::load(*e.file_, *e.dispatcher_, *e.registry_, mo);
        if (!loaded) return refuse(OpenFailure::Backend, loaded.error());
        e.model_ = std::move(*loaded);
        e.sequences_ = options.sequences;
        if (cancelled || (progress && progress(1.0f)))
            return refuse(OpenFailure::Cancelled, Error("cancelled by the progress callback"));
        return {};
    }
};

Expected<std::unique_ptr<Engine>> Engine::open(const std::filesystem::path& path,
                                               EngineOptions options, OpenFailure* failure) {
    OpenFailure ignored = OpenFailure::None;
    OpenFailure& why = failure ? *failure : ignored;
    why = OpenFailure::None;
    std::unique_ptr<Engine> e(new Engine());
    Opening step{*e, why};
    if (auto r = check_options(options); !r) return step.refuse(OpenFailure::BadModel, r.error());
    auto train = step.read_file(path, options.embeddings);
    if (!train) return train.error();
    if (auto r = step.load_plugins(options); !r) return r.error();
    if (auto r = step.load_model(options, *train); !r) return r.error();
    e->file_->release_header_pages();  // the tokenizer and the model hold what they need
    return e;
}

}  // namespace ferrox
