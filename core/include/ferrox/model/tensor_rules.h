// The tensors an architecture's files hold: name, shape, whether each must be
// there and what it rests on, derived from the architecture's row in one
// place (core/src/model/tensor_table.cpp). Weight binding reads the list,
// `ferrox architectures` prints it, and the tiny-model generator
// (tests/model/make_tiny_models.py) writes its files from that print, so a
// tensor cannot be known to one of them and not the others.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

enum class TensorScope : uint8_t {
    Model,  // one in the file, named as the rule says
    Layer,  // one per layer, named "blk.N." + the rule's name
};

enum class TensorForm : uint8_t {
    Rows,     // a matrix read row by row (the token embeddings)
    Matrix,   // a weight product's matrix, rows x cols
    Experts,  // one rows x cols matrix per expert (or head: `stack`), stacked: [cols, rows, n]
    Vector,   // rows x cols values, read as f32 (norms, biases, sinks, RoPE factors)
};

// A dimension of a tensor, in the file's hyper-parameters.
enum class Extent : uint8_t {
    One,
    Embd,       // embedding_length
    Vocab,      // rows of token_embd.weight
    QDim,       // head_count x key_length
    KDim,       // head_count_kv x key_length
    VDim,       // head_count_kv x value_length
    ODim,       // head_count x value_length
    HeadDimK,   // key_length
    Heads,      // head_count
    Ff,         // feed_forward_length
    FfExpert,   // expert_feed_forward_length
    Experts,    // expert_count
    RopePairs,  // rope.dimension_count / 2
    FfShared,   // expert_shared_count x expert_feed_forward_length
    TwoEmbd,    // 2 x embedding_length (a NextN block's input, token and hidden state)
    // Latent attention (deepseek2):
    QLora,        // attention.q_lora_rank
    KvLora,       // attention.kv_lora_rank
    QkNope,       // attention.key_length_mla - rope.dimension_count
    HeadDimVMla,  // attention.value_length_mla
    QDimMla,      // head_count x attention.key_length_mla
    ODimMla,      // head_count x attention.value_length_mla
    KvAMla,       // attention.kv_lora_rank + rope.dimension_count (attn_kv_a_mqa's rows)
    KvBMla,       // head_count x (qk_nope + value width): attn_kv_b's rows
    ClsOut,       // classifier.output_labels entries (a rank head's outputs; 1 without)
    // Gated attention and Gated DeltaNet layers (qwen35):
    QGateDim,    // 2 x head_count x key_length (q and its gate per head: q_dim_gated)
    SsmKernel,   // ssm.conv_kernel
    SsmConvDim,  // 2 x ssm.group_count x ssm.state_size + ssm.inner_size
    SsmInner,    // ssm.inner_size
    SsmVHeads,   // ssm.time_step_rank
    SsmHeadDim,  // ssm.state_size
    // Mamba-2 layers (mamba2, granitehybrid, nemotron_h):
    SsmGroups,    // ssm.group_count
    SsmGroupDim,  // ssm.inner_size / ssm.group_count (ssm_norm's groups)
    // Per-layer embeddings (gemma4 E2B/E4B):
    PerLayer,     // embedding_length_per_layer_input
    PerLayerAll,  // embedding_length_per_layer_input x block_count
    DenseFeat,    // dense_2_feat_out (sentence-transformers' projections, gemma-embedding)
    // BERT's encoder:
    TokenTypes,  // token_type_count (rows of token_types)
    CtxTrain,    // context_length (rows of the learned position_embd)
};

// What a tensor's presence rests on besides the row.
enum class TensorWhen : uint8_t {
    Always,
    QkvBiases,        // the file has a q, k or v bias in block 0: then all three, every layer
    RopeFreqScaling,  // rope.scaling.type is not longrope
    LongRopeScaling,  // rope.scaling.type is longrope
    // Per layer: a dense FFN (no expert_count, or one of the leading dense
    // layers), or experts (expert_count > 0, past the leading dense layers).
    Dense,
    Experts,
    SharedExperts,   // an expert layer of a file with expert_shared_count > 0
    NextN,           // a NextN/MTP block (the last nextn_predict_layers), kept and not run
    QLowRank,        // attention.q_lora_rank > 0 (latent attention's q through a low rank)
    QDirect,         // attention.q_lora_rank absent or 0
    MlaSplit,        // attention.key_length_mla given: per-head attn_k_b / attn_v_b
    MlaKvB,          // no *_mla keys (an older conversion): one attn_kv_b
    AttentionLayer,  // a layer that attends over the KV cache (not recurrent)
    RecurrentLayer,  // a recurrent layer (Gated DeltaNet, short convolution, Mamba-2)
    FfnLayer,        // an FFN-only layer (nemotron_h)
    PerLayerEmbd,    // embedding_length_per_layer_input > 0 (gemma4 E2B/E4B)
};

// One part of a fused tensor: the rows the unfused tensor `name` would hold.
struct TensorPart {
    std::string_view name;
    Extent rows = Extent::One;
};

struct TensorRule {
    std::string_view name;  // Model: the whole name; Layer: what follows "blk.N."
    TensorScope scope = TensorScope::Layer;
    TensorForm form = TensorForm::Matrix;
    Extent rows = Extent::One, cols = Extent::One;
    TensorUse use = TensorUse::Required;  // Optional: bound where the file has it
    TensorWhen when = TensorWhen::Always;
    Extent stack = Extent::Experts;  // Experts form: how many matrices are stacked
    // A fused tensor's parts, its rows in this order (then `rows` is unused).
    std::array<TensorPart, 3> parts{};
    uint8_t n_parts = 0;
    // This tensor's rows come from that fused tensor instead when the file has it.
    std::string_view fused_into;
    // Where an optional tensor is absent, that one plays its part (tied output).
    std::string_view stand_in;
};

FERROX_API std::string_view extent_name(Extent e);
// An extent's value at layer `il` (gemma4's layers differ in head size, KV
// heads and FFN width; 0 for a model tensor).
FERROX_API uint64_t extent_value(Extent e, const Hparams& hp, uint32_t il = 0);
FERROX_API std::string_view scope_name(TensorScope s);
FERROX_API std::string_view form_name(TensorForm f);
FERROX_API std::string_view when_name(TensorWhen w);
FERROX_API std::string_view use_name(TensorUse u);
// Whether `when` holds for a file with these hyper-parameters, at layer `il`
// (counting NextN blocks after the n_layer run; 0 for a model tensor).
FERROX_API bool applies(TensorWhen when, const Hparams& hp, uint32_t il);
// A rule's rows: its own, or the sum of its parts'.
FERROX_API uint64_t rule_rows(const TensorRule& rule, const Hparams& hp, uint32_t il = 0);

// Every tensor a file of this architecture may hold, in the order the
// generator writes them: the model's, then one layer's.
FERROX_API std::vector<TensorRule> tensor_rules(const ArchSpec& spec);

}  // namespace ferrox::model
