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
    // gpt-oss: the router's bias [n_expert] and the experts' [n_expert][rows].
    std::vector<float> router_bias, gate_exps_bias, up_exps_bias, down_exps_bias;
};

struct ModelWeights {
    const gguf::Tensor* token_embd = nullptr;  // rows read by get_rows (dequantized)
    std::optional<WeightMatrix> output;        // token_embd itself when tied
    std::vector<float> output_norm;
    RopeFactors rope_factors;  // optional per-pair RoPE divisors (llama)
    std::vector<LayerWeights> layers;
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
