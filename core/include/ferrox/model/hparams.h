// A decoder's hyper-parameters, read from the GGUF's `<arch>.*` metadata.
// Named, never guessed: a missing key, or a setting this runtime does not
// implement, is an Error that names the key -- never a silent default.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"

namespace ferrox::model {

// How an embedding model turns a sequence's final-norm hidden rows into one
// vector (`<arch>.pooling_type`, llama.cpp's enum llama_pooling_type): None
// is a plain decoder (logits); Rank (a classifier head) is refused.
enum class Pooling : uint8_t { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };
FERROX_API std::string_view pooling_name(Pooling p);

// Which elements RoPE rotates together: Normal pairs (2i, 2i+1) (llama),
// Neox pairs (i, i + d/2) (qwen, gemma).
enum class RopeStyle { Normal, Neox };

// How positions past the trained context are squeezed in (`rope.scaling.type`);
// the numbers are in rope_tables.h.
enum class RopeScaling { None, Linear, Yarn, LongRope };

// Each scheme's `rope.scaling.type` value: the one list both the reader and
// `ferrox inspect` use.
struct RopeScalingName {
    RopeScaling scaling;
    std::string_view name;
};
inline constexpr RopeScalingName kRopeScalingNames[] = {{RopeScaling::None, "none"},
                                                        {RopeScaling::Linear, "linear"},
                                                        {RopeScaling::Yarn, "yarn"},
                                                        {RopeScaling::LongRope, "longrope"}};
constexpr std::string_view rope_scaling_name(RopeScaling s) {
    for (const RopeScalingName& n : kRopeScalingNames)
        if (n.scaling == s) return n.name;
    return "?";
}

// SwiGLU or GeGLU: act(gate) * up; SwigluOai: gpt-oss's clamped SwiGLU (ops::swiglu_oai).
enum class FfnActivation { Silu, GeluTanh, SwigluOai };

// How router logits become expert weights: Softmax over all experts, then the
// top k (qwen3moe); SoftmaxWeight: the top k logits, then a softmax over them
// alone (gpt-oss); Sigmoid: a sigmoid of each logit, the top k of those
// (plus the selection bias where the row has it) weighted by their sigmoid,
// optionally renormalised and scaled (glm4moe).
enum class MoeGating { Softmax, SoftmaxWeight, Sigmoid };

// How the sliding-window layers' RoPE differs from the global layers' (besides
// its base), as each architecture's llama.cpp graph rotates them.
enum class LocalRope {
    Unscaled,  // freq_scale 1, no per-pair factors, YaRN's terms as global (gemma3)
    AsGlobal,  // the global layers' scaling, no per-pair factors (gemma2)
    Plain,     // freq_scale 1, no YaRN ramp, magnitude 1 (olmo2's OLMo 3 layers)
};

// RMSNorm on the projected q and k: none, per head (head_dim values, one
// weight vector shared by the heads: qwen3, gemma3), or over the whole
// projection (n_head x head_dim values: olmo2).
enum class QkNorm { None, PerHead, Whole };

struct ArchSpec;

struct Hparams {
    // The architecture's row (ferrox/model/architecture.h): what its files do
    // not state -- RoPE style, norms, activation, expert gating, biases -- is
    // read through it, never copied here. read_hparams sets it; a hand-made
    // Hparams (a test's) names a row.
    const ArchSpec* arch = nullptr;
    std::string arch_name;  // "gemma3", the metadata prefix

    // n_head_kv and n_ff: the largest over the layers where a file lists
    // one per layer (n_head_kv_layers, n_ff_layers); head_dim_k/v and n_rot:
    // the global (full-attention) layers'.
    uint32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
    uint32_t head_dim_k = 0, head_dim_v = 0;
    uint32_t n_ff = 0;
    // gemma4: head_count_kv and feed_forward_length one per layer (empty:
    // the scalar for every layer), and the sliding-window layers' own head
    // sizes and rotated width (attention.key_length_swa, value_length_swa,
    // rope.dimension_count_swa; 0: the global layers').
    std::vector<uint32_t> n_head_kv_layers, n_ff_layers;
    uint32_t head_dim_k_swa = 0, head_dim_v_swa = 0, n_rot_swa = 0;
    // gemma4 E2B/E4B: the width of each layer's per-layer embedding
    // (embedding_length_per_layer_input); 0: none.
    uint32_t n_embd_per_layer = 0;
    uint32_t n_ctx_train = 0;
    uint64_t vocab = 0;  // rows of token_embd
    // The norms' epsilon: RMSNorm's, or LayerNorm's for BERT's encoder
    // (norm_eps_key names the key it came from).
    float rms_eps = 0;
    // BERT's token_type_count: rows of token_types.weight (row 0 is added
    // to every token, as llama.cpp does); 0 for other rows.
    uint32_t n_token_types = 0;

