#include "ferrox/model/hparams_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cstdlib>
#include <type_traits>

#include "ferrox/model/architecture.h"

namespace ferrox::model {
namespace {

const char* rope_style_name(RopeStyle s) { return s == RopeStyle::Neox ? "neox" : "normal"; }

const char* local_rope_name(LocalRope r) {
    switch (r) {
        case LocalRope::Unscaled:
            return "unscaled";
        case LocalRope::AsGlobal:
            return "as global layers";
        case LocalRope::Plain:
            return "plain (no YaRN)";
    }
    return "?";
}

const char* qk_norm_name(QkNorm n) {
    switch (n) {
        case QkNorm::None:
            return "none";
        case QkNorm::PerHead:
            return "per head";
        case QkNorm::Whole:
            return "whole projection";
    }
    return "?";
}

}  // namespace

std::string layer_pattern(const Hparams& hp) {
    std::string pattern;
    pattern.reserve(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        // R: a recurrent layer (Gated DeltaNet, short convolution, Mamba-2);
        // F: an FFN alone (nemotron_h); L/G: local/global attention; C:
        // attention within a chunk (llama4); attention in lower case without RoPE.
        const char c = hp.is_recurrent(il)       ? 'R'
                       : hp.is_ffn_only(il)      ? 'F'
                       : hp.is_local_layer(il)   ? 'L'
                       : hp.is_chunked_layer(il) ? 'C'
                                                 : 'G';
        pattern.push_back(!hp.attends(il) || hp.has_rope(il) ? c
                                                             : static_cast<char>(std::tolower(c)));
    }
    return pattern;
}

std::vector<HparamFact> summarize(const Hparams& hp) {
    std::vector<HparamFact> f;
    const auto add = [&](const char* name, auto value) {
        if constexpr (std::is_same_v<decltype(value), bool>)
            f.push_back({name, value});
        else if constexpr (std::is_integral_v<decltype(value)>)
            f.push_back({name, static_cast<int64_t>(value)});
        else if constexpr (std::is_floating_point_v<decltype(value)>)
            // The double nearest the float's shortest decimal form: 1e-06, not
            // 9.999999974752427e-07, when printed.
            f.push_back({name, std::strtod(fmt::format("{}", value).c_str(), nullptr)});
        else
            f.push_back({name, std::string(value)});
    };
    add("architecture", hp.arch_name);
    add("layers", hp.n_layer);
    // NextN/MTP blocks: in the file, bound and kept for speculative decoding, not run.
    if (hp.n_layer_nextn) add("nextn_layers_unused", hp.n_layer_nextn);
    add("embedding_length", hp.n_embd);
    add("vocab", hp.vocab);
    add("context_train", hp.n_ctx_train);
    add("heads", hp.n_head);
    add("kv_heads", hp.n_head_kv);
    add("head_dim_k", hp.head_dim_k);
    add("head_dim_v", hp.head_dim_v);
    if (hp.head_dim_k_swa) {  // gemma4: the sliding-window layers' own
        add("head_dim_k_swa", hp.head_dim_k_swa);
        add("head_dim_v_swa", hp.head_dim_v_swa);
        add("rope_dims_swa", hp.n_rot_swa);
    }
    if (!hp.n_head_kv_layers.empty()) {
        add("kv_heads_per_layer", fmt::format("{}", fmt::join(hp.n_head_kv_layers, ",")));
    } else if (kinds_by_kv_heads(*hp.arch)) {  // the file's list, 0 where a layer does not attend
        std::vector<uint32_t> per_layer(hp.n_layer, hp.n_head_kv);
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            if (!hp.attends(il)) per_layer[il] = 0;
        add("kv_heads_per_layer", fmt::format("{}", fmt::join(per_layer, ",")));
    }
    if (!hp.n_ff_layers.empty())
        add("ffn_length_per_layer", fmt::format("{}", fmt::join(hp.n_ff_layers, ",")));
    add("attention_scale", hp.attn_scale);
    if (!hp.causal) add("attention", "non-causal");  // pooled output only; a window symmetric
    add("layer_pattern", layer_pattern(hp));
    if (hp.attn_chunk) add("attention_chunk", hp.attn_chunk);
    if (hp.sliding_window) {
        add("sliding_window", hp.sliding_window);
        add("rope_base_local", hp.rope_base_local);
        add("local_rope", local_rope_name(hp.arch->local_rope));
    }
    // BERT's encoder: learned positions, no RoPE (layer_pattern in lower case).
    if (!hp.arch->bert_encoder) {
        add("rope_style", rope_style_name(hp.arch->rope));
        add("rope_dims", hp.n_rot);
        add("rope_base", hp.rope_base);
        add("rope_scaling", rope_scaling_name(hp.rope_scaling));
    } else {
        add("positions", "learned");
        add("token_types", hp.n_token_types);
    }
    if (!hp.arch->bert_encoder && hp.rope_scaling != RopeScaling::None) {
        add("rope_freq_scale", hp.rope_freq_scale);
        add("rope_original_context", hp.rope_n_ctx_orig);
    }
    if (hp.attn_temp_scale != 0) {
        add("attention_temperature_scale", hp.attn_temp_scale);
        add("attention_temperature_length", hp.attn_temp_length);
        if (hp.attn_temp_offset != 0) add("attention_temperature_offset", hp.attn_temp_offset);
        if (hp.attn_temp_nope) add("attention_temperature_layers", "without RoPE");
    }
    if (hp.arch->bert_encoder)  // LayerNorms with biases after each block
        add("layer_norm_eps", hp.rms_eps);
    else
        add("rms_eps", hp.rms_eps);
    add("pre_norms", hp.arch->pre_norms);
    add("post_norms", hp.arch->post_norms);
    add("qk_norm", qk_norm_name(hp.arch->qk_norm));
    if (hp.qk_l2_norm) add("qk_l2_norm", "rotated layers, after RoPE");
    add("qkv_bias", hp.qkv_bias);
    if (hp.attn_output_bias) add("attn_output_bias", true);
    if (hp.arch->mla) {  // absorbed: the cached head is the latent and the rotated part
        // "absorbed" (attn_k_b / attn_v_b) or "kv_b" (an older file, un-absorbed).
        add("mla_layout", hp.mla_kv_b ? "kv_b" : "absorbed");
        add("mla_q_lora_rank", hp.mla_q_lora);
        add("mla_kv_lora_rank", hp.mla_kv_lora);
        add("mla_head_dim_k", hp.mla_head_k);
        add("mla_head_dim_v", hp.mla_head_v);
    }
    if (hp.arch->attention_sinks) add("attention_sinks", true);
    if (hp.arch->shortconv_layers) {  // short-convolution layers (lfm2)
        add("shortconv_l_cache", hp.ssm_conv_kernel);
    } else if (hp.arch->mamba2_layers) {  // Mamba-2 layers (every one: mamba2)
        add("ssm_conv_kernel", hp.ssm_conv_kernel);
        add("ssm_inner_size", hp.ssm_inner);
        add("ssm_state_size", hp.ssm_state);
        add("ssm_heads", hp.ssm_v_heads);
        add("ssm_head_dim", hp.ssm_head_dim());
        add("ssm_groups", hp.ssm_k_heads);
    } else if (hp.ssm_conv_kernel) {  // Gated DeltaNet layers (qwen35, qwen35moe)
        // 0: the file lists its recurrent layers (attention.recurrent_layers);
        // layer_pattern shows them either way.
        add("full_attention_interval", hp.full_attention_interval);
        add("ssm_conv_kernel", hp.ssm_conv_kernel);
        add("ssm_state_size", hp.ssm_state);
        add("ssm_value_heads", hp.ssm_v_heads);
        add("ssm_key_heads", hp.ssm_k_heads);
        add("gated_attention", hp.arch->gated_attention);
    }
    add("ffn", hp.arch->attention_free                          ? "none"
               : hp.arch->one_block_layers                      ? "relu_squared"  // no gate
               : hp.arch->bert_encoder                          ? "gelu"          // no gate
               : hp.arch->activation == FfnActivation::Silu     ? "swiglu"
               : hp.arch->activation == FfnActivation::GeluTanh ? "geglu"
                                                                : "swiglu_oai");
    if (hp.n_expert) {
        add("experts", hp.n_expert);
        add("experts_used", hp.n_expert_used);
        add("expert_ffn_length", hp.n_ff_expert);
        add("expert_weights_norm", hp.expert_weights_norm);
        add("expert_gating", hp.moe_gating == MoeGating::Softmax         ? "softmax"
                             : hp.moe_gating == MoeGating::SoftmaxWeight ? "softmax_of_top_k"
                                                                         : "sigmoid");
        if (hp.arch->expert_biases) add("expert_biases", true);
        if (hp.expert_selection_bias) add("expert_selection_bias", true);
        if (hp.n_expert_groups > 1) {
            add("expert_groups", hp.n_expert_groups);
            add("expert_groups_used", hp.n_expert_groups_used);
        }
        if (hp.expert_weights_scale != 1.0f) add("expert_weights_scale", hp.expert_weights_scale);
        if (hp.n_expert_shared) add("shared_experts", hp.n_expert_shared);
        if (hp.arch->optional_shared_expert && hp.n_ff_shared)
            add("shared_expert_ffn_length", hp.n_ff_shared);
        if (hp.arch->shared_expert_gate) {
            add("shared_expert_ffn_length", hp.n_ff_shared);
            add("shared_expert_gate", "sigmoid");
        }
        if (hp.arch->expert_weight_on_input) add("expert_weight", "on the expert's input");
        if (hp.moe_layer_step > 1) {  // llama4 (Maverick): dense layers between
            add("moe_layer_step", hp.moe_layer_step);
            add("ffn_length", hp.n_ff);
        }
        if (hp.arch->dense_beside_experts) add("dense_ffn_beside_experts", true);
        if (hp.n_layer_dense_lead) {
            add("leading_dense_layers", hp.n_layer_dense_lead);
            add("ffn_length", hp.n_ff);
        }
    } else {
        add("ffn_length", hp.n_ff);
    }
    if (hp.embedding_scale != 1.0f) add("embedding_scale", hp.embedding_scale);
    if (hp.residual_scale != 1.0f) add("residual_scale", hp.residual_scale);
    if (hp.logit_scale != 1.0f) add("logit_scale", hp.logit_scale);
    if (hp.attn_softcap != 0.0f) add("attention_softcap", hp.attn_softcap);
    if (hp.final_softcap != 0.0f) add("final_softcap", hp.final_softcap);
    if (hp.dense_feat) add("dense_projections", hp.dense_feat);  // n_embd -> this -> n_embd
    return f;
}

}  // namespace ferrox::model
