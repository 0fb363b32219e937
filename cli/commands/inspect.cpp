// `ferrox inspect`: a GGUF file's metadata (and shards), its tensors by kind, and -- before
// any weight moves -- which kernel each selected backend will use for every
// weight role (the kernel registry's probe report).
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "chat_prompt.h"
#include "commands/commands.h"
#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/log.h"
#include "ferrox/model/capacity.h"
#include "ferrox/model/defaults.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/hparams_summary.h"
#include "ferrox/model/model.h"
#include "ferrox/op.h"
#include "ferrox/quant_kind.h"
#include "format.h"
#include "model_session.h"
#include "output.h"

namespace ferrox::cli {
namespace {

constexpr uint64_t kShownArrayItems = 6;  // longer arrays are abbreviated

nlohmann::json scalar_json(const gguf::Value& v);

nlohmann::json array_json(const gguf::Array& a, bool abbreviate) {
    nlohmann::json out = nlohmann::json::array();
    const uint64_t shown = abbreviate ? std::min(a.size(), kShownArrayItems) : a.size();
    for (uint64_t i = 0; i < shown; ++i) out.push_back(scalar_json(a.at(i)));
    return out;
}

nlohmann::json scalar_json(const gguf::Value& v) {
    return std::visit(
        [](const auto& x) -> nlohmann::json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, gguf::Array>)
                return array_json(x, true);
            else
                return x;
        },
        v);
}

// A JSON rendering for one terminal line, whatever bytes the file held.
std::string one_line(nlohmann::json j) {
    make_encodable(j);
    return escape_text(j.dump(), EscapeFor::Text);
}

std::string value_text(const gguf::Value& v) {
    if (const auto* a = std::get_if<gguf::Array>(&v)) {
        std::string items = one_line(array_json(*a, true));
        if (a->size() > kShownArrayItems)
            items.insert(items.size() - 1, fmt::format(", ... ({} items)", a->size()));
        return fmt::format("{}[{}] {}", value_type_name(a->element_type()), a->size(), items);
    }
    if (const auto* s = std::get_if<std::string>(&v)) return "\"" + shown(*s) + "\"";
    return one_line(scalar_json(v));
}

struct KindSummary {
    uint64_t tensors = 0, bytes = 0, elements = 0;
};

// What a KV cache of the asked kind costs this model: the capacity plan's
// own arithmetic (model::kv_cache_bytes), per position and at the default
// context of one sequence.
struct KvCacheReport {
    const KindTraits* kind = nullptr;        // K's (and V's unless value_kind)
    const KindTraits* value_kind = nullptr;  // V's when it differs from K's
    uint64_t bytes_per_position = 0, context = 0, bytes = 0;
};

KvCacheReport kv_cache_report(const model::Hparams& hp, model::KvKinds kinds) {
    model::CapacityInputs in = model::kv_capacity_inputs(hp, kinds, 1);
    KvCacheReport r;
    r.kind = kind_traits(kinds.key);
    if (kinds.mixed()) r.value_kind = kind_traits(kinds.value);
    r.bytes_per_position = model::kv_cache_bytes(in);
    in.context = model::default_context(hp.n_ctx_train, 1);
    r.context = in.context;
    r.bytes = model::kv_cache_bytes(in);
    return r;
}