    // Rotated dimensions of a head (rope.dimension_count): the first n_rot
    // rotate, the rest pass through (partial rotary, gemma3 only for now).
    uint32_t n_rot = 0;
    float rope_base = 10000.0f;  // global layers
    RopeScaling rope_scaling = RopeScaling::None;
    float rope_freq_scale = 1.0f;   // 1 / rope.scaling.factor (global layers)
    float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: multiplies cos and sin
    uint32_t rope_n_ctx_orig = 0;   // rope.scaling.original_context_length (n_ctx_train)
    // YaRN's tuning (rope.scaling.yarn_*): the ramp's ends in rotations, its
    // weight (negative: unset, 1 for YaRN and 0 otherwise, as llama.cpp), the
    // magnitude used when the ramp is off, and the DeepSeek-style log
    // multiplier (mscale_all_dim). Read from the file only by architectures
    // whose llama.cpp graph reads them (none of today's five); the others
    // keep these values and refuse a file that says otherwise.
    float rope_yarn_beta_fast = 32.0f, rope_yarn_beta_slow = 1.0f, rope_yarn_log_mul = 0.0f;
    float rope_yarn_ext_factor = -1.0f, rope_yarn_attn_factor = 1.0f;
    float rope_base_local = 10000.0f;  // sliding-window layers
    uint32_t sliding_window = 0;       // 0: every layer attends to the whole past
    uint32_t swa_period = 0;           // every swa_period-th layer is global; 0: none local
    // Per layer, whether it is local, where the file lists them (gemma4's
    // attention.sliding_window_pattern); empty: swa_period decides.
    std::vector<bool> local_layers;

    float attn_scale = 1.0f;  // applied to q . k: 1/sqrt(head_dim), Gemma 3 27B's, granite's key
    // Embeddings are multiplied by embedding_scale (gemma: sqrt(n_embd);
    // granite: its key); each block's output by residual_scale before it joins
    // the residual stream; logits by 1 / logit_scale (granite).
    float embedding_scale = 1.0f, residual_scale = 1.0f, logit_scale = 1.0f;
    bool qkv_bias = false;  // q/k/v biases (qwen2)
    // Soft-capping (gemma2): attention scores and final logits pass through
    // cap x tanh(x / cap); 0: not capped.
    float attn_softcap = 0.0f, final_softcap = 0.0f;
    // q x (1 + attn_temp_scale x ln(floor(pos / attn_temp_length) + 1)) before
    // attention, the whole head (mistral3, deepseek2); 0: off.
    float attn_temp_scale = 0.0f;
    uint32_t attn_temp_length = 0;
    // llama4: floor((pos + attn_temp_offset) / length), and only on the
    // layers without RoPE (attn_temp_nope), whose q the pass multiplies.
    float attn_temp_offset = 0.0f;
    bool attn_temp_nope = false;
    // Chunked attention on the rotated layers (llama4): 0 none.
    uint32_t attn_chunk = 0;
    // llama4's L2 norm of q and k per head after RoPE on the rotated layers.
    bool qk_l2_norm = false;
    // The last shared_kv_layers layers keep no KV cache: each attends over an
    // earlier layer's (gemma4's attention.shared_kv_layers); 0: none shared.
    uint32_t shared_kv_layers = 0;
    // Every no_rope_period-th layer attends without RoPE (smollm3: 4); 0: all rotate.
    uint32_t no_rope_period = 0;

