// Engine::open: the one load sequence every front end goes through (the C
// API's ferrox_model_load, run, logits, chat, serve, batched-bench). It
// refuses what is not a decoder, builds the tokenizer, loads the plugins,
// decides the context, sequences and batch by one rule
// (ferrox/model/defaults.h), plans memory once for them, loads the weights
// and releases the header pages. What it opened is then read-only, except
// the model's own single-sequence convenience (Model::forward).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/config.h"
#include "ferrox/dispatch.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox {

// One name per quantity (docs/api.md maps the older names onto these).
struct EngineOptions {
    Config config;  // backends, their options, plugins.paths, registry.strict
    // Replaces backends.order when not empty (a backend the configuration
    // does not list is added with no options).
    std::vector<std::string> backend_order;
    std::vector<std::filesystem::path> plugin_dirs;  // searched first, in order
    unsigned threads = 0;                            // > 0 replaces cpu.threads
    // KV cells shared by every sequence of a context; 0:
    // model::default_context(training context, sequences).
    uint32_t context = 0;
    // Sequences one context holds (1..64). Above 1, a resident backend whose
    // plugin predates ABI 1.3 keeps the model in host memory.
    uint32_t sequences = 1;
    // Tokens per decode: model::derived_batch(batch, context).
    uint32_t batch = 0;
    // The K and V caches' kinds, each F32, F16, Q8_0 or Q4_0 (kKvCacheKinds).
    model::KvKinds kv_kinds;
    bool allow_resident = true;  // false: activations in host memory
    // Model::forward's own context times its ops into this (not owned).
    model::StepProfile* profile = nullptr;
    // Accept an embedding model (a decoder's `pooling_type` mean, cls or
    // last: `ferrox embed`, the server's /v1/embeddings); false refuses it
    // for what it is, as text generation has no use for it.
    bool embeddings = false;
    // Called with 0 before the weights load, fractions while they move to a
    // resident backend, and 1 at the end; returning true cancels the open.
    std::function<bool(float)> progress;
};

// Which step refused, for a caller that maps failures to codes (the C API).
enum class OpenFailure {
    None,
    Io,         // the file could not be opened or read
    BadModel,   // not a decoder, a refused tokenizer or hyper-parameters, bad options
    Backend,    // no ready backend, a required one failed, or the load failed
    Cancelled,  // EngineOptions::progress returned true
};

class FERROX_API Engine {
  public:
    // `failure`, when given, says which step refused.
    static Expected<std::unique_ptr<Engine>> open(const std::filesystem::path& path,
                                                  EngineOptions options,
                                                  OpenFailure* failure = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const Config& config() const { return config_; }
    const PluginSet& plugins() const { return *plugins_; }
    const Dispatcher& dispatcher() const { return *dispatcher_; }
    // The dispatch records (sealing it again reads what ran since).
    KernelRegistry& registry() const { return *registry_; }
    const gguf::File& file() const { return *file_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const model::Model& model() const { return *model_; }
    model::Model& model() { return *model_; }

    // The numbers the rules decided and the memory plan counted.
    uint32_t context() const { return model_->context(); }
    uint32_t batch() const { return model_->max_batch(); }
    uint32_t sequences() const { return sequences_; }
    // A context of exactly those: what a server or a bench makes.
    model::ContextOptions context_options() const;

  private:
    struct Opening;
    Engine() = default;
    Config config_;
    std::unique_ptr<PluginSet> plugins_;
    std::unique_ptr<KernelRegistry> registry_;
    std::unique_ptr<Dispatcher> dispatcher_;
    std::unique_ptr<gguf::File> file_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::unique_ptr<model::Model> model_;
    uint32_t sequences_ = 1;
};

}  // namespace ferrox