int run(const CommonOptions& common, const std::string& path, bool json, model::KvKinds kv_kinds) {
    auto file = gguf::File::open(path);
    if (!file) {
        logger().error("{}", file.error().message());
        return kExitBadInput;
    }
    auto session = open_session(common);
    if (!session) {
        logger().error("{}", session.error().message());
        return kExitBadInput;
    }
    std::map<std::string, KindSummary> kinds;
    for (const auto& t : file->tensors()) {
        auto& k = kinds[std::string(kind_name(t.kind()))];
        ++k.tensors;
        k.bytes += t.byte_size();
        k.elements += t.element_count();
    }

    // The probe: what every weight product will use, decided before anything is loaded.
    KernelRegistry registry;
    Dispatcher dispatcher(session->plugins.selected(), registry);
    auto hp = model::read_hparams(*file);
    std::string model_error;
    model::Residency residency;
    KvCacheReport kv_cache;
    if (hp) {
        auto shape = model::check_kv_cache_shape(kv_kinds, *hp);
        auto probed = shape ? model::probe_model(*file, *hp, dispatcher, kv_kinds)
                            : Expected<model::Residency>(shape.error());
        if (shape) kv_cache = kv_cache_report(*hp, kv_kinds);
        if (probed)
            residency = std::move(*probed);
        else
            model_error = probed.error().message();
    } else {
        model_error = hp.error().message();
    }
    const RegistryReport report = registry.seal();

    if (json) {
        nlohmann::json doc;
        doc["file"] = path;
        doc["version"] = file->version();
        doc["metadata"] = nlohmann::json::object();
        for (const auto& kv : file->metadata()) doc["metadata"][kv.key] = scalar_json(kv.value);
        for (const auto& [name, k] : kinds)
            doc["tensor_kinds"][name] = {
                {"tensors", k.tensors}, {"bytes", k.bytes}, {"elements", k.elements}};
        doc["tensor_count"] = file->tensors().size();
        doc["shards"] = nlohmann::json::array();
        for (const auto& shard : file->shards())
            doc["shards"].push_back({{"file", shard.path.string()},
                                     {"tensors", shard.tensor_count},
                                     {"tensor_bytes", shard.tensor_bytes},
                                     {"file_bytes", shard.mapping->bytes().size()}});
        doc["chat_template"] = chat_template_report(*file);
        if (hp) {
            nlohmann::json facts = nlohmann::json::object();
            for (const model::HparamFact& f : model::summarize(*hp))
                std::visit([&](const auto& v) { facts[f.name] = v; }, f.value);
            doc["model"] = std::move(facts);
        }
        if (!model_error.empty())
            doc["model_error"] = model_error;
        else
            doc["residency"] = {{"resident", residency.resident}, {"reason", residency.reason}};
        if (const KvCacheReport& c = kv_cache; c.kind) {
            doc["kv_cache"] = {{"kind", c.kind->name},
                               {"block_bytes", c.kind->block_bytes},
                               {"block_elements", c.kind->block_elements},
                               {"bytes_per_position", c.bytes_per_position},
                               {"context", c.context},
                               {"bytes", c.bytes}};
            // Mixed kinds (-ctk / -ctv): the above are K's, these V's.
            if (c.value_kind)
                doc["kv_cache"].update({{"value_kind", c.value_kind->name},
                                        {"value_block_bytes", c.value_kind->block_bytes},
                                        {"value_block_elements", c.value_kind->block_elements}});
        }
        doc["kernels"] = nlohmann::json::array();
        for (const auto& e : report.entries)
            doc["kernels"].push_back({{"backend", e.key.backend},
                                      {"op", op_name(e.key.op)},
                                      {"role", e.key.role},
                                      {"kind", kind_name(e.key.kind)},
                                      {"outcome", outcome_name(e.outcome)},
                                      {"detail", e.detail},
                                      {"count", e.count},
                                      {"violation", e.is_violation()}});
        print_json(std::move(doc));
        return model_error.empty() ? kExitOk : kExitBadInput;
    }

    std::cout << fmt::format("{}: GGUF v{}, {} metadata keys, {} tensors\n\nmetadata:\n",
                             shown(path), file->version(), file->metadata().size(),
                             file->tensors().size());
    for (const auto& kv : file->metadata())
        std::cout << fmt::format("  {} = {}\n", shown(kv.key), value_text(kv.value));
    if (file->is_split()) {
        std::cout << fmt::format("\nshards: {} files, {} mapped\n", file->shards().size(),
                                 human_bytes(file->mapped_bytes()));
        std::vector<std::vector<std::string>> shard_rows{{"  FILE", "TENSORS", "TENSOR BYTES"}};
        for (const auto& shard : file->shards())
            shard_rows.push_back({"  " + shown(shard.path.string()),
                                  std::to_string(shard.tensor_count),
                                  human_bytes(shard.tensor_bytes)});
        std::cout << render_table(shard_rows);
    }
    std::cout << "\ntensors by kind:\n";
    std::vector<std::vector<std::string>> rows{{"  KIND", "TENSORS", "ELEMENTS", "SIZE"}};
    for (const auto& [name, k] : kinds)
        rows.push_back({"  " + name, std::to_string(k.tensors), std::to_string(k.elements),
                        human_bytes(k.bytes)});
    std::cout << render_table(rows);
    std::cout << "\n" << chat_template_summary(chat_template_report(*file)) << "\n";
    if (hp) {
        std::cout << "\nmodel, as ferrox runs it (layer_pattern: G global, L sliding window, "
                     "C chunked, R recurrent, F an FFN alone, attention in lower case without "
                     "RoPE):\n";
        for (const model::HparamFact& f : model::summarize(*hp))
            std::visit(
                [&](const auto& v) {
                    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>)
                        std::cout << fmt::format("  {} = {}\n", f.name, shown(v));
                    else
                        std::cout << fmt::format("  {} = {}\n", f.name, v);
                },
                f.value);
    }
    if (!model_error.empty()) {
        std::cout << "\n";
        logger().error("{}", model_error);
        return kExitBadInput;
    }
    if (const KvCacheReport& c = kv_cache; c.kind)
        std::cout << fmt::format(
            "\nKV cache ({}): {} bytes per {} element{}{}; {} per position, {} at context {}\n",
            c.value_kind ? fmt::format("K {} / V {}", c.kind->name, c.value_kind->name)
                         : std::string(c.kind->name),
            c.kind->block_bytes, c.kind->block_elements, c.kind->block_elements == 1 ? "" : "s",
            c.value_kind ? fmt::format(" (K), {} per {} (V)", c.value_kind->block_bytes,
                                       c.value_kind->block_elements)
                         : std::string(),
            human_bytes(c.bytes_per_position), human_bytes(c.bytes), c.context);
    std::cout << fmt::format("\nkernels (probe, nothing loaded) for backends [{}]:\n",
                             fmt::join(session->config.backend_order, ", "));
    std::vector<std::vector<std::string>> k{
        {"  BACKEND", "OP", "ROLE", "KIND", "OUTCOME", "KERNEL / FALLBACK / REASON", "TENSORS"}};
    for (const auto& e : report.entries)
        k.push_back({"  " + e.key.backend, std::string(op_name(e.key.op)), e.key.role,
                     std::string(kind_name(e.key.kind)), std::string(outcome_name(e.outcome)),
                     e.detail, std::to_string(e.count)});
    std::cout << render_table(k);
    std::cout << (residency.resident
                      ? fmt::format("forward pass: resident on the {} backend\n",
                                    session->config.backend_order.front())
                      : fmt::format("forward pass: activations in host memory ({})\n",
                                    residency.reason));
    std::cout << fmt::format("{} entries, {} not hits, {} violations\n", report.entries.size(),
                             report.misses.size(), report.violations.size());
    return kExitOk;
}

}  // namespace

Command add_inspect_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "inspect",
        "Show a GGUF model's metadata, tensors, the model as ferrox will run it and the kernels "
        "each op will use");
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto kv = std::make_shared<ModelChoices>();  // its kv_type, kv_type_k and kv_type_v
    cmd->add_option("model", *path, "GGUF model file")->required();
    cmd->add_flag("--json", *json, "Print one JSON object instead of tables");
    cmd->add_option("--kv-type", kv->kv_type,
                    "KV cache kind whose attention kernel and bytes to report: f32, f16, q8_0 "
                    "or q4_0")
        ->check(kv_type_choices());
    cmd->add_option("--cache-type-k", kv->kv_type_k, "K's kind alone (-ctk); default --kv-type's")
        ->check(kv_type_choices());
    cmd->add_option("--cache-type-v", kv->kv_type_v, "V's kind alone (-ctv); default --kv-type's")
        ->check(kv_type_choices());
    return {cmd,
            [path, json, kv, &common]() { return run(common, *path, *json, kv_kinds_of(*kv)); }};
}

}  // namespace ferrox::cli