    // Multi-head latent attention (deepseek2): the low ranks of q (0: attn_q
    // direct) and of the KV latent, and each head's q.k and value widths
    // before absorption (attention.key_length_mla / value_length_mla). The
    // cache's head is head_dim_k = mla_kv_lora + n_rot wide, its value
    // head_dim_v = mla_kv_lora, with one KV head.
    uint32_t mla_q_lora = 0, mla_kv_lora = 0, mla_head_k = 0, mla_head_v = 0;
    // An older conversion without the *_mla keys: one attn_kv_b per layer
    // and the un-absorbed path (llama.cpp's for such files), a cache of
    // n_head heads of [rotated | unrotated] keys (key_length = mla_head_k)
    // and value_length-wide values (= mla_head_v).
    bool mla_kv_b = false;

    // Mixture of experts (qwen3moe); n_expert == 0 for dense models.
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0;
    bool expert_weights_norm = false;
    // How router logits weigh experts: the row's, or the file's
    // expert_gating_func where the row reads it (deepseek2, glm4moe).
    MoeGating moe_gating = MoeGating::Softmax;
    // Group-limited routing: the experts split into n_expert_groups equal
    // groups of consecutive ids; only the n_expert_groups_used groups whose
    // two best selection scores sum highest are eligible. 0 or 1: no groups.
    uint32_t n_expert_groups = 0, n_expert_groups_used = 0;
    // The experts are chosen by the router's scores plus exp_probs_b.bias.
    bool expert_selection_bias = false;
    // The chosen experts' weights multiplied by this (expert_weights_scale;
    // 1: not scaled), the shared experts' count (each n_ff_expert wide) and
    // the leading layers with a dense FFN (glm4moe).
    float expert_weights_scale = 1.0f;
    uint32_t n_expert_shared = 0, n_layer_dense_lead = 0;
    // The shared experts' FFN width, all of them together: expert_shared_count
    // x n_ff_expert (glm4moe, deepseek2), or the one gated shared expert's
    // expert_shared_feed_forward_length (qwen35moe); 0: none.
    uint64_t n_ff_shared = 0;
    // Every moe_layer_step-th layer runs experts, the others a dense FFN
    // (llama4's interleave_moe_layer_step); 0 or 1: every expert layer.
    uint32_t moe_layer_step = 0;
    // NextN/MTP blocks after the n_layer the pass runs (block_count =
    // n_layer + n_layer_nextn): bound and kept for speculative decoding, not run.
    uint32_t n_layer_nextn = 0;
    // Biases on the attention output (gpt-oss; some llama-family files, on
    // some layers: true when any layer has one).
    bool attn_output_bias = false;

