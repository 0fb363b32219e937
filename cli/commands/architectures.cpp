// `ferrox architectures`: the architectures ferrox runs, the metadata keys
// each one's files are read for (ferrox/model/key_rules.h) and the tensors
// they hold, as binding reads them (ferrox/model/tensor_rules.h). The
// tiny-model generator writes its files from the --json form.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "ferrox/log.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/key_rules.h"
#include "ferrox/model/tensor_rules.h"
#include "output.h"

namespace ferrox::cli {
namespace {

using model::Extent;
using model::TensorForm;
using model::TensorRule;

// The shape in GGUF's order, fastest dimension first, as `ferrox inspect` and
// the gguf package print a tensor's shape.
std::vector<std::string> shape(const TensorRule& r) {
    std::string rows(model::extent_name(r.rows));
    if (r.n_parts > 0) {
        rows.clear();
        for (uint8_t i = 0; i < r.n_parts; ++i)
            rows += (i ? "+" : "") + std::string(model::extent_name(r.parts[i].rows));
    }
    const std::string cols(model::extent_name(r.cols));
    switch (r.form) {
        case TensorForm::Rows:
        case TensorForm::Matrix:
            return {cols, rows};
        case TensorForm::Experts:
            return {cols, rows, std::string(model::extent_name(r.stack))};
        case TensorForm::Vector:
            return r.cols == Extent::One ? std::vector{rows} : std::vector{rows, cols};
    }
    return {};
}

std::string full_name(const TensorRule& r, std::string_view name) {
    return r.scope == model::TensorScope::Layer ? "blk.N." + std::string(name) : std::string(name);
}

nlohmann::json rule_json(const TensorRule& r) {
    nlohmann::json j{{"name", full_name(r, r.name)},     {"scope", model::scope_name(r.scope)},
                     {"form", model::form_name(r.form)}, {"shape", shape(r)},
                     {"use", model::use_name(r.use)},    {"when", model::when_name(r.when)}};
    if (r.n_parts > 0) {
        j["parts"] = nlohmann::json::array();
        for (uint8_t i = 0; i < r.n_parts; ++i)
            j["parts"].push_back({{"name", full_name(r, r.parts[i].name)},
                                  {"rows", model::extent_name(r.parts[i].rows)}});
    }
    if (!r.fused_into.empty()) j["fused_into"] = full_name(r, r.fused_into);
    if (!r.stand_in.empty()) j["stand_in"] = full_name(r, r.stand_in);
    return j;
}

// What the text form says of a rule's presence, in words.
std::string presence(const TensorRule& r) {
    std::string s(model::use_name(r.use));
    if (r.when == model::TensorWhen::QkvBiases) s += " when the file has q/k/v biases";
    if (r.when == model::TensorWhen::RopeFreqScaling) s += " unless rope.scaling.type is longrope";
    if (r.when == model::TensorWhen::LongRopeScaling) s += " when rope.scaling.type is longrope";
    if (r.when == model::TensorWhen::Dense)
        s += " on layers without experts (no expert_count, a leading dense layer, or between "
             "interleave_moe_layer_step's)";
    if (r.when == model::TensorWhen::Experts)
        s += " on layers with experts (expert_count, past the leading dense layers, every "
             "interleave_moe_layer_step-th)";
    if (r.when == model::TensorWhen::SharedExperts)
        s += " on layers with experts when the file has shared experts (expert_shared_count, "
             "the gated one's width, or a row with one always: llama4)";
    if (r.when == model::TensorWhen::NextN)
        s += " on NextN blocks (the last nextn_predict_layers; kept, not run)";
    if (r.when == model::TensorWhen::QLowRank) s += " when attention.q_lora_rank > 0";
    if (r.when == model::TensorWhen::QDirect) s += " unless attention.q_lora_rank > 0";
    if (r.when == model::TensorWhen::MlaSplit) s += " when attention.key_length_mla is given";
    if (r.when == model::TensorWhen::MlaKvB)
        s += " when attention.key_length_mla is absent (an older conversion)";
    if (r.when == model::TensorWhen::AttentionLayer) s += " on full-attention layers";
    if (r.when == model::TensorWhen::RecurrentLayer) s += " on recurrent layers";
    if (r.when == model::TensorWhen::FfnLayer) s += " on FFN-only layers";
    if (!r.fused_into.empty()) s += ", or rows of " + full_name(r, r.fused_into);
    if (!r.stand_in.empty()) s += "; absent: " + full_name(r, r.stand_in) + " stands in";
    return s;
}

nlohmann::json key_json(std::string_view arch, const model::KeyRule& k) {
    nlohmann::json j{{"key", fmt::format("{}.{}", arch, k.suffix)},
                     {"use", model::key_use_name(k.use)}};
    if (!k.fallback.empty()) j["fallback"] = k.fallback;
    if (!k.when.empty()) j["when"] = k.when;
    return j;
}

std::string key_text(const model::KeyRule& k) {
    std::string s(model::key_use_name(k.use));
    if (k.use == model::KeyUse::Optional && !k.fallback.empty()) s += ", else " + k.fallback;
    if (k.use == model::KeyUse::Refused)
        s += k.fallback.empty() ? " when present" : " unless " + k.fallback;
    if (!k.when.empty()) s += " (" + std::string(k.when) + ")";
    return s;
}

// The row's layer kinds in words: one kind, or the rule that mixes them.
std::string layer_pattern(const model::ArchSpec& spec) {
    if (spec.delta_net_layers)
        return "the layers attention.recurrent_layers lists false, else every "
               "full_attention_interval-th layer (else 4th), attend over the KV cache; the "
               "others are Gated DeltaNet layers with a per-sequence state";
    if (spec.shortconv_layers)
        return "the layers with attention.head_count_kv > 0 attend over the KV cache; those "
               "with 0 are short-convolution layers with a per-sequence window";
    if (spec.attention_free)
        return "every layer is a Mamba-2 block with a per-sequence window and state; no "
               "attention, no FFN";
    if (spec.attn_chunk)
        return fmt::format(
            "every {}th layer attends over the whole KV cache without RoPE, q scaled by the "
            "attention temperature 1 + {} ln(floor((pos + {}) / {}) + 1); the others rotate and "
            "attend only within their chunk of {} positions{}; experts on every "
            "interleave_moe_layer_step-th layer, a dense FFN on the others",
            spec.no_rope_period, spec.nope_temperature.scale, spec.nope_temperature.offset,
            spec.nope_temperature.length, spec.attn_chunk,
            spec.rope_layer_qk_l2_norm ? ", q and k L2-normed after RoPE (unless expert_count is "
                                         "128)"
                                       : "");
    if (spec.mamba2_layers && spec.one_block_layers)
        return "each layer is one block: attention over the KV cache where "
               "attention.head_count_kv > 0, an FFN alone where feed_forward_length > 0, a "
               "Mamba-2 block with a per-sequence window and state where both are 0";
    if (spec.mamba2_layers)
        return "the layers with attention.head_count_kv > 0 attend over the KV cache; those "
               "with 0 are Mamba-2 blocks with a per-sequence window and state; an FFN after "
               "either";
    return "every layer attends over the KV cache";
}

int list(const std::vector<std::string>& names, bool json) {
    std::vector<const model::ArchSpec*> chosen;
    for (const std::string& name : names) {
        const model::ArchSpec* spec = model::find_architecture(name);
        if (!spec) {
            std::string known;
            for (const model::ArchSpec& a : model::architectures())
                known += (known.empty() ? "" : ", ") + std::string(a.name);
            logger().error("architectures: '{}' is not an architecture ferrox runs ({})",
                           shown(name), known);
            return kExitBadInput;
        }
        chosen.push_back(spec);
    }
    if (names.empty())
        for (const model::ArchSpec& a : model::architectures()) chosen.push_back(&a);
    nlohmann::json doc{{"architectures", nlohmann::json::array()}};
    for (const model::ArchSpec* spec : chosen) {
        const std::vector<TensorRule> rules = model::tensor_rules(*spec);
        if (json) {
            nlohmann::json tensors = nlohmann::json::array();
            for (const TensorRule& r : rules) tensors.push_back(rule_json(r));
            nlohmann::json keys = nlohmann::json::array();
            for (const model::KeyRule& k : model::key_rules(*spec))
                keys.push_back(key_json(spec->name, k));
            doc["architectures"].push_back({{"name", spec->name},
                                            {"layers", layer_pattern(*spec)},
                                            {"keys", keys},
                                            {"tensors", tensors}});
            continue;
        }
        std::cout << spec->name << "\n  keys:\n";
        for (const model::KeyRule& k : model::key_rules(*spec))
            std::cout << fmt::format("    {:<40} {}\n", fmt::format("{}.{}", spec->name, k.suffix),
                                     key_text(k));
        if (spec->delta_net_layers || spec->shortconv_layers || spec->mamba2_layers ||
            spec->attn_chunk)
            std::cout << "  layers: " << layer_pattern(*spec) << "\n";
        std::cout << "  tensors:\n";
        for (const TensorRule& r : rules) {
            std::string dims;
            for (const std::string& d : shape(r)) dims += (dims.empty() ? "" : ", ") + d;
            std::cout << fmt::format("    {:<32} {:<36} {}\n", full_name(r, r.name),
                                     "[" + dims + "]", presence(r));
        }
    }
    if (json) print_json(std::move(doc));
    return kExitOk;
}

}  // namespace

Command add_architectures_command(CLI::App& app, CommonOptions&) {
    auto* cmd = app.add_subcommand(
        "architectures",
        "List the architectures ferrox runs, the metadata keys each one's files are read for "
        "(required, optional and the value that stands in, refused unless at a value) and the "
        "tensors they hold (name, shape in GGUF order, required or optional); a file with any "
        "other tensor is refused");
    auto names = std::make_shared<std::vector<std::string>>();
    auto json = std::make_shared<bool>(false);
    cmd->add_option("name", *names, "Only these architectures (general.architecture values)");
    cmd->add_flag("--json", *json,
                  "Print one JSON object: {\"architectures\": [{name, keys, tensors}]}");
    return {cmd, [names, json]() { return list(*names, *json); }};
}

}  // namespace ferrox::cli
