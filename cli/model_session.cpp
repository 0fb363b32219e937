#include "model_session.h"

#include <utility>

#include "ferrox/config_settings.h"
#include "ferrox/log.h"
#include "ferrox/model/resident_ops.h"
#include "ferrox/quant_kind.h"
#include "format.h"

namespace ferrox::cli {

void add_threads_flag(CLI::App& cmd, unsigned& threads) {
    // The CPU plugin declares cpu.threads' range (ABI 1.6): the engine checks the flag
    // against it as it checks the file, and a value past it is a configuration error
    // (exit 2) naming --threads and the range.
    cmd.add_option("-t,--threads", threads,
                   "CPU threads (overrides cpu.threads; the CPU plugin declares its range and "
                   "default, see docs/config.md)");
}

void add_model_choices(CLI::App& cmd, ModelChoices& choices) {
    add_threads_flag(cmd, choices.threads);
    cmd.add_option("-c,--ctx-size", choices.context,
                   "Context length (KV cache positions; default min(4096, training))");
    cmd.add_option("--kv-type", choices.kv_type,
                   "KV cache kind of K and V: f32 (default, exact), f16 (half the memory), q8_0 "
                   "(34 bytes per 32) or q4_0 (18 bytes per 32)")
        ->check(kv_type_choices());
    cmd.add_option("--cache-type-k", choices.kv_type_k,
                   "K's cache kind (-ctk, as llama.cpp); default --kv-type's")
        ->check(kv_type_choices());
    cmd.add_option("--cache-type-v", choices.kv_type_v,
                   "V's cache kind (-ctv, as llama.cpp); default --kv-type's")
        ->check(kv_type_choices());
    cmd.add_option("--resident", choices.resident,
                   "auto (default): keep the whole forward pass on the first backend when it "
                   "has every kernel (ABI 1.2); off: activations in host memory")
        ->check(CLI::IsMember({"auto", "off"}, CLI::ignore_case));
    cmd.add_flag("--special", choices.special,
                 "Parse special-token text in the prompt (\"<|im_end|>\" becomes that token); "
                 "by default a prompt's text stays text");
}

CLI::Validator kv_type_choices() {
    return CLI::IsMember(
        std::vector<std::string>(model::kKvCacheTypeNames.begin(), model::kKvCacheTypeNames.end()),
        CLI::ignore_case);
}

model::KvKinds kv_kinds_of(const ModelChoices& choices) {
    // Each name was checked against kv_type_choices() (or server.kv_type*'s choices).
    const auto kind = [&](const std::string& own) {
        const KindTraits* k = kind_traits(ascii_lower(own.empty() ? choices.kv_type : own));
        return k ? static_cast<ferrox_kind>(k->id) : FERROX_KIND_F32;
    };
    return {kind(choices.kv_type_k), kind(choices.kv_type_v)};
}

Expected<std::unique_ptr<Engine>> open_engine(const CommonOptions& common, const std::string& path,
                                              const ModelChoices& choices, OpenFailure* why) {
    if (why) *why = OpenFailure::BadModel;  // the configuration is the user's to fix
    auto config = load_session_config(common);
    if (!config) return config.error();
    if (!choices.backend_order.empty()) {
        // The configuration keeps one section per listed backend: this model's, in its order.
        std::vector<BackendConfig> backends;
        for (const std::string& name : choices.backend_order) {
            const BackendConfig* b = config->backend(name);
            backends.push_back(b ? *b : BackendConfig{name, required_by_default(name), {}, {}});
        }
        config->backend_order = choices.backend_order;
        config->backends = std::move(backends);
    }
    EngineOptions options;
    options.config = std::move(*config);
    options.plugin_dirs = common.plugin_dirs;
    options.threads = choices.threads;
    options.context = choices.context;
    options.sequences = choices.sequences;
    options.batch = choices.batch;
    options.kv_kinds = kv_kinds_of(choices);
    options.allow_resident = ascii_lower(choices.resident) != "off";
    options.profile = choices.profile;
    options.embeddings = choices.embeddings;
    // 0 and 1 come on every load; what lies between is weights moving to a device.
    options.progress = [last = -1](float fraction) mutable {
        const int tenth = static_cast<int>(fraction * 10.0f);
        if (fraction > 0.0f && fraction < 1.0f && tenth != last) {
            last = tenth;
            logger().info("loading: {}%", tenth * 10);
        }
        return false;
    };
    return Engine::open(path, std::move(options), why);
}

}  // namespace ferrox::cli
