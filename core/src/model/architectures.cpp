#include "ferrox/model/architecture.h"

namespace ferrox::model {
namespace {

// Each row as llama.cpp's graph for the architecture builds it
// (vendor/llama.cpp/src/models/<name>.cpp, and llama_model_rope_type for the
// RoPE style); parity tests (tests/parity/test_model_parity.py) hold a tiny
// random model of each to it.
// GLM-4.7-Flash (deepseek2): 47 layers run (48 blocks with its NextN
// block, which llama.cpp also matches), vocabulary 154880.
constexpr GatingShape kGlm47FlashShapes[] = {{47, 154880}, {48, 154880}};

constexpr ArchSpec kArchitectures[] = {
    {.name = "llama",
     .rope = RopeStyle::Normal,
     .moe_with_expert_count = true,
     .rope_factors = RopeFactorTensors::ByScalingType,
     .attn_output_bias = TensorUse::Optional},
    {.name = "qwen2"},
    {.name = "qwen3", .qk_norm = QkNorm::PerHead, .rank_head = true},
    {.name = "qwen3moe", .qk_norm = QkNorm::PerHead, .moe = true},
    {.name = "gemma3",
     .qk_norm = QkNorm::PerHead,
     .post_norms = true,
     .activation = FfnActivation::GeluTanh,
     .sqrt_embedding_scale = true,
     .sliding_window = true,
     .window_period = 6,
     .local_rope_base = 10000.0f,
     .wide_attention_scale_layers = 62,
     .partial_rotary = true},
    // Gemma 2: every other layer local (window 4096 unless the file says),
    // one rope base for all, soft-capped attention scores and logits.
    {.name = "gemma2",
     .post_norms = true,
     .activation = FfnActivation::GeluTanh,
     .sqrt_embedding_scale = true,
     .sliding_window = true,
     .window_period = 2,
     .default_window = 4096,
     .local_rope = LocalRope::AsGlobal,
     .wide_attention_scale_layers = 46,
     .softcapping = true},
    // IBM Granite 3.x: llama's layers with four scales from the file.
    {.name = "granite",
     .rope = RopeStyle::Normal,
     .rope_factors = RopeFactorTensors::ByScalingType,
     .granite_scales = true,
     .attn_output_bias = TensorUse::Optional},
    // OLMo 2 and OLMo 3: no pre-norms; RMSNorm after attention and after the
    // FFN, and over the whole q and k projections; its files always carry
    // output.weight. OLMo 3's files add a window: three local layers, then
    // one global, the local ones rotated without YaRN.
    {.name = "olmo2",
     .qk_norm = QkNorm::Whole,
     .pre_norms = false,
     .post_norms = true,
     .tied_output = false,
     .sliding_window = true,
     .window_period = 4,
     .window_optional = true,
     .local_rope = LocalRope::Plain},
    // SmolLM3: llama's layers, every fourth without RoPE.
    {.name = "smollm3", .rope = RopeStyle::Normal, .no_rope_period = 4},
    // The text path of Qwen2-VL and Qwen3-VL: qwen2's and qwen3's layers with
    // multi-section RoPE (NeoX for text). Qwen3-VL's deepstack inputs are
    // image features added after the first layers; for text llama.cpp adds
    // zeros there.
    {.name = "qwen2vl", .rope_sections = true},
    {.name = "qwen3vl", .qk_norm = QkNorm::PerHead, .rope_sections = true},
    // Ministral 3 / Mistral 3: llama's layers with YaRN (its betas and log
    // multiplier from the file) and Llama 4's attention temperature.
    {.name = "mistral3",
     .rope = RopeStyle::Normal,
     .rope_factors = RopeFactorTensors::ByScalingType,
     .yarn_keys = kYarnBetaFast | kYarnBetaSlow | kYarnLogMultiplier,
     .attn_temperature = true,
     .attn_output_bias = TensorUse::Optional},
    // Phi-3, Phi-3.5, Phi-4, Phi-4-mini: fused attn_qkv (bound for every
    // architecture, as llama.cpp does) and gate||up, LongRoPE factors, a
    // rotated prefix of each head on Phi-4-mini.
    {.name = "phi3",
     .rope_factors = RopeFactorTensors::LongRope,
     .fused_gate_up = true,
     .sliding_window_ignored = true,
     .partial_rotary = true},
    // gpt-oss: every other layer local (window from the file), YaRN on both
    // kinds alike, biases on the attention output, the router and the
    // experts, a sink logit per head, the top k router logits softmaxed into
    // expert weights, and a SwiGLU clamped at 7.
    {.name = "gpt-oss",
     .activation = FfnActivation::SwigluOai,
     .moe = true,
     .tied_output = false,
     .sliding_window = true,
     .window_period = 2,
     .local_rope = LocalRope::AsGlobal,
     .moe_gating = MoeGating::SoftmaxWeight,
     .attn_output_bias = TensorUse::Required,
     .expert_biases = true,
     .attention_sinks = true,
     .ffn_norm_tensor = "post_attention_norm.weight"},
    // GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7: q/k/v biases (optional for
    // every row), NeoX RoPE over a prefix of each head, per-head q/k norms
    // where a layer has them, the FFN norm named post_attention_norm; the
    // first leading_dense_block_count layers dense, the others experts with
    // a sigmoid gate, a selection bias and shared experts; NextN blocks at
    // the end, kept and not run.
    {.name = "glm4moe",
     .qk_norm = QkNorm::PerHead,
     .moe = true,
     .partial_rotary = true,
     .moe_gating = MoeGating::Sigmoid,
     .ffn_norm_tensor = "post_attention_norm.weight",
     .qk_norm_optional = true,
     .leading_dense_layers = true,
     .shared_experts = true,
     .expert_selection_bias = TensorUse::Required,
     .gating_key = true,
     .expert_groups = true,
     .nextn_layers = true},
    // DeepSeek V2/V3/R1, Kimi K2, GLM-4.7-Flash: multi-head latent attention
    // over a compressed cache (ArchSpec::mla), adjacent-pair RoPE on a
    // prefix of each cached head, DeepSeek's YaRN (q.k scaled by mscale^2);
    // the first leading_dense_block_count layers dense, the others experts
    // (softmax-gated unless the file says sigmoid) with shared experts, an
    // optional selection bias and group-limited routing; NextN blocks kept;
    // Llama 4's attention temperature where the file has one (Mistral Large 3).
    {.name = "deepseek2",
     .rope = RopeStyle::Normal,
     .moe = true,
     .partial_rotary = true,
     .yarn_keys = kYarnLogMultiplier,
     .attn_temperature = true,
     .attn_temperature_length_key = true,
     .mla = true,
     .leading_dense_layers = true,
     .shared_experts = true,
     .expert_selection_bias = TensorUse::Optional,
     .gating_key = true,
     .expert_groups = true,
     .yarn_qk_mscale = true,
     .nextn_layers = true,
     .sigmoid_gating_shapes = kGlm47FlashShapes},
    // Gemma 4 (text): gemma3's layers with the window's layers listed per
    // layer, unscaled attention over RMS-normed q, k and V (V without a
    // weight, K standing for it where attn_v is absent), proportional RoPE
    // factors on the global layers, a scalar on each layer's output and a
    // soft-capped logit; the sliding-window layers with head sizes and KV
    // head counts of their own, layers sharing an earlier layer's KV cache,
    // per-layer embeddings (E2B/E4B); where the file has expert_count > 0
    // (26B-A4B), every layer's experts beside its dense FFN, the router
    // reading the scaled, unweighted-normed residual stream, per-expert
    // output scales and fused gate/up experts.
    {.name = "gemma4",
     .qk_norm = QkNorm::PerHead,
     .post_norms = true,
     .activation = FfnActivation::GeluTanh,
     .sqrt_embedding_scale = true,
     .rope_factors = RopeFactorTensors::GlobalFreqs,
     .sliding_window = true,
     .local_rope_base = 10000.0f,
     .window_pattern_array = true,
     .unit_attention_scale = true,
     .value_norm = true,
     .value_from_key = true,
     .layer_output_scale = true,
     .final_softcap_only = true,
     .per_layer_geometry_keys = true,
     .dense_beside_experts = true,
     .scaled_router_input = true,
     .expert_output_scales = true,
     .fused_expert_gate_up = true,
     .expert_weights_always_normed = true},
    // Qwen3.5 (dense): three Gated DeltaNet layers, then one full-attention
    // layer (full_attention_interval); the attention layers gate their output
    // by sigmoid(a second half of q per head), norm q and k per head and
    // rotate a NeoX prefix (multi-section RoPE, NeoX for text); the FFN's
    // norm is named post_attention_norm; the MTP block at the end (a
    // full-attention layer with NextN's tensors) kept, not run.
    {.name = "qwen35",
     .qk_norm = QkNorm::PerHead,
     .rope_sections = true,
     .partial_rotary = true,
     .ffn_norm_tensor = "post_attention_norm.weight",
     .nextn_layers = true,
     .delta_net_layers = true,
     .gated_attention = true},
    // EmbeddingGemma: gemma3's layers attending both ways (the local layers
    // through a symmetric window), q.k scaled by 1/sqrt(head_dim) at any
    // depth, mean-pooled into sentence-transformers' dense projections
    // where the file has them. Pooled output only.
    {.name = "gemma-embedding",
     .qk_norm = QkNorm::PerHead,
     .post_norms = true,
     .activation = FfnActivation::GeluTanh,
     .sqrt_embedding_scale = true,
     .sliding_window = true,
     .window_period = 6,
     .local_rope_base = 10000.0f,
     .partial_rotary = true,
     .non_causal = true,
     .dense_projections = true},
    // Qwen3.5 / Qwen3.6 MoE: qwen35's layers with experts (a softmax gate,
    // the top k renormalised) and one shared expert weighed by a sigmoid
    // gate of its own; the MTP block at the end kept, not run.
    {.name = "qwen35moe",
     .qk_norm = QkNorm::PerHead,
     .moe = true,
     .rope_sections = true,
     .partial_rotary = true,
     .ffn_norm_tensor = "post_attention_norm.weight",
     .shared_expert_gate = true,
     .nextn_layers = true,
     .delta_net_layers = true,
     .gated_attention = true},
    // Qwen3-Next: qwen35moe's layers with plain NeoX RoPE (no sections),
    // value heads grouped by key head and beta/alpha in one projection.
    {.name = "qwen3next",
     .qk_norm = QkNorm::PerHead,
     .moe = true,
     .partial_rotary = true,
     .ffn_norm_tensor = "post_attention_norm.weight",
     .shared_expert_gate = true,
     .nextn_layers = true,
     .delta_net_layers = true,
     .gated_attention = true,
     .delta_net_grouped = true},
    // LFM2 / LFM2.5 (Liquid): short-convolution layers where the file lists
    // 0 KV heads, attention elsewhere (per-head q/k norms, NeoX RoPE), a
    // SwiGLU FFN on every layer, the final norm named token_embd_norm.
    {.name = "lfm2",
     .qk_norm = QkNorm::PerHead,
     .output_norm_tensor = "token_embd_norm.weight",
     .shortconv_layers = true},
    // LFM2-8B-A1B, LFM2-24B-A2B: lfm2's layers, the first
    // leading_dense_block_count FFNs dense, the others experts with a sigmoid
    // gate and a selection bias, the chosen weights renormalised.
    {.name = "lfm2moe",
     .qk_norm = QkNorm::PerHead,
     .moe = true,
     .moe_gating = MoeGating::Sigmoid,
     .output_norm_tensor = "token_embd_norm.weight",
     .leading_dense_layers = true,
     .expert_selection_bias = TensorUse::Required,
     .gating_key = true,
     .shortconv_layers = true,
     .expert_weights_always_normed = true},
    // Mamba-2, Mamba-Codestral: every layer attn_norm then a Mamba-2 block
    // added to the residual stream, no FFN; the output may be tied.
    {.name = "mamba2", .mamba2_layers = true, .attention_free = true, .one_block_layers = true},
    // IBM Granite 4.0 H (and Bamba's layout): granite's layers where
    // head_count_kv lists KV heads, Mamba-2 blocks where it lists 0, a SwiGLU
    // FFN after either; granite's four scales (logit_scale optional), its
    // rope.scaling.finetuned switch (Granite 4.0 H files say false: no layer
    // rotates). Where the file has expert_count > 0 (H Tiny, H Small) every
    // FFN is experts, each feed_forward_length wide, softmax-gated, the top
    // k always renormalised and never scaled (llama.cpp's granitehybrid
    // graph), with an optional shared expert beside them.
    {.name = "granitehybrid",
     .rope = RopeStyle::Normal,
     .moe_with_expert_count = true,
     .granite_scales = true,
     .attn_output_bias = TensorUse::Optional,
     .optional_shared_expert = true,
     .mamba2_layers = true,
     .logit_scale_optional = true,
     .expert_weights_always_normed = true},
    // NVIDIA Nemotron-H, Nemotron Nano 2: each layer one block -- Mamba-2
    // (head_count_kv and feed_forward_length 0), attention without RoPE
    // (KV heads), or a squared-ReLU FFN without a gate (a width).
    {.name = "nemotron_h",
     .no_rope_period = 1,     // no layer rotates
     .partial_rotary = true,  // so rope.dimension_count is read, never applied
     .attn_output_bias = TensorUse::Optional,
     .mamba2_layers = true,
     .one_block_layers = true,
     .norm_eps_fallback = true},
    // NVIDIA Nemotron 3 Nano (30B-A3B): nemotron_h's layers, each FFN layer
    // experts -- sigmoid-gated (expert_gating_func is not read), chosen by
    // the scores plus exp_probs_b, weights renormalised where
    // expert_weights_norm says and scaled by expert_weights_scale, groups
    // where expert_group_count > 1 -- plus one shared expert, all of them
    // squared-ReLU FFNs without a gate (llama.cpp's nemotron_h graph).
    {.name = "nemotron_h_moe",
     .moe = true,
     .no_rope_period = 1,     // no layer rotates
     .partial_rotary = true,  // so rope.dimension_count is read, never applied
     .moe_gating = MoeGating::Sigmoid,
     .attn_output_bias = TensorUse::Optional,
     .optional_shared_expert = true,
     .relu_squared_experts = true,
     .expert_weights_scale_key = true,
     .expert_selection_bias = TensorUse::Required,
     .expert_groups = true,
     .mamba2_layers = true,
     .one_block_layers = true,
     .norm_eps_fallback = true},
    // BERT encoders (BGE, all-MiniLM, e5): see ArchSpec::bert_encoder. The
    // attention output's bias is optional, as llama.cpp loads it; pooled
    // output only. Rerankers (bge-reranker) carry a classifier head.
    {.name = "bert",
     .pre_norms = false,
     .activation = FfnActivation::GeluTanh,
     .no_rope_period = 1,  // no layer rotates: the positions are learned rows
     .attn_output_bias = TensorUse::Optional,
     .rank_head = true,
     .rank_classifier = true,
     .non_causal = true,
     .bert_encoder = true,
     .learned_positions = true},
    // nomic-embed-text v1 / v1.5: bert's encoder with NeoX RoPE in place of
    // learned positions and a SwiGLU FFN without biases (llama.cpp loads
    // ffn_up/ffn_down biases and never adds them: refused here by name).
    {.name = "nomic-bert",
     .pre_norms = false,
     .attn_output_bias = TensorUse::Optional,
     .non_causal = true,
     .bert_encoder = true},
    // Llama 4 Scout / Maverick (text): llama's layers with iRoPE -- every
    // fourth layer without RoPE, its q scaled by the attention temperature
    // (llama.cpp's constants); the others rotated, attending within chunks of
    // 8192 positions, q and k L2-normed after RoPE -- and experts on every
    // interleave_moe_layer_step-th layer: top-k by router logit, the
    // sigmoid weight on the expert's input, one shared expert beside them.
    {.name = "llama4",
     .rope = RopeStyle::Normal,
     .moe = true,
     .rope_factors = RopeFactorTensors::Freqs,
     .no_rope_period = 4,
     .moe_gating = MoeGating::Sigmoid,
     .attn_chunk = 8192,
     .nope_temperature = {.scale = 0.1f, .length = 8192, .offset = 1.0f},
     .rope_layer_qk_l2_norm = true,
     .moe_layer_step_key = true,
     .shared_expert_of_expert_width = true,
     .expert_weight_on_input = true},
};

}  // namespace

std::span<const ArchSpec> architectures() { return kArchitectures; }

const ArchSpec* find_architecture(std::string_view name) {
    for (const ArchSpec& a : kArchitectures)
        if (a.name == name) return &a;
    return nullptr;
}

}  // namespace ferrox::model
