#include "model_session.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "ferrox/log.h"
#include "ferrox/model/hparams.h"
#include "ferrox/quant_kind.h"

namespace ferrox::cli {
namespace {

// cpu.threads, replaced (or added) in the options the plugin will be created with.
void override_threads(Config& config, unsigned threads) {
    for (auto& b : config.backends) {
        if (b.name != "cpu") continue;
        bool set = false;
        for (auto& [key, value] : b.options)
            if (key == "threads") value = std::to_string(threads), set = true;
        if (!set) b.options.emplace_back("threads", std::to_string(threads));
    }
}

}  // namespace

void add_model_choices(CLI::App& cmd, ModelChoices& choices) {
    // cpu.threads' range: past it the plugin's create() fails, which logits reported as a
    // backend failure (exit 1) instead of a usage error.
    cmd.add_option("-t,--threads", choices.threads, "CPU threads (overrides cpu.threads)")
        ->check(CLI::Range(0u, 1024u));
    cmd.add_option("-c,--ctx-size", choices.context,
                   "Context length (KV cache positions; default min(4096, training))");
    cmd.add_option("--kv-type", choices.kv_type,
                   "KV cache element kind: f32 (default, exact) or f16 (half the memory)")
        ->check(CLI::IsMember({"f32", "f16"}, CLI::ignore_case));
    cmd.add_option("--resident", choices.resident,
                   "auto (default): keep the whole forward pass on the first backend when it "
                   "has every kernel (ABI 1.2); off: activations in host memory")
        ->check(CLI::IsMember({"auto", "off"}, CLI::ignore_case));
    cmd.add_flag("--special", choices.special,
                 "Parse special-token text in the prompt (\"<|im_end|>\" becomes that token); "
                 "by default a prompt's text stays text");
}

Expected<ModelSession> open_model(const CommonOptions& common, const std::string& path,
                                  const ModelChoices& choices) {
    const unsigned threads = choices.threads;
    uint32_t context = choices.context;
    auto config = load_session_config(common);
    if (!config) return config.error();
    if (threads > 0) override_threads(*config, threads);
    LoaderOptions loader;
    loader.plugin_dirs = common.plugin_dirs;
    PluginSet plugins = PluginSet::load(*config, loader);
    for (const PluginRecord* r : plugins.required_failures())
        return make_error("required backend '{}' is {}: {}", r->name, state_name(r->state),
                          r->reason);
    // Every backend optional and none ready: refused now, not at the first token.
    if (plugins.selected().empty()) {
        std::vector<std::string> states;
        for (const auto& r : plugins.records())
            if (r.state != PluginState::NotSelected)
                states.push_back(
                    fmt::format("{} is {}: {}", r.name, state_name(r.state), r.reason));
        return make_error("no backend of backends.order [{}] is ready ({}); see `ferrox backends`",
                          fmt::join(config->backend_order, ", "), fmt::join(states, "; "));
    }
    ModelSession ms{Session{std::move(*config), std::move(plugins)}, {}, {}, {}, {}, {}};
    ms.registry = std::make_unique<KernelRegistry>();
    ms.dispatcher = std::make_unique<Dispatcher>(ms.session.plugins.selected(), *ms.registry);
    auto file = gguf::File::open(path);
    if (!file) return file.error();
    ms.file = std::make_unique<gguf::File>(std::move(*file));
    // An adapter or projector has no tokenizer: say what the file is instead.
    if (auto r = model::refuse_non_decoder(*ms.file); !r) return r.error();
    auto tokenizer = Tokenizer::from_gguf(*ms.file);
    if (!tokenizer) return tokenizer.error();
    ms.tokenizer = std::move(*tokenizer);
    model::ModelOptions options;
    options.registry_strict = ms.session.config.registry_strict;
    auto train = model::read_hparams(*ms.file);
    if (!train) return train.error();
    if (context == 0) context = std::min(4096u, train->n_ctx_train);
    if (context > train->n_ctx_train)
        logger().warn(
            "context {} exceeds the {} positions {} was trained on; positions past {} are "
            "outside what the model learned",
            context, train->n_ctx_train, path, train->n_ctx_train);
    options.context = context;
    options.kv_kind = kind_traits(choices.kv_type)->id;
    options.profile = choices.profile;
    std::string resident = choices.resident;
    for (char& c : resident) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    options.allow_resident = resident != "off";
    options.max_sequences = choices.sequences;
    // Progress while weights move to a device: a line per tenth on stderr.
    options.on_upload = [last = -1](uint64_t done, uint64_t total) mutable {
        const int tenth = total ? static_cast<int>(done * 10 / total) : 10;
        if (tenth == last) return;
        last = tenth;
        logger().info("uploading weights: {} of {} MiB", done >> 20, total >> 20);
    };
    auto m = model::Model::load(*ms.file, *ms.dispatcher, *ms.registry, options);
    if (!m) return m.error();
    ms.model = std::move(*m);
    ms.file->release_header_pages();  // the tokenizer and the model hold what they need
    return ms;
}

}  // namespace ferrox::cli
