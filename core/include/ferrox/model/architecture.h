// What ferrox knows of each architecture that its files do not state: one
// row per architecture (core/src/model/architectures.cpp). Hyper-parameter
// reading, weight binding, the forward pass and the resident-op prediction
// all take these facts from the row, through Hparams; adding an
// architecture whose layers are made of parts the pass already has is one
// new row (docs/models.md, "Adding an architecture").
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ferrox/api.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

// Which per-pair RoPE divisor tensors an architecture reads when present.
enum class RopeFactorTensors {
    None,
    // rope_freqs.weight, or with rope.scaling.type = longrope the pair
    // rope_factors_short/long.weight (llama, granite).
    ByScalingType,
    // rope_factors_short/long.weight whatever the scaling type (phi3).
    LongRope,
    // rope_freqs.weight, required, for the global layers only (gemma4: its
    // "proportional" RoPE, a huge divisor for each pair left unrotated).
    GlobalFreqs,
    // rope_freqs.weight where the file has it, whatever the scaling type;
    // never LongRoPE's pair (llama4's loader reads only rope_freqs).
    Freqs,
};

// Whether an architecture's layers carry a tensor: a file holding one its
// row says Absent for is refused (binding names it), as llama.cpp refuses it.
enum class TensorUse : uint8_t { Absent, Optional, Required };

// rope.scaling.yarn_* keys, one bit each: which of them llama.cpp's graph
// reads for an architecture (the others keep its defaults).
enum YarnKeys : uint8_t {
    kYarnBetaFast = 1,
    kYarnBetaSlow = 2,
    kYarnExtFactor = 4,
    kYarnAttnFactor = 8,
    kYarnLogMultiplier = 16,
};

// A file shape (layers run, vocabulary rows) that llama.cpp takes as
// sigmoid-gated where expert_gating_func is absent: GLM-4.7-Flash's
// (deepseek2), whose early conversions lack the key.
struct GatingShape {
    uint32_t n_layer = 0;
    uint64_t vocab = 0;
};

// Llama 4's attention temperature on its layers without RoPE: q x (1 +
// scale x ln(floor((pos + offset) / length) + 1)), constants of llama.cpp's
// llama4 loader (no key states them). scale 0: none.
struct NopeTemperature {
    float scale = 0.0f;
    uint32_t length = 0;
    float offset = 0.0f;
};