    // An embedding model's pooling (Mean, Cls or Last), a reranker's (Rank);
    // None for a decoder.
    Pooling pooling = Pooling::None;
    // Attention sees every position of the row's sequence, later ones too
    // (`<arch>.attention.causal` false, or a row that is non-causal:
    // embedding encoders). Such a model gives pooled output only; each
    // sequence is decoded whole, in one batch. A non-causal window is
    // symmetric: position p sees [p - w/2, p + w/2] (llama.cpp's
    // LLAMA_SWA_TYPE_SYMMETRIC).
    bool causal = true;
    // Sentence-transformers' dense projections after the pooling
    // (ArchSpec::dense_projections): dense_2.weight maps n_embd to
    // dense_feat values, dense_3.weight maps them back; 0: none.
    uint32_t dense_feat = 0;
    // A rank head's outputs (ArchSpec::rank_head): the entries of
    // `<arch>.classifier.output_labels`, 1 where the file has none (llama.cpp's n_cls_out).
    uint32_t n_cls_out = 1;
    // Gated DeltaNet layers (qwen35, ssm.* keys): the causal convolution's
    // width, the value width (v_heads x head dim), the head dim (state_size,
    // keys and values alike), the value heads (time_step_rank) and key heads
    // (group_count). Which layers are recurrent comes from the file's
    // attention.recurrent_layers (one bool per block) or, without it, every
    // full_attention_interval-th layer attends over the KV cache and the
    // others are recurrent (full_attention_interval 0: the list said).
    uint32_t ssm_conv_kernel = 0, ssm_inner = 0, ssm_state = 0, ssm_v_heads = 0, ssm_k_heads = 0;
    uint32_t full_attention_interval = 0;
    // Per layer run, whether it is recurrent; empty: no recurrent layer.
    std::vector<bool> recurrent_layers;
    // Short-convolution layers (lfm2) reuse these fields: the kernel is
    // shortconv.l_cache, the convolution's channels (ssm_inner) n_embd, and
    // there are no heads and no delta-rule state.
    // Mamba-2 layers (mamba2) read the same keys: ssm_v_heads is the heads
    // (time_step_rank), ssm_k_heads the groups of B and C (group_count),
    // each head ssm_inner / heads wide with a state of that x ssm_state.
    // The convolution's channels: q and k of every key head, then the values
    // (Mamba-2: B and C of every group besides x).
    uint64_t ssm_conv_dim() const { return 2 * uint64_t{ssm_k_heads} * ssm_state + ssm_inner; }
    // A value head's width: state_size for the delta rule's square states,
    // inner_size / heads for Mamba-2 (0 for short convolutions, no heads).
    uint64_t ssm_head_dim() const { return ssm_v_heads ? ssm_inner / ssm_v_heads : 0; }
    // Floats of one recurrent layer's per-head states, for one sequence.
    uint64_t ssm_state_floats() const { return uint64_t{ssm_v_heads} * ssm_head_dim() * ssm_state; }
    // True when layer `il` is a recurrent (delta-net) layer (never a NextN block).
    bool is_recurrent(uint32_t il) const {
        return il < recurrent_layers.size() && recurrent_layers[il];
    }
    // Per layer run, whether it is an FFN alone, no attention and no mixer
    // (nemotron_h: its head_count_kv entry 0, its feed_forward_length entry
    // not); empty: no such layer.
    std::vector<bool> ffn_only_layers;
    bool is_ffn_only(uint32_t il) const {
        return il < ffn_only_layers.size() && ffn_only_layers[il];
    }
    // True when layer `il` attends over the KV cache (a NextN block does).
    bool attends(uint32_t il) const { return !is_recurrent(il) && !is_ffn_only(il); }

