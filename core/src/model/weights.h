// Binding GGUF tensors by name: weight matrices borrowed zero-copy from the
// mapping, norm and bias vectors copied out as f32 (they are tiny).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/model.h"
#include "ferrox/model/rope_tables.h"
#include "ferrox/weight_matrix.h"

namespace ferrox::model {

struct LayerWeights {
    std::optional<WeightMatrix> q, k, v, o;
    std::optional<WeightMatrix> gate, up, down;               // dense FFN
    std::optional<WeightMatrix> router;                       // MoE: [n_expert x n_embd]
    std::vector<WeightMatrix> gate_exps, up_exps, down_exps;  // MoE: one view per expert
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, post_attn_norm, post_ffw_norm;
    std::vector<float> q_bias, k_bias, v_bias;
    std::vector<float> o_bias, sinks;  // gpt-oss: [n_embd], [n_head]
    // gemma4: V's unweighted per-head RMSNorm as ones [head_dim_v]; the
    // layer's output scale [1] (empty: 1).
    std::vector<float> v_norm, out_scale;
    // llama4: the rotated layers' unweighted per-head q/k RMSNorm (its L2
    // norm) as ones [head_dim_k]; empty elsewhere.
    std::vector<float> qk_unit_norm;
    // gpt-oss: the router's bias [n_expert] and the experts' [n_expert][rows].
    std::vector<float> router_bias, gate_exps_bias, up_exps_bias, down_exps_bias;
    // glm4moe: the bias added to the gate's probabilities to choose experts
    // [n_expert], and the shared experts run on every row.
    std::vector<float> selection_bias;
    // gemma4's expert layers: the router's input scale [n_embd] (times
    // 1/sqrt(n_embd) once bound), each expert's output scale [n_expert]
    // (empty: 1), and the norms of the dense and expert branches.
    std::vector<float> router_in_scale, down_exps_scale;
    std::vector<float> post_ffw_norm_1, pre_ffw_norm_2, post_ffw_norm_2;
    std::optional<WeightMatrix> gate_shexp, up_shexp, down_shexp;
    // qwen35moe: the shared expert's gate, one row [1 x n_embd].
    std::optional<WeightMatrix> gate_inp_shexp;
    // A NextN block's own tensors (kept for speculative decoding, not run).
    std::optional<WeightMatrix> nextn_eh_proj, nextn_embed_tokens, nextn_shared_head;
    std::vector<float> nextn_enorm, nextn_hnorm, nextn_shared_head_norm;
    // Latent attention (deepseek2): q's low rank and its norm, the KV latent
    // with its rotated part and the latent's norm, per head the absorbing
    // [kv_lora x qk_nope] and expanding [head_dim_v_mla x kv_lora] matrices,
    // or (older files, Hparams::mla_kv_b) their un-split kv_b: per head
    // qk_nope key rows then the value rows, each kv_lora wide.
    std::optional<WeightMatrix> q_a, q_b, kv_a, kv_b;
    std::vector<WeightMatrix> k_b, v_b;
    std::vector<float> q_a_norm, kv_a_norm;
    // A Gated DeltaNet layer (qwen35): the in-projection of the convolved
    // q, k, v (attn_qkv), the output gate z (attn_gate), beta and alpha per
    // value head, the convolution [conv_dim][kernel], the decay's bias and
    // -exp(A) per value head, the gated norm [head dim] and the out-projection.
    std::optional<WeightMatrix> ssm_in, ssm_gate, ssm_beta, ssm_alpha, ssm_out;
    std::vector<float> ssm_conv, ssm_dt_bias, ssm_a, ssm_norm;
    // A Mamba-2 layer (mamba2) besides those: ssm_in's views z (ssm_gate),
    // x|B|C (ssm_in) and dt per head (ssm_dt), the convolution's bias, the
    // skip D per head; ssm_norm is [group][inner / groups].
    std::optional<WeightMatrix> ssm_dt;
    std::vector<float> ssm_conv_bias, ssm_d;
    // A short-convolution layer (lfm2): in_proj's three parts; its taps and
    // out_proj are ssm_conv and ssm_out.
    std::optional<WeightMatrix> shortconv_b, shortconv_c, shortconv_x;
    // Per-layer embeddings (gemma4 E2B/E4B): the gate [n_embd_per_layer x
    // n_embd], the projection back [n_embd x n_embd_per_layer] and its norm;
    // this layer's rows of per_layer_model_proj (a view), and, in layer 0
    // only, the model's per_layer_proj_norm (where the decoder reads it).
    std::optional<WeightMatrix> ple_gate, ple_proj, ple_model_proj;
    std::vector<float> ple_post_norm, ple_proj_norm;
    // BERT's encoder: the post-norms' weights and biases, the FFN's biases
    // (optional: empty where the file has none).
    std::vector<float> attn_out_norm, attn_out_norm_bias, layer_out_norm, layer_out_norm_bias;
    std::vector<float> up_bias, down_bias;
};

struct ModelWeights {
    const gguf::Tensor* token_embd = nullptr;  // rows read by get_rows (dequantized)
    std::optional<WeightMatrix> output;        // token_embd itself when tied
    std::vector<float> output_norm;
    // A reranker's head (cls.output.weight): n_cls_out rows of n_embd, as f32;
    // its bias, and a classifier's dense layer before it (cls.weight: n_embd
    // rows of n_embd, cls.bias), where the file has them (else empty).
    std::vector<float> cls_out, cls_out_bias, cls, cls_bias;
    // sentence-transformers' dense projections (gemma-embedding), as f32:
    // dense_2 [n_dense rows of n_embd], dense_3 [n_embd rows of n_dense];
    // both empty, or both bound.
    std::vector<float> dense_2, dense_3;
    RopeFactors rope_factors;  // optional per-pair RoPE divisors (llama)
    // gemma4 E2B/E4B: per token a row of n_layer x n_embd_per_layer
    // embeddings (read by rows), their projection from the embedding
    // [n_layer x n_embd_per_layer rows x n_embd] and its norm.
    const gguf::Tensor* per_layer_token_embd = nullptr;
    std::optional<WeightMatrix> per_layer_model_proj;
    std::vector<float> per_layer_proj_norm;
    // BERT's encoder: token type rows (optional; row 0 is added to every
    // token) and learned position rows, read by rows; the embeddings'
    // LayerNorm weight and bias.
    const gguf::Tensor* token_types = nullptr;
    const gguf::Tensor* position_embd = nullptr;
    std::vector<float> embd_norm, embd_norm_bias;
    std::vector<LayerWeights> layers;
    // NextN/MTP blocks (blk.{n_layer + i}), bound and kept, not run; empty
    // for a file without them (or a trunk-only file, whose blocks are absent).
    std::vector<LayerWeights> nextn_layers;
};

// The tensor name of layer `il`'s `suffix` ("blk.3.attn_q.weight").
std::string layer_tensor(uint32_t il, std::string_view suffix);

Expected<WeightMatrix> bind_matrix(const gguf::File& file, const std::string& name, uint64_t rows,
                                   uint64_t cols);
// Binds every tensor the architecture runs; a file holding any other tensor is
// refused, naming it: an unused tensor is a bias, scale or variant the
// forward pass would silently drop (as `rope_freqs.weight` once was).
Expected<ModelWeights> bind_weights(const gguf::File& file, const Hparams& hp);

}  // namespace ferrox::model