struct ArchSpec {
    std::string_view name;  // general.architecture, and the prefix of its keys
    RopeStyle rope = RopeStyle::Neox;
    QkNorm qk_norm = QkNorm::None;
    bool pre_norms = true;    // attn_norm / ffn_norm before each block
    bool post_norms = false;  // post_attention_norm / post_ffw_norm after each block
    FfnActivation activation = FfnActivation::Silu;
    bool sqrt_embedding_scale = false;  // embeddings x sqrt(n_embd) (gemma)
    bool moe = false;                   // expert_* keys, ffn_gate_inp and ffn_*_exps tensors
    // Experts where the file has expert_count > 0, else a dense FFN; each
    // expert feed_forward_length wide (Mixtral's files, architecture llama).
    bool moe_with_expert_count = false;
    bool tied_output = true;  // output.weight may be absent (token_embd doubles as it)
    RopeFactorTensors rope_factors = RopeFactorTensors::None;
    // ffn_up.weight holds the gate's rows, then the up projection's (phi3):
    // 2 x feed_forward_length rows, no ffn_gate.weight.
    bool fused_gate_up = false;
    // Gemma's window: every window_period-th layer global, the others attend
    // through attention.sliding_window (required unless default_window is set);
    // attention.sliding_window_pattern and rope.freq_base_swa may override.
    bool sliding_window = false;
    uint32_t window_period = 0;
    uint32_t default_window = 0;
    // attention.sliding_window may be absent or 0: no layer is local (olmo2:
    // OLMo 2 has no window, OLMo 3 has one).
    bool window_optional = false;
    LocalRope local_rope = LocalRope::Unscaled;
    // The local layers' rope base unless rope.freq_base_swa says: 10000
    // (gemma3), or 0 for the global layers' own (gemma2).
    float local_rope_base = 0.0f;
    // A model with this many layers scales attention by 1/sqrt(n_embd / n_head)
    // instead of 1/sqrt(head_dim) (Gemma 3 27B: 62, Gemma 2 27B: 46), as their
    // reference implementations do and llama.cpp (which knows them by layer count).
    uint32_t wide_attention_scale_layers = 0;
    // attn_logit_softcapping / final_logit_softcapping read (gemma2).
    bool softcapping = false;
    // attention.sliding_window is read and not applied, as llama.cpp does for
    // phi3 (its converters write the key for models trained without one).
    bool sliding_window_ignored = false;
    // granite's embedding_scale, residual_scale, attention.scale and logit_scale keys.
    bool granite_scales = false;
    uint32_t no_rope_period = 0;  // every n-th layer without RoPE (smollm3: 4)
    // Multi-section RoPE (qwen2vl, qwen3vl): rope.dimension_sections is
    // required. Sections give an image token's pairs its time, height and
    // width positions; a text token has one position in every section, which
    // makes it NeoX RoPE -- the only input ferrox takes.
    bool rope_sections = false;
    // llama.cpp rotates a prefix of each head (rope.dimension_count < head_dim)
    // for this architecture; for the others it refuses such a file.
    bool partial_rotary = false;
    uint8_t yarn_keys = 0;  // YarnKeys bits
    // attention.temperature_scale: q multiplied by a factor growing with the
    // position, 1 + scale x ln(floor(pos / original context) + 1) (mistral3).
    bool attn_temperature = false;
    // ... with the length from attention.temperature_length instead of the
    // original context (deepseek2, as llama.cpp reads Mistral Large 3's files).
    bool attn_temperature_length_key = false;
    // With moe: how router logits weigh experts -- the row's own, or with
    // gating_key where the file's expert_gating_func is absent or 0.
    MoeGating moe_gating = MoeGating::Softmax;
    // attn_output.bias: optional per layer for llama, granite and mistral3
    // (llama.cpp adds it where a layer has it), required for gpt-oss.
    TensorUse attn_output_bias = TensorUse::Absent;
    // gpt-oss: ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias (one row per
    // expert), and attn_sinks.weight (a sink logit per head).
    bool expert_biases = false;
    bool attention_sinks = false;
    // Multi-head latent attention (deepseek2): q direct (attn_q) or low-rank
    // (attn_q_a, its norm, attn_q_b); attn_kv_a_mqa gives each token a latent
    // (kv_lora_rank) and a shared rotated part (rope.dimension_count); the
    // cache holds one KV head of [rotated | normed latent] and the latent as
    // its value, each query head absorbed into latent space through attn_k_b
    // and its output mapped back through attn_v_b (llama.cpp's absorbed path).
    bool mla = false;
    // attention.sliding_window_pattern is a bool per layer (true: the layer
    // attends through the window), required (gemma4), instead of a period.
    bool window_pattern_array = false;
    // q . k is not scaled (gemma4: q and k are RMS-normed per head).
    bool unit_attention_scale = false;
    // V is RMS-normed per head without a weight after its projection (gemma4).
    bool value_norm = false;
    // attn_v.weight may be absent: the K projection stands for V (gemma4's
    // full-attention layers, attention_k_eq_v).
    bool value_from_key = false;
    // layer_output_scale.weight: an optional scalar each layer's output is
    // multiplied by (gemma4).
    bool layer_output_scale = false;
    // final_logit_softcapping read (0: none) and attn_logit_softcapping refused (gemma4).
    bool final_softcap_only = false;
    // gemma4's per-layer geometry: attention.key_length_swa and
    // value_length_swa (required: the sliding layers' head size),
    // rope.dimension_count_swa (optional), head_count_kv and
    // feed_forward_length one per layer or one for all,
    // embedding_length_per_layer_input (required; > 0: per-layer embeddings),
    // attention.shared_kv_layers (optional).
    bool per_layer_geometry_keys = false;
    // The norm before the FFN (gpt-oss's files call it post_attention_norm).
    std::string_view ffn_norm_tensor = "ffn_norm.weight";
    // The final norm's tensor (lfm2's converter names it token_embd_norm).
    std::string_view output_norm_tensor = "output_norm.weight";
    // attn_q_norm / attn_k_norm may be absent (glm4moe: GLM-4.5 has them, Air
    // not); each layer normalises where it has them, as llama.cpp does.
    bool qk_norm_optional = false;
    // leading_dense_block_count: that many first layers run a dense FFN
    // (feed_forward_length wide), the rest experts (glm4moe, deepseek2); a
    // file without expert_count runs every layer dense if that count says so.
    bool leading_dense_layers = false;
    // expert_shared_count: shared experts (ffn_*_shexp, expert_shared_count x
    // expert_feed_forward_length wide) run on every row of an expert layer
    // and join the routed experts' sum.
    bool shared_experts = false;
    // One shared expert whose output is weighed per row by
    // sigmoid(ffn_gate_inp_shexp . x) before it joins the routed experts'
    // sum, expert_shared_feed_forward_length wide (qwen35moe).
    bool shared_expert_gate = false;
    // One ungated shared expert (SwiGLU, as a routed one) run beside the
    // routed ones where expert_shared_feed_forward_length gives it a width;
    // absent or 0: none (granitehybrid: Granite 4.0 H Tiny and Small carry
    // one; llama.cpp reads the key as optional there).
    bool optional_shared_expert = false;
    // Every expert, routed and shared, is up -> relu(.)^2 -> down with no
    // gate (nemotron_h_moe, as its dense FFN layers): no ffn_gate_exps nor
    // ffn_gate_shexp.
    bool relu_squared_experts = false;
    // expert_weights_scale read (0 or absent: not scaled) without the gating
    // key: the row's gating is fixed (nemotron_h_moe: sigmoid, whatever
    // expert_gating_func says, as llama.cpp's graph).
    bool expert_weights_scale_key = false;
    // exp_probs_b.bias: a per-expert bias added to the gate's probabilities to
    // choose the experts (not to weigh them): required (glm4moe) or where a
    // file has it (deepseek2: V3 has it, V2 not).
    TensorUse expert_selection_bias = TensorUse::Absent;
    // expert_gating_func read: 1 softmax, 2 sigmoid; absent or 0 means the
    // row's moe_gating, unless the file has one of sigmoid_gating_shapes.
    bool gating_key = false;
    // expert_group_count / expert_group_used_count read: experts split into
    // that many equal groups, only the best groups' experts eligible
    // (group-limited routing, DeepSeek V2/V3's; llama.cpp applies it to any
    // file that has more than one group).
    bool expert_groups = false;
    // DeepSeek's YaRN (llama.cpp's deepseek2 graph): the file's
    // rope.scaling.yarn_log_multiplier is 0.1 x mscale_all_dim; the rotated
    // dims keep magnitude rope.scaling.attn_factor and q.k is scaled by
    // mscale^2 instead (see read_mla in hparams.cpp).
    bool yarn_qk_mscale = false;
    // nextn_predict_layers: that many blocks at the end of block_count are
    // NextN/MTP blocks (blk.N.nextn.*) for speculative decoding: bound and
    // kept, not run; the pass runs block_count - nextn_predict_layers.
    bool nextn_layers = false;
    // A reranker's classifier head may ride on this decoder (pooling_type
    // rank: Qwen3-Reranker): cls.output.weight scores the last row's
    // final-norm state, one output per classifier.output_labels entry, and a
    // softmax over them gives the scores, as llama.cpp's build_pooling does
    // for qwen3.
    bool rank_head = false;
    // The rank head is a sequence classifier's instead (BERT's: bge-reranker,
    // as llama.cpp's build_pooling for it): the first (CLS) row -- a causal
    // model's last -- through cls.weight (+ cls.bias) and tanh where the
    // file has them, then cls.output.weight (+ cls.output.bias); the outputs
    // are the scores as they are, no softmax.
    bool rank_classifier = false;
    // Non-causal (bidirectional) attention whatever attention.causal says,
    // as llama.cpp sets it for the architecture (gemma-embedding); with a
    // window, a symmetric one. The model gives pooled output only.
    bool non_causal = false;
    // dense_2.weight / dense_3.weight: sentence-transformers' projections of
    // the pooled vector (n_embd -> dense_2_feat_out -> n_embd), where the
    // file has them; applied before normalising, as llama.cpp's
    // build_dense_out (gemma-embedding).
    bool dense_projections = false;
    std::span<const GatingShape> sigmoid_gating_shapes = {};
    // Gated DeltaNet layers between the full-attention ones (qwen35): the
    // ssm.* keys and full_attention_interval, each recurrent layer's
    // in-projections, causal convolution, delta-rule state and gated norm
    // (core/src/model/delta_net.cpp); the context keeps each sequence's
    // convolution window and state (seq_states.h).
    bool delta_net_layers = false;
    // attn_q.weight holds per head q then a gate: the attention output is
    // multiplied by sigmoid(gate) before attn_output (qwen35).
    bool gated_attention = false;
    // Qwen3-Next's delta-net layout (qwen3next): consecutive value heads share
    // a key head (value head h reads key head h / (value heads / key heads),
    // where qwen35's converter tiles them: h mod key heads), and beta and
    // alpha come from one ssm_ba.weight whose rows are, per key head,
    // its value heads' betas then their alphas.
    bool delta_net_grouped = false;
    // Short-convolution layers between the attention ones (lfm2): a layer
    // whose attention.head_count_kv entry is 0 runs shortconv.in_proj into
    // b, c and x, a causal depthwise convolution of b * x over the last
    // shortconv.l_cache inputs, c times its output, then shortconv.out_proj
    // (core/src/model/short_conv.cpp). The context keeps each sequence's
    // convolution window as it keeps a Gated DeltaNet layer's (seq_states.h),
    // with no delta-rule state.
    bool shortconv_layers = false;
    // The recurrent layers are Mamba-2 blocks (mamba2, granitehybrid,
    // nemotron_h): ssm_in's rows are z, the convolution's input x|B|C and
    // dt; a causal depthwise convolution with a bias and SiLU, the selective
    // scan per head (decay exp(softplus(dt + dt_bias) x ssm_a), B and C
    // shared by a group of heads), the ssm_d skip, y x silu(z) RMS-normed per
    // group by ssm_norm, then ssm_out (core/src/model/mamba2.cpp). Which
    // layers: every one (attention_free), else those whose
    // attention.head_count_kv entry is 0 (and, with one_block_layers, whose
    // feed_forward_length entry is 0 too), as llama.cpp reads them.
    bool mamba2_layers = false;
    // Every layer a Mamba-2 block and nothing else (mamba2): no attention,
    // no FFN, no KV cache; its keys read on a path of their own.
    // head_count and feed_forward_length are read and not applied
    // (converters write 0).
    bool attention_free = false;
    // Each layer is one block between attn_norm and the residual add, with
    // no ffn_norm (mamba2, nemotron_h): a Mamba-2 block, attention, or an FFN
    // alone -- ffn_up, relu(.)^2, ffn_down, no gate (nemotron_h's layers
    // whose head_count_kv entry is 0 and feed_forward_length entry is not).
    bool one_block_layers = false;
    // logit_scale may be absent or 0 (granitehybrid: llama.cpp reads it as
    // optional there, required for granite); with granite_scales.
    bool logit_scale_optional = false;
    // attention.layer_norm_epsilon is required and stands in for an absent
    // layer_norm_rms_epsilon (nemotron_h: llama.cpp requires the former and
    // falls back to it; its converter writes only that one).
    bool norm_eps_fallback = false;
    // An expert layer keeps its dense FFN beside the experts (gemma4, where
    // the file has expert_count > 0, each expert expert_feed_forward_length
    // wide): ffn_norm -> dense FFN -> post_ffw_norm_1, plus pre_ffw_norm_2 ->
    // experts -> post_ffw_norm_2, the sum then post_ffw_norm'd as a dense
    // layer's output. The chosen experts' softmax weights are renormalised
    // whatever expert_weights_norm says, as llama.cpp's gemma4 graph does.
    bool dense_beside_experts = false;
    // The router reads the residual stream RMS-normed without a weight, x
    // 1/sqrt(n_embd) x ffn_gate_inp.scale ([n_embd], required), not the
    // experts' input (gemma4).
    bool scaled_router_input = false;
    // ffn_down_exps.scale: an optional scalar per expert multiplying its
    // output (gemma4's per_expert_scale).
    bool expert_output_scales = false;
    // ffn_gate_up_exps.weight may stand for ffn_gate_exps and ffn_up_exps:
    // each expert's gate rows, then its up rows (gemma4's converted files,
    // as llama.cpp loads them).
    bool fused_expert_gate_up = false;
    // The chosen experts' weights are renormalised whatever
    // expert_weights_norm says (llama.cpp's gemma4 and lfm2moe graphs).
    bool expert_weights_always_normed = false;
    // BERT's encoder (bert, nomic-bert; core/src/model/encoder.cpp), in
    // place of the decoder's blocks: the token's row plus token_types' row 0
    // (and a learned position row where learned_positions), LayerNorm'd with
    // weight and bias (token_embd_norm); each layer attends both ways (q/k/v
    // and output biases where the file has them), then post-norms --
    // LayerNorm(x + attn) (attn_output_norm), LayerNorm(that + FFN)
    // (layer_output_norm). The FFN: with activation GeluTanh, BERT's GELU
    // over ffn_up with biases, no gate; with Silu, nomic-bert's SwiGLU
    // (gate, up, down, no biases). No final norm; the norms' epsilon is
    // attention.layer_norm_epsilon.
    bool bert_encoder = false;
    // position_embd.weight: a learned row per training position added to the
    // embeddings (bert), in place of RoPE (nomic-bert rotates q and k).
    bool learned_positions = false;
    // Chunked attention (llama4's iRoPE): the rotated layers attend only
    // within their chunk of attn_chunk positions (a row at p sees
    // [floor(p / attn_chunk) x attn_chunk, p]); the layers without RoPE see
    // the whole past. llama.cpp's llama4 loader fixes it at 8192 whatever
    // attention.sliding_window says (0 there means another layout).
    uint32_t attn_chunk = 0;
    NopeTemperature nope_temperature = {};
    // q and k RMS-normed per head without a weight after RoPE on the rotated
    // layers (llama4's L2 norm), unless expert_count is 128: llama.cpp
    // recognises Llama 4 Maverick, which has none, by that count.
    bool rope_layer_qk_l2_norm = false;
    // interleave_moe_layer_step (required): layer il runs experts when
    // (il + 1) % step == 0, the others a dense FFN feed_forward_length wide
    // (llama4: Scout 1, Maverick 2).
    bool moe_layer_step_key = false;
    // One shared expert, as wide as a routed one, on every expert layer; no
    // count key (llama4).
    bool shared_expert_of_expert_width = false;
    // The chosen experts' sigmoid weights multiply each expert's input, not
    // its output; the top k chosen by the raw router logits; the weights
    // neither renormalised nor scaled (llama.cpp's build_moe_ffn for llama4).
    bool expert_weight_on_input = false;
};

// The key of the norms' epsilon: LayerNorm's for BERT's encoder (and the one
// nemotron_h requires, norm_eps_fallback), RMSNorm's for every other row.
constexpr std::string_view norm_eps_key(const ArchSpec& a) {
    return a.bert_encoder || a.norm_eps_fallback ? "attention.layer_norm_epsilon"
                                                 : "attention.layer_norm_rms_epsilon";
}

// Whether a row's layer kinds come from its per-layer KV head counts (0: a
// recurrent layer): lfm2's short convolutions, the Mamba-2 hybrids'.
constexpr bool kinds_by_kv_heads(const ArchSpec& a) {
    return a.shortconv_layers || (a.mamba2_layers && !a.attention_free);
}

// Whether expert weights are renormalised where expert_weights_norm is
// absent: the rows that read the gating key take llama.cpp's default (no),
// the other softmax rows yes (their llama.cpp graphs renormalise).
constexpr bool expert_weights_norm_default(const ArchSpec& a) {
    return a.moe_gating == MoeGating::Softmax && !a.gating_key;
}

FERROX_API std::span<const ArchSpec> architectures();
// nullptr for an architecture ferrox does not run.
FERROX_API const ArchSpec* find_architecture(std::string_view name);

}  // namespace ferrox::model
