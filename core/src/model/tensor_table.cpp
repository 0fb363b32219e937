#include "tensor_table.h"

#include <algorithm>
#include <tuple>

namespace ferrox::model {
namespace {

using E = Extent;
using LW = LayerWeights;

// A rule with its fields set one by one: designated initializers of a
// nested aggregate trip -Wmissing-field-initializers on GCC 12.
TensorRule rule(std::string_view name, TensorScope scope, TensorForm form, Extent rows, Extent cols,
                TensorUse use = TensorUse::Required, TensorWhen when = TensorWhen::Always) {
    TensorRule r;
    r.name = name;
    r.scope = scope;
    r.form = form;
    r.rows = rows;
    r.cols = cols;
    r.use = use;
    r.when = when;
    return r;
}

TensorBinding model_vector(std::string_view name, Extent n, TensorSlot slot,
                           TensorUse use = TensorUse::Required,
                           TensorWhen when = TensorWhen::Always) {
    return {rule(name, TensorScope::Model, TensorForm::Vector, n, E::One, use, when), slot, {}};
}

TensorBinding layer_matrix(std::string_view name, Extent rows, Extent cols, LayerMatrix slot,
                           std::string_view fused_into = {}) {
    TensorBinding b{rule(name, TensorScope::Layer, TensorForm::Matrix, rows, cols), slot, {}};
    b.rule.fused_into = fused_into;
    return b;
}

TensorBinding layer_vector(std::string_view name, Extent rows, std::vector<float> LW::*slot,
                           TensorUse use = TensorUse::Required,
                           TensorWhen when = TensorWhen::Always, Extent cols = E::One) {
    return {rule(name, TensorScope::Layer, TensorForm::Vector, rows, cols, use, when), slot, {}};
}

// A tensor holding the rows of two or three matrices, bound as one view each.
TensorBinding layer_fused(std::string_view name, TensorUse use,
                          std::initializer_list<std::pair<TensorPart, LayerMatrix>> parts) {
    TensorBinding b{rule(name, TensorScope::Layer, TensorForm::Matrix, E::One, E::Embd, use),
                    std::monostate{},
                    {}};
    for (const auto& [part, slot] : parts) {
        b.rule.parts[b.rule.n_parts] = part;
        b.part_slots[b.rule.n_parts] = slot;
        ++b.rule.n_parts;
    }
    return b;
}

TensorBinding experts(std::string_view name, Extent rows, Extent cols,
                      std::vector<WeightMatrix> LW::*slot, Extent stack = E::Experts) {
    TensorBinding b{rule(name, TensorScope::Layer, TensorForm::Experts, rows, cols), slot, {}};
    b.rule.stack = stack;
    return b;
}

// ffn_gate_up_exps.weight: each expert's gate rows, then its up rows, bound
// as the two stacks' views; where the file has it, the unfused pair is not read.
void fused_expert_gate_up(std::vector<TensorBinding>& t, TensorWhen when) {
    for (TensorBinding& b : t)
        if (b.rule.name == "ffn_gate_exps.weight" || b.rule.name == "ffn_up_exps.weight")
            b.rule.fused_into = "ffn_gate_up_exps.weight";
    TensorBinding b{rule("ffn_gate_up_exps.weight", TensorScope::Layer, TensorForm::Experts, E::One,
                         E::Embd, TensorUse::Optional, when),
                    std::monostate{},
                    {}};
    b.rule.parts[0] = {"ffn_gate_exps.weight", E::FfExpert};
    b.rule.parts[1] = {"ffn_up_exps.weight", E::FfExpert};
    b.rule.n_parts = 2;
    b.expert_part_slots[0] = &LW::gate_exps;
    b.expert_part_slots[1] = &LW::up_exps;
    t.push_back(b);
}

// Latent attention's projections (ArchSpec::mla), in place of q/k/v: q
// direct or through a normed low rank, the KV latent with its rotated part,
// and per head the absorbing (k_b) and expanding (v_b) matrices.
void mla_tensors(std::vector<TensorBinding>& t) {
    t.push_back(layer_matrix("attn_q.weight", E::QDimMla, E::Embd, &LW::q));
    t.back().rule.when = TensorWhen::QDirect;
    t.push_back(layer_matrix("attn_q_a.weight", E::QLora, E::Embd, &LW::q_a));
    t.back().rule.when = TensorWhen::QLowRank;
    t.push_back(layer_vector("attn_q_a_norm.weight", E::QLora, &LW::q_a_norm, TensorUse::Required,
                             TensorWhen::QLowRank));
    t.push_back(layer_matrix("attn_q_b.weight", E::QDimMla, E::QLora, &LW::q_b));
    t.back().rule.when = TensorWhen::QLowRank;
    t.push_back(layer_matrix("attn_kv_a_mqa.weight", E::KvAMla, E::Embd, &LW::kv_a));
    t.push_back(layer_vector("attn_kv_a_norm.weight", E::KvLora, &LW::kv_a_norm));
    t.push_back(experts("attn_k_b.weight", E::KvLora, E::QkNope, &LW::k_b, E::Heads));
    t.back().rule.when = TensorWhen::MlaSplit;
    t.push_back(experts("attn_v_b.weight", E::HeadDimVMla, E::KvLora, &LW::v_b, E::Heads));
    t.back().rule.when = TensorWhen::MlaSplit;
    t.push_back(layer_matrix("attn_kv_b.weight", E::KvBMla, E::KvLora, &LW::kv_b));
    t.back().rule.when = TensorWhen::MlaKvB;
    t.push_back(layer_matrix("attn_output.weight", E::Embd, E::ODimMla, &LW::o));
}

// Gated DeltaNet layers (ArchSpec::delta_net_layers): the attention
// tensors hold for the full-attention layers only, and each recurrent layer
// has its own. attn_qkv there is the convolution's input, so the attention
// layers take q, k and v unfused.
// A hybrid row's attention tensors (q, k, v, their norms and biases, the
// output) hold for the attending layers only.
void attention_on_attention_layers(std::vector<TensorBinding>& t) {
    for (TensorBinding& b : t)
        if (b.rule.scope == TensorScope::Layer && b.rule.when == TensorWhen::Always &&
            (b.rule.name.starts_with("attn_q") || b.rule.name.starts_with("attn_k") ||
             b.rule.name.starts_with("attn_v") || b.rule.name.starts_with("attn_output")))
            b.rule.when = TensorWhen::AttentionLayer;
}

void delta_net_tensors(std::vector<TensorBinding>& t, const ArchSpec& spec) {
    std::erase_if(t, [](const TensorBinding& b) { return b.rule.name == "attn_qkv.weight"; });
    for (TensorBinding& b : t)
        if (b.rule.fused_into == "attn_qkv.weight") b.rule.fused_into = {};
    attention_on_attention_layers(t);
    const auto recurrent = [&](TensorBinding b) {
        b.rule.when = TensorWhen::RecurrentLayer;
        t.push_back(std::move(b));
    };
    recurrent(layer_matrix("attn_qkv.weight", E::SsmConvDim, E::Embd, &LW::ssm_in));
    recurrent(layer_matrix("attn_gate.weight", E::SsmInner, E::Embd, &LW::ssm_gate));
    recurrent(layer_vector("ssm_conv1d.weight", E::SsmKernel, &LW::ssm_conv, TensorUse::Required,
                           TensorWhen::Always, E::SsmConvDim));
    recurrent(layer_vector("ssm_dt.bias", E::SsmVHeads, &LW::ssm_dt_bias));
    recurrent(layer_vector("ssm_a", E::SsmVHeads, &LW::ssm_a));
    if (spec.delta_net_grouped) {
        // qwen3next: one tensor, per key head its value heads' betas then
        // alphas; bound as two views of vh rows each, which the delta rule
        // takes back apart per row (delta_net.cpp).
        recurrent(layer_fused("ssm_ba.weight", TensorUse::Required,
                              {{{"ssm_beta.weight", E::SsmVHeads}, &LW::ssm_beta},
                               {{"ssm_alpha.weight", E::SsmVHeads}, &LW::ssm_alpha}}));
    } else {
        recurrent(layer_matrix("ssm_beta.weight", E::SsmVHeads, E::Embd, &LW::ssm_beta));
        recurrent(layer_matrix("ssm_alpha.weight", E::SsmVHeads, E::Embd, &LW::ssm_alpha));
    }
    recurrent(layer_vector("ssm_norm.weight", E::SsmHeadDim, &LW::ssm_norm));
    recurrent(layer_matrix("ssm_out.weight", E::Embd, E::SsmInner, &LW::ssm_out));
}

// Short-convolution layers (ArchSpec::shortconv_layers): in_proj's rows are
// b, c and x, bound as three views; the depthwise taps are [channel][tap] as
// a DeltaNet layer's.
void shortconv_tensors(std::vector<TensorBinding>& t) {
    attention_on_attention_layers(t);
    const auto recurrent = [&](TensorBinding b) {
        b.rule.when = TensorWhen::RecurrentLayer;
        t.push_back(std::move(b));
    };
    recurrent(layer_vector("shortconv.conv.weight", E::SsmKernel, &LW::ssm_conv,
                           TensorUse::Required, TensorWhen::Always, E::SsmConvDim));
    recurrent(layer_fused("shortconv.in_proj.weight", TensorUse::Required,
                          {{{"shortconv.in_proj.b", E::Embd}, &LW::shortconv_b},
                           {{"shortconv.in_proj.c", E::Embd}, &LW::shortconv_c},
                           {{"shortconv.in_proj.x", E::Embd}, &LW::shortconv_x}}));
    recurrent(layer_matrix("shortconv.out_proj.weight", E::Embd, E::Embd, &LW::ssm_out));
}

// Mamba-2 layers (ArchSpec::mamba2_layers): ssm_in's rows are z, the
// convolution's input x|B|C and dt, bound as three views; the convolution
// [conv_dim][kernel] with its bias; per head dt's bias, -exp(A) and the
// skip D ([1, heads] in the files); the gated norm per group; the
// out-projection. The order is llama.cpp's loader's. `when`: every layer
// (mamba2), or the recurrent ones (the hybrids).
void mamba2_block_tensors(std::vector<TensorBinding>& t, TensorWhen when) {
    const auto add = [&](TensorBinding b) {
        b.rule.when = when;
        t.push_back(std::move(b));
    };
    add(layer_fused("ssm_in.weight", TensorUse::Required,
                    {{{"ssm_in.z", E::SsmInner}, &LW::ssm_gate},
                     {{"ssm_in.xbc", E::SsmConvDim}, &LW::ssm_in},
                     {{"ssm_in.dt", E::SsmVHeads}, &LW::ssm_dt}}));
    add(layer_vector("ssm_conv1d.weight", E::SsmKernel, &LW::ssm_conv, TensorUse::Required,
                     TensorWhen::Always, E::SsmConvDim));
    add(layer_vector("ssm_conv1d.bias", E::SsmConvDim, &LW::ssm_conv_bias));
    add(layer_vector("ssm_dt.bias", E::SsmVHeads, &LW::ssm_dt_bias));
    add(layer_vector("ssm_a", E::One, &LW::ssm_a, TensorUse::Required, TensorWhen::Always,
                     E::SsmVHeads));
    add(layer_vector("ssm_d", E::One, &LW::ssm_d, TensorUse::Required, TensorWhen::Always,
                     E::SsmVHeads));
    add(layer_vector("ssm_norm.weight", E::SsmGroupDim, &LW::ssm_norm, TensorUse::Required,
                     TensorWhen::Always, E::SsmGroups));
    add(layer_matrix("ssm_out.weight", E::Embd, E::SsmInner, &LW::ssm_out));
}

void mamba2_tensors(std::vector<TensorBinding>& t) {
    t.push_back(layer_vector("attn_norm.weight", E::Embd, &LW::attn_norm));
    mamba2_block_tensors(t, TensorWhen::Always);
}

// Mamba-2 blocks beside attention (granitehybrid, nemotron_h): the
// attention tensors on the attending layers, the block's on the recurrent
// ones; nemotron_h's FFN (ffn_up, ffn_down: no gate, no ffn_norm) on its
// FFN-only layers, granitehybrid's SwiGLU FFN on every layer.
void mamba2_hybrid_tensors(std::vector<TensorBinding>& t, const ArchSpec& spec) {
    attention_on_attention_layers(t);
    if (spec.one_block_layers) {
        std::erase_if(t, [&](const TensorBinding& b) {
            return b.rule.name == "ffn_gate.weight" || b.rule.name == spec.ffn_norm_tensor;
        });
        for (TensorBinding& b : t)
            if (b.rule.name == "ffn_up.weight" || b.rule.name == "ffn_down.weight")
                b.rule.when = TensorWhen::FfnLayer;
    }
    mamba2_block_tensors(t, TensorWhen::RecurrentLayer);
}

// BERT's encoder (ArchSpec::bert_encoder): the embeddings' token type and
// learned position rows and their LayerNorm (weight and bias), in place of
// a final norm; per layer the post-norms (LayerNorm, weight and bias) and a
// GELU FFN without a gate, its biases optional as llama.cpp loads them.
void bert_model_tensors(std::vector<TensorBinding>& t, const ArchSpec& spec) {
    const auto rows = [&](std::string_view name, Extent n, const gguf::Tensor* ModelWeights::*slot,
                          TensorUse use) {
        t.push_back({rule(name, TensorScope::Model, TensorForm::Rows, n, E::Embd, use), slot, {}});
    };
    rows("token_types.weight", E::TokenTypes, &ModelWeights::token_types, TensorUse::Optional);
    if (spec.learned_positions)
        rows("position_embd.weight", E::CtxTrain, &ModelWeights::position_embd,
             TensorUse::Required);
    t.push_back(model_vector("token_embd_norm.weight", E::Embd, &ModelWeights::embd_norm));
    t.push_back(model_vector("token_embd_norm.bias", E::Embd, &ModelWeights::embd_norm_bias));
}

void bert_layer_tensors(std::vector<TensorBinding>& t, const ArchSpec& spec) {
    t.push_back(layer_vector("attn_output_norm.weight", E::Embd, &LW::attn_out_norm));
    t.push_back(layer_vector("attn_output_norm.bias", E::Embd, &LW::attn_out_norm_bias));
    if (spec.activation == FfnActivation::GeluTanh) {  // bert: no gate, biases
        std::erase_if(t, [](const TensorBinding& b) { return b.rule.name == "ffn_gate.weight"; });
        t.push_back(layer_vector("ffn_up.bias", E::Ff, &LW::up_bias, TensorUse::Optional));
        t.push_back(layer_vector("ffn_down.bias", E::Embd, &LW::down_bias, TensorUse::Optional));
    }
    t.push_back(layer_vector("layer_output_norm.weight", E::Embd, &LW::layer_out_norm));
    t.push_back(layer_vector("layer_output_norm.bias", E::Embd, &LW::layer_out_norm_bias));
}

// A reranker's head, read as f32 (n_cls_out rows of n_embd; a classifier's
// dense layer n_embd x n_embd: small beside the layers); optional as in
// llama.cpp, cls.output.weight required by bind_weights for rank pooling.
// A vector's `rows` is its fastest dimension (GGUF's first).
void rank_head_tensors(std::vector<TensorBinding>& t, const ArchSpec& spec) {
    const auto head = [&](std::string_view name, Extent rows, Extent cols,
                          std::vector<float> ModelWeights::*slot) {
        t.push_back(model_vector(name, rows, slot, TensorUse::Optional));
        t.back().rule.cols = cols;
    };
    if (spec.rank_classifier) {
        head("cls.weight", E::Embd, E::Embd, &ModelWeights::cls);
        head("cls.bias", E::Embd, E::One, &ModelWeights::cls_bias);
    }
    head("cls.output.weight", E::Embd, E::ClsOut, &ModelWeights::cls_out);
    if (spec.rank_classifier)
        head("cls.output.bias", E::ClsOut, E::One, &ModelWeights::cls_out_bias);
}

}  // namespace

// The order is the tiny-model generator's (it draws random values in it, so
// changing it changes those files): the model's tensors, then a layer's in the
// order its parts were added to the generator.
std::vector<TensorBinding> tensor_table(const ArchSpec& spec) {
    std::vector<TensorBinding> t;
    t.push_back({rule("token_embd.weight", TensorScope::Model, TensorForm::Rows, E::Vocab, E::Embd),
                 &ModelWeights::token_embd,
                 {}});
    // BERT's encoder has no final norm: its embeddings' norm instead.
    if (spec.bert_encoder)
        bert_model_tensors(t, spec);
    else
        t.push_back(model_vector(spec.output_norm_tensor, E::Embd, &ModelWeights::output_norm));
    TensorBinding output{
        rule("output.weight", TensorScope::Model, TensorForm::Matrix, E::Vocab, E::Embd,
             spec.tied_output ? TensorUse::Optional : TensorUse::Required),
        &ModelWeights::output,
        {}};
    if (spec.tied_output) output.rule.stand_in = "token_embd.weight";
    t.push_back(output);
    if (spec.attention_free) {  // mamba2: no attention, no FFN
        mamba2_tensors(t);
        return t;
    }
    if (spec.rank_head) rank_head_tensors(t, spec);
    // sentence-transformers' projections of the pooled vector, read as f32
    // (applied once per input, on the host): n_embd -> n_dense -> n_embd.
    // A vector's `rows` is its fastest dimension: dense_2 is [n_embd, n_dense].
    if (spec.dense_projections) {
        t.push_back(
            model_vector("dense_2.weight", E::Embd, &ModelWeights::dense_2, TensorUse::Optional));
        t.back().rule.cols = E::DenseFeat;
        t.push_back(model_vector("dense_3.weight", E::DenseFeat, &ModelWeights::dense_3,
                                 TensorUse::Optional));
        t.back().rule.cols = E::Embd;
    }
    // Per-pair RoPE divisors, one set for all layers (llama.cpp reads them
    // for these architectures; LongRoPE's pair only with that scaling).
    const auto long_rope_when = spec.rope_factors == RopeFactorTensors::LongRope
                                    ? TensorWhen::Always
                                    : TensorWhen::LongRopeScaling;
    if (spec.rope_factors == RopeFactorTensors::GlobalFreqs)
        t.push_back(model_vector("rope_freqs.weight", E::RopePairs, &RopeFactors::freqs));
    if (spec.rope_factors == RopeFactorTensors::ByScalingType)
        t.push_back(model_vector("rope_freqs.weight", E::RopePairs, &RopeFactors::freqs,
                                 TensorUse::Optional, TensorWhen::RopeFreqScaling));
    if (spec.rope_factors == RopeFactorTensors::Freqs)
        t.push_back(model_vector("rope_freqs.weight", E::RopePairs, &RopeFactors::freqs,
                                 TensorUse::Optional));
    if (spec.rope_factors == RopeFactorTensors::ByScalingType ||
        spec.rope_factors == RopeFactorTensors::LongRope)
        for (const auto& [name, slot] :
             {std::pair{"rope_factors_short.weight", &RopeFactors::short_factors},
              std::pair{"rope_factors_long.weight", &RopeFactors::long_factors}})
            t.push_back(
                model_vector(name, E::RopePairs, slot, TensorUse::Optional, long_rope_when));

    if (spec.per_layer_geometry_keys) {
        // gemma4 E2B/E4B: a row of per-layer embeddings per token (read by
        // rows), their projection from the embedding and its norm.
        t.push_back({rule("per_layer_token_embd.weight", TensorScope::Model, TensorForm::Rows,
                          E::Vocab, E::PerLayerAll, TensorUse::Required, TensorWhen::PerLayerEmbd),
                     &ModelWeights::per_layer_token_embd,
                     {}});
        t.push_back({rule("per_layer_model_proj.weight", TensorScope::Model, TensorForm::Matrix,
                          E::PerLayerAll, E::Embd, TensorUse::Required, TensorWhen::PerLayerEmbd),
                     &ModelWeights::per_layer_model_proj,
                     {}});
        t.push_back(model_vector("per_layer_proj_norm.weight", E::PerLayer,
                                 &ModelWeights::per_layer_proj_norm, TensorUse::Required,
                                 TensorWhen::PerLayerEmbd));
    }

    if (spec.pre_norms) t.push_back(layer_vector("attn_norm.weight", E::Embd, &LW::attn_norm));
    if (spec.mla) {
        mla_tensors(t);
    } else {
        // llama.cpp takes a fused attn_qkv (q, k, v rows in that order) for every
        // architecture whose q/k/v it loads; phi3's files have one.
        const Extent q_rows = spec.gated_attention ? E::QGateDim : E::QDim;
        t.push_back(layer_matrix("attn_q.weight", q_rows, E::Embd, &LW::q, "attn_qkv.weight"));
        t.push_back(layer_matrix("attn_k.weight", E::KDim, E::Embd, &LW::k, "attn_qkv.weight"));
        t.push_back(layer_matrix("attn_v.weight", E::VDim, E::Embd, &LW::v, "attn_qkv.weight"));
        if (spec.value_from_key) t.back().rule.use = TensorUse::Optional;  // K stands for V
        t.push_back(layer_fused("attn_qkv.weight", TensorUse::Optional,
                                {{{"attn_q.weight", q_rows}, &LW::q},
                                 {{"attn_k.weight", E::KDim}, &LW::k},
                                 {{"attn_v.weight", E::VDim}, &LW::v}}));
        t.push_back(layer_matrix("attn_output.weight", E::Embd, E::ODim, &LW::o));
    }
    if (spec.attn_output_bias != TensorUse::Absent)
        t.push_back(layer_vector("attn_output.bias", E::Embd, &LW::o_bias, spec.attn_output_bias));
    if (spec.attention_sinks) t.push_back(layer_vector("attn_sinks.weight", E::Heads, &LW::sinks));
    // Optional for every architecture, as in llama.cpp (qwen2's files always have them).
    if (!spec.mla) {
        t.push_back(layer_vector("attn_q.bias", E::QDim, &LW::q_bias, TensorUse::Required,
                                 TensorWhen::QkvBiases));
        t.push_back(layer_vector("attn_k.bias", E::KDim, &LW::k_bias, TensorUse::Required,
                                 TensorWhen::QkvBiases));
        t.push_back(layer_vector("attn_v.bias", E::VDim, &LW::v_bias, TensorUse::Required,
                                 TensorWhen::QkvBiases));
    }
    if (spec.qk_norm != QkNorm::None) {
        const bool whole = spec.qk_norm == QkNorm::Whole;
        const TensorUse use = spec.qk_norm_optional ? TensorUse::Optional : TensorUse::Required;
        t.push_back(
            layer_vector("attn_q_norm.weight", whole ? E::QDim : E::HeadDimK, &LW::q_norm, use));
        t.push_back(
            layer_vector("attn_k_norm.weight", whole ? E::KDim : E::HeadDimK, &LW::k_norm, use));
    }
    if (spec.post_norms) {
        t.push_back(layer_vector("post_attention_norm.weight", E::Embd, &LW::post_attn_norm));
        t.push_back(layer_vector("post_ffw_norm.weight", E::Embd, &LW::post_ffw_norm));
    }
    if (spec.pre_norms) t.push_back(layer_vector(spec.ffn_norm_tensor, E::Embd, &LW::ffn_norm));
    if (spec.layer_output_scale)
        t.push_back(
            layer_vector("layer_output_scale.weight", E::One, &LW::out_scale, TensorUse::Optional));
    // A row with optional experts lists both FFNs, each under its condition.
    // So does a row whose first layers are dense (glm4moe), per layer.
    // gemma4's dense FFN runs on every layer, beside the experts where there are any.
    const bool dense = !spec.moe || spec.leading_dense_layers || spec.moe_layer_step_key,
               experts_too = spec.moe || spec.moe_with_expert_count || spec.dense_beside_experts;
    const bool either = spec.moe_with_expert_count || spec.leading_dense_layers ||
                        spec.dense_beside_experts || spec.moe_layer_step_key;
    const TensorWhen dense_when =
        either && !spec.dense_beside_experts ? TensorWhen::Dense : TensorWhen::Always;
    // nemotron_h_moe: experts on the FFN-only layers alone.
    const TensorWhen experts_when =
        either || spec.one_block_layers ? TensorWhen::Experts : TensorWhen::Always;
    if (dense && spec.fused_gate_up) {
        // phi3: ffn_up.weight holds the gate's rows, then up's.
        t.push_back(layer_fused(
            "ffn_up.weight", TensorUse::Required,
            {{{"ffn_gate.weight", E::Ff}, &LW::gate}, {{"ffn_up.weight", E::Ff}, &LW::up}}));
        t.push_back(layer_matrix("ffn_down.weight", E::Embd, E::Ff, &LW::down));
    } else if (dense) {
        for (auto [name, rows, cols, slot] :
             {std::tuple{"ffn_gate.weight", E::Ff, E::Embd, &LW::gate},
              std::tuple{"ffn_up.weight", E::Ff, E::Embd, &LW::up},
              std::tuple{"ffn_down.weight", E::Embd, E::Ff, &LW::down}}) {
            t.push_back(layer_matrix(name, rows, cols, slot));
            t.back().rule.when = dense_when;
        }
    }
    if (experts_too) {
        t.push_back(layer_matrix("ffn_gate_inp.weight", E::Experts, E::Embd, &LW::router));
        t.back().rule.when = experts_when;
        if (spec.expert_biases)
            t.push_back(layer_vector("ffn_gate_inp.bias", E::Experts, &LW::router_bias));
        // Each expert's bias row follows its matrix: [rows, n_expert] values.
        const auto expert_part = [&](std::string_view name, std::string_view bias, Extent rows,
                                     Extent cols, std::vector<WeightMatrix> LW::*slot,
                                     std::vector<float> LW::*bias_slot) {
            t.push_back(experts(name, rows, cols, slot));
            t.back().rule.when = experts_when;
            if (spec.expert_biases)
                t.push_back(layer_vector(bias, rows, bias_slot, TensorUse::Required,
                                         TensorWhen::Always, E::Experts));
        };
        expert_part("ffn_gate_exps.weight", "ffn_gate_exps.bias", E::FfExpert, E::Embd,
                    &LW::gate_exps, &LW::gate_exps_bias);
        expert_part("ffn_up_exps.weight", "ffn_up_exps.bias", E::FfExpert, E::Embd, &LW::up_exps,
                    &LW::up_exps_bias);
        if (spec.fused_expert_gate_up) fused_expert_gate_up(t, experts_when);
        expert_part("ffn_down_exps.weight", "ffn_down_exps.bias", E::Embd, E::FfExpert,
                    &LW::down_exps, &LW::down_exps_bias);
        if (spec.expert_output_scales)
            t.push_back(layer_vector("ffn_down_exps.scale", E::Experts, &LW::down_exps_scale,
                                     TensorUse::Optional, experts_when));
        if (spec.scaled_router_input)
            t.push_back(layer_vector("ffn_gate_inp.scale", E::Embd, &LW::router_in_scale,
                                     TensorUse::Required, experts_when));
        if (spec.dense_beside_experts)
            for (auto [name, slot] : {std::pair{"post_ffw_norm_1.weight", &LW::post_ffw_norm_1},
                                      std::pair{"pre_ffw_norm_2.weight", &LW::pre_ffw_norm_2},
                                      std::pair{"post_ffw_norm_2.weight", &LW::post_ffw_norm_2}})
                t.push_back(layer_vector(name, E::Embd, slot, TensorUse::Required, experts_when));
        if (spec.expert_selection_bias != TensorUse::Absent)
            t.push_back(layer_vector("exp_probs_b.bias", E::Experts, &LW::selection_bias,
                                     spec.expert_selection_bias, experts_when));
        if (spec.shared_experts || spec.shared_expert_gate || spec.shared_expert_of_expert_width ||
            spec.optional_shared_expert)
            for (auto [name, rows, cols, slot] :
                 {std::tuple{"ffn_gate_shexp.weight", E::FfShared, E::Embd, &LW::gate_shexp},
                  std::tuple{"ffn_up_shexp.weight", E::FfShared, E::Embd, &LW::up_shexp},
                  std::tuple{"ffn_down_shexp.weight", E::Embd, E::FfShared, &LW::down_shexp}}) {
                t.push_back(layer_matrix(name, rows, cols, slot));
                t.back().rule.when = TensorWhen::SharedExperts;
            }
        // The shared expert's gate: one row of n_embd (a vector in the file),
        // a product like the router's so that it runs where x lives.
        if (spec.shared_expert_gate) {
            t.push_back(
                layer_matrix("ffn_gate_inp_shexp.weight", E::One, E::Embd, &LW::gate_inp_shexp));
            t.back().rule.when = TensorWhen::SharedExperts;
        }
    }
    if (spec.relu_squared_experts)  // up, relu^2, down: no gate
        std::erase_if(t, [](const TensorBinding& b) {
            return b.rule.name == "ffn_gate_exps.weight" || b.rule.name == "ffn_gate_shexp.weight";
        });
    if (spec.bert_encoder) bert_layer_tensors(t, spec);
    if (spec.delta_net_layers) delta_net_tensors(t, spec);
    if (spec.shortconv_layers) shortconv_tensors(t);
    if (spec.mamba2_layers) mamba2_hybrid_tensors(t, spec);
    if (spec.per_layer_geometry_keys) {
        // gemma4 E2B/E4B: each layer's gate from the residual stream, the
        // projection of the gated per-layer input back to it, and its norm.
        t.push_back(layer_matrix("inp_gate.weight", E::PerLayer, E::Embd, &LW::ple_gate));
        t.back().rule.when = TensorWhen::PerLayerEmbd;
        t.push_back(layer_matrix("proj.weight", E::Embd, E::PerLayer, &LW::ple_proj));
        t.back().rule.when = TensorWhen::PerLayerEmbd;
        t.push_back(layer_vector("post_norm.weight", E::Embd, &LW::ple_post_norm,
                                 TensorUse::Required, TensorWhen::PerLayerEmbd));
    }
    if (spec.nextn_layers) {
        // A NextN block's own tensors, besides a layer's (llama.cpp's
        // graph_mtp): the projection of [enorm(token), hnorm(hidden)], and
        // optionally its own embeddings, output norm and output.
        const auto nextn = [&](TensorBinding b, TensorUse use = TensorUse::Required) {
            b.rule.when = TensorWhen::NextN;
            b.rule.use = use;
            t.push_back(b);
        };
        nextn(layer_matrix("nextn.eh_proj.weight", E::Embd, E::TwoEmbd, &LW::nextn_eh_proj));
        nextn(layer_vector("nextn.enorm.weight", E::Embd, &LW::nextn_enorm));
        nextn(layer_vector("nextn.hnorm.weight", E::Embd, &LW::nextn_hnorm));
        nextn(layer_matrix("nextn.embed_tokens.weight", E::Vocab, E::Embd, &LW::nextn_embed_tokens),
              TensorUse::Optional);
        nextn(layer_matrix("nextn.shared_head_head.weight", E::Vocab, E::Embd,
                           &LW::nextn_shared_head),
              TensorUse::Optional);
        nextn(layer_vector("nextn.shared_head_norm.weight", E::Embd, &LW::nextn_shared_head_norm),
              TensorUse::Optional);
    }
    return t;
}

std::vector<TensorRule> tensor_rules(const ArchSpec& spec) {
    std::vector<TensorRule> rules;
    for (TensorBinding& b : tensor_table(spec)) rules.push_back(b.rule);
    return rules;
}

std::string_view extent_name(Extent e) {
    switch (e) {
        case E::One:
            return "1";
        case E::Embd:
            return "n_embd";
        case E::Vocab:
            return "n_vocab";
        case E::QDim:
            return "q_dim";
        case E::KDim:
            return "k_dim";
        case E::VDim:
            return "v_dim";
        case E::ODim:
            return "o_dim";
        case E::HeadDimK:
            return "head_dim_k";
        case E::Heads:
            return "n_head";
        case E::Ff:
            return "n_ff";
        case E::FfExpert:
            return "n_ff_expert";
        case E::Experts:
            return "n_expert";
        case E::RopePairs:
            return "rope_pairs";
        case E::FfShared:
            return "n_ff_shexp";
        case E::TwoEmbd:
            return "n_embd+n_embd";
        case E::QLora:
            return "q_lora";
        case E::KvLora:
            return "kv_lora";
        case E::QkNope:
            return "qk_nope";
        case E::HeadDimVMla:
            return "head_dim_v_mla";
        case E::QDimMla:
            return "q_dim_mla";
        case E::ODimMla:
            return "o_dim_mla";
        case E::KvAMla:
            return "kv_a_mla";
        case E::KvBMla:
            return "kv_b_mla";
        case E::ClsOut:
            return "n_cls_out";
        case E::QGateDim:
            return "q_dim_gated";
        case E::SsmKernel:
            return "ssm_conv_kernel";
        case E::SsmConvDim:
            return "ssm_conv_dim";
        case E::SsmInner:
            return "ssm_inner";
        case E::SsmVHeads:
            return "ssm_v_heads";
        case E::SsmHeadDim:
            return "ssm_head_dim";
        case E::SsmGroups:
            return "ssm_groups";
        case E::SsmGroupDim:
            return "ssm_group_dim";
        case E::PerLayer:
            return "n_embd_per_layer";
        case E::PerLayerAll:
            return "n_embd_per_layer*n_layer";
        case E::DenseFeat:
            return "n_dense";
        case E::TokenTypes:
            return "n_token_types";
        case E::CtxTrain:
            return "n_ctx_train";
    }
    return "?";
}

uint64_t extent_value(Extent e, const Hparams& hp, uint32_t il) {
    // A NextN block (il >= n_layer) has the last run layer's geometry.
    if (hp.n_layer > 0) il = std::min(il, hp.n_layer - 1);
    switch (e) {
        case E::One:
            return 1;
        case E::Embd:
            return hp.n_embd;
        case E::Vocab:
            return hp.vocab;
        case E::QDim:
            return uint64_t{hp.n_head} * hp.layer_head_dim_k(il);
        case E::KDim:
            return uint64_t{hp.layer_n_head_kv(il)} * hp.layer_head_dim_k(il);
        case E::VDim:
            return uint64_t{hp.layer_n_head_kv(il)} * hp.layer_head_dim_v(il);
        case E::ODim:
            return uint64_t{hp.n_head} * hp.layer_head_dim_v(il);
        case E::HeadDimK:
            return hp.layer_head_dim_k(il);
        case E::Heads:
            return hp.n_head;
        case E::Ff:
            return hp.layer_n_ff(il);
        case E::FfExpert:
            return hp.n_ff_expert;
        case E::Experts:
            return hp.n_expert;
        case E::RopePairs:
            return hp.n_rot / 2;
        case E::FfShared:
            return hp.n_ff_shared;
        case E::TwoEmbd:
            return 2 * uint64_t{hp.n_embd};
        case E::QLora:
            return hp.mla_q_lora;
        case E::KvLora:
            return hp.mla_kv_lora;
        case E::QkNope:
            return hp.mla_head_k - hp.n_rot;  // read_mla: > 0
        case E::HeadDimVMla:
            return hp.mla_head_v;
        case E::QDimMla:
            return uint64_t{hp.n_head} * hp.mla_head_k;
        case E::ODimMla:
            return uint64_t{hp.n_head} * hp.mla_head_v;
        case E::KvAMla:
            return uint64_t{hp.mla_kv_lora} + hp.n_rot;
        case E::KvBMla:
            return uint64_t{hp.n_head} * (hp.mla_head_k - hp.n_rot + hp.mla_head_v);
        case E::ClsOut:
            return hp.n_cls_out;
        case E::QGateDim:
            return 2 * uint64_t{hp.n_head} * hp.head_dim_k;
        case E::SsmKernel:
            return hp.ssm_conv_kernel;
        case E::SsmConvDim:
            return hp.ssm_conv_dim();
        case E::SsmInner:
            return hp.ssm_inner;
        case E::SsmVHeads:
            return hp.ssm_v_heads;
        case E::SsmHeadDim:
            return hp.ssm_state;
        case E::SsmGroups:
            return hp.ssm_k_heads;
        case E::SsmGroupDim:
            return hp.ssm_k_heads ? hp.ssm_inner / hp.ssm_k_heads : 0;
        case E::PerLayer:
            return hp.n_embd_per_layer;
        case E::PerLayerAll:
            return uint64_t{hp.n_embd_per_layer} * hp.n_layer;
        case E::DenseFeat:
            return hp.dense_feat;
        case E::TokenTypes:
            return hp.n_token_types;
        case E::CtxTrain:
            return hp.n_ctx_train;
    }
    return 0;
}

uint64_t rule_rows(const TensorRule& rule, const Hparams& hp, uint32_t il) {
    if (rule.n_parts == 0) return extent_value(rule.rows, hp, il);
    uint64_t rows = 0;
    for (uint8_t i = 0; i < rule.n_parts; ++i) rows += extent_value(rule.parts[i].rows, hp, il);
    return rows;
}

bool applies(TensorWhen when, const Hparams& hp, uint32_t il) {
    switch (when) {
        case TensorWhen::Always:
            return true;
        case TensorWhen::QkvBiases:
            return hp.qkv_bias;
        case TensorWhen::RopeFreqScaling:
            return hp.rope_scaling != RopeScaling::LongRope;
        case TensorWhen::LongRopeScaling:
            return hp.rope_scaling == RopeScaling::LongRope;
        case TensorWhen::Dense:
            return !hp.expert_layer(il);
        case TensorWhen::Experts:
            return hp.expert_layer(il);
        case TensorWhen::SharedExperts:
            return hp.expert_layer(il) && hp.n_ff_shared > 0;
        case TensorWhen::NextN:
            return il >= hp.n_layer;
        case TensorWhen::QLowRank:
            return hp.mla_q_lora > 0;
        case TensorWhen::QDirect:
            return hp.mla_q_lora == 0;
        case TensorWhen::MlaSplit:
            return !hp.mla_kv_b;
        case TensorWhen::MlaKvB:
            return hp.mla_kv_b;
        case TensorWhen::AttentionLayer:
            return il >= hp.n_layer || hp.attends(il);
        case TensorWhen::RecurrentLayer:
            return il < hp.n_layer && hp.is_recurrent(il);
        case TensorWhen::FfnLayer:
            return il < hp.n_layer && hp.is_ffn_only(il);
        case TensorWhen::PerLayerEmbd:
            return hp.n_embd_per_layer > 0;
    }
    return false;
}

std::string_view scope_name(TensorScope s) { return s == TensorScope::Model ? "model" : "layer"; }

std::string_view form_name(TensorForm f) {
    switch (f) {
        case TensorForm::Rows:
            return "rows";
        case TensorForm::Matrix:
            return "matrix";
        case TensorForm::Experts:
            return "experts";
        case TensorForm::Vector:
            return "vector";
    }
    return "?";
}

std::string_view when_name(TensorWhen w) {
    switch (w) {
        case TensorWhen::Always:
            return "always";
        case TensorWhen::QkvBiases:
            return "qkv_biases";
        case TensorWhen::RopeFreqScaling:
            return "rope_scaling_not_longrope";
        case TensorWhen::LongRopeScaling:
            return "rope_scaling_longrope";
        case TensorWhen::Dense:
            return "dense";
        case TensorWhen::Experts:
            return "experts";
        case TensorWhen::SharedExperts:
            return "shared_experts";
        case TensorWhen::NextN:
            return "nextn";
        case TensorWhen::QLowRank:
            return "q_low_rank";
        case TensorWhen::QDirect:
            return "q_direct";
        case TensorWhen::MlaSplit:
            return "mla_split";
        case TensorWhen::MlaKvB:
            return "mla_kv_b";
        case TensorWhen::AttentionLayer:
            return "attention_layer";
        case TensorWhen::RecurrentLayer:
            return "recurrent_layer";
        case TensorWhen::FfnLayer:
            return "ffn_layer";
        case TensorWhen::PerLayerEmbd:
            return "per_layer_embd";
    }
    return "?";
}

std::string_view use_name(TensorUse u) {
    switch (u) {
        case TensorUse::Absent:
            return "absent";
        case TensorUse::Optional:
            return "optional";
        case TensorUse::Required:
            return "required";
    }
    return "?";
}

}  // namespace ferrox::model
