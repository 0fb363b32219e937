#include "ferrox/model/key_rules.h"

#include <fmt/format.h>

namespace ferrox::model {
namespace {

constexpr auto R = KeyUse::Required;
constexpr auto O = KeyUse::Optional;
constexpr auto X = KeyUse::Refused;

}  // namespace

// In the order read_hparams reads them; each line says what its code does.
std::vector<KeyRule> key_rules(const ArchSpec& spec) {
    std::vector<KeyRule> k = {
        // 1 mean, 2 cls, 3 last: an embedding model (ferrox embed, /v1/embeddings);
        // 4 rank, on a row with a rank head: a reranker (/v1/rerank).
        {"pooling_type", O, "0 (a decoder)", {}},
        // false: non-causal attention, pooled output only (a non_causal row is, whatever it says).
        {"attention.causal", spec.non_causal ? KeyUse::Ignored : O, "true", {}},
        {"embedding_length", R, {}, {}},
        {"block_count", R, {}, {}},
    };
    if (spec.attention_free) {  // no attention, no FFN: converters write 0 for their keys
        for (KeyRule rule : std::initializer_list<KeyRule>{
                 {"context_length", R, {}, {}},
                 {"attention.layer_norm_rms_epsilon", R, {}, {}},
                 {"ssm.conv_kernel", R, {}, {}},
                 {"ssm.inner_size", R, {}, {}},
                 {"ssm.state_size", R, {}, {}},
                 {"ssm.time_step_rank", R, {}, {}},
                 {"ssm.group_count", R, {}, {}},
                 {"attention.head_count", KeyUse::Ignored, {}, {}},
                 {"feed_forward_length", KeyUse::Ignored, {}, {}},
             })
            k.push_back(std::move(rule));
        return k;
    }
    if (spec.rank_head)  // a rank head's outputs (pooling 4, rank), one per label
        k.insert(k.begin() + 1, {"classifier.output_labels", O, "one output", {}});
    if (spec.nextn_layers)  // the last ones NextN blocks, kept and not run
        k.push_back({"nextn_predict_layers", O, "0", {}});
    for (KeyRule rule : std::initializer_list<KeyRule>{
             {"attention.head_count", R, {}, {}},
             // lfm2, the Mamba-2 hybrids: one per layer, 0 for a recurrent layer.
             {"attention.head_count_kv",
              kinds_by_kv_heads(spec) ? R : O,
              kinds_by_kv_heads(spec) ? "" : "attention.head_count",
              {}},
             {"context_length", R, {}, {}},
             {norm_eps_key(spec), R, {}, {}},
             {"attention.key_length", O, "embedding_length / attention.head_count", {}},
             {"attention.value_length", O, "attention.key_length", {}},
             {"rope.dimension_count", spec.partial_rotary ? O : X, "attention.key_length", {}},
             // gemma4's sliding layers rotate their own (whole) head.
             {"rope.dimension_count_swa",
              spec.per_layer_geometry_keys ? O : X,
              "rope.dimension_count",
              {}},
             {"rope.freq_base", O, "10000", {}},
             {"rope.scaling.type", O, "linear", {}},
             {"rope.scaling.factor", O, "0 (unscaled)", {}},
             {"rope.scale_linear", O, "0 (unscaled)", "without rope.scaling.factor"},
             {"rope.scaling.attn_factor", O, "1", {}},
             {"rope.scaling.original_context_length", O, "context_length", {}},
         })
        k.push_back(std::move(rule));
    if (spec.norm_eps_fallback)  // nemotron_h: RMSNorm's own, where the file has it
        k.push_back({"attention.layer_norm_rms_epsilon", O, "attention.layer_norm_epsilon", {}});
    // YaRN's tuning keys: read where llama.cpp's graph reads them, else only
    // their fixed value is accepted.
    const struct {
        uint8_t bit;
        std::string_view suffix, fixed;
    } yarn[] = {{kYarnBetaFast, "rope.scaling.yarn_beta_fast", "32"},
                {kYarnBetaSlow, "rope.scaling.yarn_beta_slow", "1"},
                {kYarnExtFactor, "rope.scaling.yarn_ext_factor", "1 with YaRN, else 0"},
                {kYarnAttnFactor, "rope.scaling.yarn_attn_factor", "1"},
                {kYarnLogMultiplier, "rope.scaling.yarn_log_multiplier", "0"}};
    for (const auto& y : yarn)
        k.push_back({y.suffix, (spec.yarn_keys & y.bit) ? O : X, std::string(y.fixed), {}});
    if (spec.final_softcap_only) {
        k.push_back({"attn_logit_softcapping", X, {}, {}});
        k.push_back({"final_logit_softcapping", O, "0 (uncapped)", {}});
    } else if (spec.softcapping) {
        k.push_back({"attn_logit_softcapping", O, "50", {}});
        k.push_back({"final_logit_softcapping", O, "30", {}});
    } else {
        k.push_back({"attn_logit_softcapping", X, {}, {}});
        k.push_back({"final_logit_softcapping", X, {}, {}});
    }
    if (spec.sliding_window) {
        if (spec.default_window != 0)
            k.push_back(
                {"attention.sliding_window", O, fmt::format("{}", spec.default_window), {}});
        else if (spec.window_optional)
            k.push_back({"attention.sliding_window", O, "0 (no window)", {}});
        else
            k.push_back({"attention.sliding_window", R, {}, {}});
        if (spec.window_pattern_array)
            k.push_back({"attention.sliding_window_pattern", R, {}, {}});
        else
            k.push_back(
                {"attention.sliding_window_pattern",
                 O,
                 fmt::format("{} (one global layer in {})", spec.window_period, spec.window_period),
                 {}});
        k.push_back({"rope.freq_base_swa",
                     O,
                     spec.local_rope_base != 0 ? fmt::format("{}", spec.local_rope_base)
                                               : std::string("rope.freq_base"),
                     {}});
    } else if (spec.attn_chunk) {  // llama4: llama.cpp's constant; the file may only agree
        k.push_back({"attention.sliding_window",
                     O,
                     fmt::format("{} (the chunk; no other value)", spec.attn_chunk),
                     {}});
        k.push_back({"attention.sliding_window_pattern",
                     O,
                     fmt::format("{} (no other value)", spec.no_rope_period),
                     {}});
    } else if (spec.sliding_window_ignored) {
        k.push_back({"attention.sliding_window", KeyUse::Ignored, {}, {}});
    } else {
        k.push_back({"attention.sliding_window", X, "0", {}});
    }
    if (spec.mla) {
        k.push_back({"attention.q_lora_rank", O, "0 (attn_q direct)", {}});
        k.push_back({"attention.kv_lora_rank", R, {}, {}});
        // Both absent: an older conversion with attn_kv_b, run un-absorbed.
        k.push_back({"attention.key_length_mla", O, "attention.key_length (attn_kv_b)", {}});
        k.push_back({"attention.value_length_mla", O, "attention.value_length (attn_kv_b)", {}});
    }
    if (spec.attn_temperature) k.push_back({"attention.temperature_scale", O, "0", {}});
    if (spec.attn_temperature_length_key)  // needed where temperature_scale is not 0
        k.push_back({"attention.temperature_length", O, "0", {}});
    if (spec.rope_sections) k.push_back({"rope.dimension_sections", R, {}, {}});
    if (spec.granite_scales) {
        if (spec.logit_scale_optional)
            k.push_back({"logit_scale", O, "0 (none)", {}});
        else
            k.push_back({"logit_scale", R, {}, {}});
        k.push_back({"embedding_scale", O, "0 (none)", {}});
        k.push_back({"residual_scale", O, "0 (none)", {}});
        k.push_back({"attention.scale", O, "0 (1/sqrt(key_length))", {}});
        k.push_back({"rope.scaling.finetuned", O, "true", {}});
    }
    if (spec.per_layer_geometry_keys) {
        // The sliding layers' head sizes and the per-layer embeddings' width.
        k.push_back({"attention.key_length_swa", R, {}, {}});
        k.push_back({"attention.value_length_swa", R, {}, {}});
        k.push_back({"embedding_length_per_layer_input", R, {}, {}});
        k.push_back({"attention.shared_kv_layers", O, "0 (no shared KV layers)", {}});
    }
    if (spec.delta_net_layers) {
        for (const char* ssm : {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                                "ssm.time_step_rank", "ssm.group_count"})
            k.push_back({ssm, R, {}, {}});
        k.push_back({"attention.recurrent_layers", O, "full_attention_interval's pattern", {}});
        k.push_back({"full_attention_interval", O, "4", "without attention.recurrent_layers"});
    }
    if (spec.shortconv_layers)  // the window; head_count_kv's zeros mark the layers
        k.push_back({"shortconv.l_cache", R, {}, {}});
    if (spec.mamba2_layers)  // beside attention: head_count_kv's zeros mark the layers
        for (const char* ssm : {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                                "ssm.time_step_rank", "ssm.group_count"})
            k.push_back({ssm, R, {}, {}});
    if (spec.dense_projections)  // sentence-transformers' projections after the pooling
        for (const char* dense :
             {"dense_2_feat_in", "dense_2_feat_out", "dense_3_feat_in", "dense_3_feat_out"})
            k.push_back({dense, O, "0 (no projection)", {}});
    // A row with leading dense layers reads a file without experts as all
    // dense: its expert keys are read only where expert_count > 0.
    const std::string_view experts =
        spec.moe && !spec.leading_dense_layers ? std::string_view{} : "with experts";
    if (spec.moe_with_expert_count) k.push_back({"expert_count", O, "0 (dense)", {}});
    if (spec.dense_beside_experts) {  // gemma4: experts beside the dense FFN where present
        k.push_back({"expert_count", O, "0 (no experts)", {}});
        k.push_back({"expert_used_count", R, {}, "with experts"});
        k.push_back({"expert_feed_forward_length", R, {}, "with experts"});
        // Not read: llama.cpp's gemma4 graph renormalises whatever it says.
        k.push_back({"expert_weights_norm", KeyUse::Ignored, {}, {}});
    }
    if (spec.leading_dense_layers)
        k.push_back({"expert_count", O, "0 (every layer dense: leading_dense_block_count)", {}});
    if (spec.moe || spec.moe_with_expert_count) {
        if (!spec.leading_dense_layers) k.push_back({"expert_count", R, {}, experts});
        k.push_back({"expert_used_count", R, {}, experts});
        k.push_back(
            {spec.moe ? "expert_feed_forward_length" : "feed_forward_length", R, {}, experts});
        if (spec.expert_weights_always_normed || spec.expert_weight_on_input)
            // renormalised whatever it says; llama4: never renormalised
            k.push_back({"expert_weights_norm", KeyUse::Ignored, {}, {}});
        else if (spec.moe_gating != MoeGating::SoftmaxWeight)
            k.push_back({"expert_weights_norm", O,
                         expert_weights_norm_default(spec) ? "true" : "false", experts});
        if (spec.gating_key) {
            k.push_back({"expert_gating_func", O,
                         spec.moe_gating == MoeGating::Sigmoid
                             ? "0 (sigmoid; 1 softmax, 2 sigmoid)"
                             : "0 (softmax, sigmoid for listed shapes; 1 softmax, 2 sigmoid)",
                         experts});
            k.push_back({"expert_weights_scale", O, "0 (not scaled)", experts});
        } else if (spec.expert_weights_scale_key) {
            k.push_back({"expert_weights_scale", O, "0 (not scaled)", experts});
        }
        if (spec.expert_groups) {
            k.push_back({"expert_group_count", O, "0 (no groups)", experts});
            k.push_back({"expert_group_used_count", O, "0 (no groups)", experts});
        }
        if (spec.shared_experts) k.push_back({"expert_shared_count", R, {}, experts});
        if (spec.shared_expert_gate) {
            k.push_back({"expert_shared_feed_forward_length", O, "feed_forward_length", experts});
            k.push_back(
                {"feed_forward_length", R, {}, "without expert_shared_feed_forward_length"});
        }
        if (spec.optional_shared_expert)
            k.push_back({"expert_shared_feed_forward_length", O, "0 (no shared expert)", experts});
        if (spec.one_block_layers) {  // nemotron_h_moe: experts on the FFN-only layers
            k.push_back({"feed_forward_length", R, {}, "one per layer: the FFN-only layers'"});
            k.push_back({"moe_latent_size", X, "0", {}});
            k.push_back({"nextn_predict_layers", X, "0", {}});
        }
        if (spec.moe_layer_step_key) {
            k.push_back({"interleave_moe_layer_step", R, {}, {}});
            k.push_back(
                {"feed_forward_length", O, "0 (needed with interleave_moe_layer_step > 1)", {}});
        }
        if (spec.leading_dense_layers) {
            k.push_back({"leading_dense_block_count", O, "0", {}});
            k.push_back(
                {"feed_forward_length", O, "0 (needed with leading_dense_block_count > 0)", {}});
        }
    }
    if (!spec.moe) {
        // nemotron_h: one per layer, 0 but on the FFN-only layers.
        k.push_back({"feed_forward_length", R, {}, spec.moe_with_expert_count ? "dense" : ""});
        if (!spec.moe_with_expert_count && !spec.dense_beside_experts)
            k.push_back({"expert_count", X, "0", {}});
    }
    return k;
}

std::string_view key_use_name(KeyUse use) {
    switch (use) {
        case KeyUse::Required:
            return "required";
        case KeyUse::Optional:
            return "optional";
        case KeyUse::Refused:
            return "refused";
        case KeyUse::Ignored:
            return "ignored";
    }
    return "?";
}

}  // namespace ferrox::model