    // True when layer `il` runs experts (else a dense FFN).
    bool expert_layer(uint32_t il) const {
        // With FFN-only layers (nemotron_h_moe) those alone run experts.
        if (!ffn_only_layers.empty() && !is_ffn_only(il)) return false;
        return n_expert > 0 && il >= n_layer_dense_lead &&
               (moe_layer_step <= 1 || (il + 1) % moe_layer_step == 0);
    }
    // True when layer `il` attends within its chunk of attn_chunk positions.
    bool is_chunked_layer(uint32_t il) const { return attn_chunk > 0 && has_rope(il); }
    bool has_rope(uint32_t il) const {
        return no_rope_period == 0 || (il + 1) % no_rope_period != 0;
    }
    // Layers before the shared ones: the first unshared_layers() keep their
    // own K and V where they attend; the later ones reuse an earlier one's.
    uint32_t unshared_layers() const { return n_layer - shared_kv_layers; }
    // True when layer `il` stores K and V rows of its own in the KV cache: it
    // attends (a recurrent layer keeps a state instead, seq_states.h; an
    // FFN-only layer nothing) and is not shared. The one rule the cache's
    // layout (KvSlots), the capacity plan and the state files follow.
    bool owns_kv(uint32_t il) const { return il < unshared_layers() && attends(il); }
    // Layers that own K and V: the cache holds one K and one V buffer each.
    uint32_t kv_cache_layers() const {
        uint32_t n = 0;
        for (uint32_t il = 0; il < n_layer; ++il) n += owns_kv(il) ? 1 : 0;
        return n;
    }
    // The layer whose cache an attending layer `il` stores into and attends
    // over: its own, or for a shared layer llama.cpp's choice, the last
    // unshared layer if `il` is global and the one before it if local
    // (read_hparams checks that these are of il's kind; no row has both
    // shared and recurrent layers).
    uint32_t kv_layer(uint32_t il) const {
        if (il < unshared_layers()) return il;
        return unshared_layers() - (is_local_layer(il) ? 2 : 1);
    }
    // The positions a row at p sees through a global (local false) or
    // sliding-window layer's attention: [p - behind + 1, p + ahead], behind
    // 0 from the sequence's start, ahead UINT32_MAX to its end.
    uint32_t attention_behind(bool local) const {
        if (!local || sliding_window == 0) return 0;
        return causal ? sliding_window : sliding_window / 2 + 1;
    }
    uint32_t attention_ahead(bool local) const {
        if (causal) return 0;
        return local && sliding_window ? sliding_window / 2 : UINT32_MAX;
    }
    // True when layer `il` attends through the sliding window with the local rope base.
    bool is_local_layer(uint32_t il) const {
        if (!local_layers.empty()) return sliding_window > 0 && local_layers[il];
        return sliding_window > 0 && swa_period > 0 && (il + 1) % swa_period != 0;
    }
    // Layer `il`'s own attention geometry and FFN width.
    uint32_t layer_head_dim_k(uint32_t il) const {
        return head_dim_k_swa && is_local_layer(il) ? head_dim_k_swa : head_dim_k;
    }
    uint32_t layer_head_dim_v(uint32_t il) const {
        return head_dim_v_swa && is_local_layer(il) ? head_dim_v_swa : head_dim_v;
    }
    uint32_t layer_n_rot(uint32_t il) const {
        return n_rot_swa && is_local_layer(il) ? n_rot_swa : n_rot;
    }
    uint32_t layer_n_head_kv(uint32_t il) const {
        return n_head_kv_layers.empty() ? n_head_kv : n_head_kv_layers[il];
    }
    uint32_t layer_n_ff(uint32_t il) const { return n_ff_layers.empty() ? n_ff : n_ff_layers[il]; }
    // K and V elements one position holds over the layers that own K and V.
    uint64_t kv_cell_elements() const { return kv_cell_elements_k() + kv_cell_elements_v(); }
    // ... of which K, and V (a cache whose K and V kinds differ counts them apart).
    uint64_t kv_cell_elements_k() const {
        uint64_t sum = 0;
        for (uint32_t il = 0; il < n_layer; ++il)
            if (owns_kv(il)) sum += uint64_t{layer_n_head_kv(il)} * layer_head_dim_k(il);
        return sum;
    }
    uint64_t kv_cell_elements_v() const {
        uint64_t sum = 0;
        for (uint32_t il = 0; il < n_layer; ++il)
            if (owns_kv(il)) sum += uint64_t{layer_n_head_kv(il)} * layer_head_dim_v(il);
        return sum;
    }
};

// Refuses a file that is not a decoder ferrox runs, saying what it is: a LoRA
// adapter, a vision projector (mmproj), an importance matrix, a reranking
// model whose head ferrox does not run or an encoder's embedding model
// (`<arch>.pooling_type` rank on a row without a rank head, or on an
// architecture that is not a decoder's). A decoder's embedding model
// (pooling mean, cls or last: Qwen3-Embedding) or reranker (rank:
// Qwen3-Reranker) passes when `embeddings` is set and is refused for
// generation otherwise. Loaders call it before the
// tokenizer: these files have none, and "tokenizer.ggml.model is missing"
// would not tell the user what they loaded. read_hparams calls it too (with
// `embeddings` set: the purpose is the loader's to check).
FERROX_API Expected<void> refuse_non_decoder(const gguf::File& file, bool embeddings = false);

// How a metadata key is read: it must be there, or a default stands in, or a
// value other than its default is refused (what ferrox does not implement),
// or it is read and not applied.
enum class KeyUse : uint8_t { Required, Optional, Refused, Ignored };

// One read of an architecture's key (`<arch>.` + suffix): Required when a
// missing key fails the read, else Optional.
struct KeyRead {
    std::string suffix;
    KeyUse how = KeyUse::Required;
};
using KeyTrace = std::vector<KeyRead>;

// Reads and checks every hyper-parameter; the Error names the file and the
// key. With `trace`, every read of an architecture key is appended to it (the
// test that holds the reader to the row's key list, key_rules).
FERROX_API Expected<Hparams> read_hparams(const gguf::File& file, KeyTrace* trace = nullptr);

}  // namespace ferrox::model
