// The decoder's blocks -- embedding, attention, FFN, mixture-of-experts
// routing, output -- written once over Steps and the hyper-parameters. It
// holds no batch and no KV state: the context (context.cpp) orders the batch,
// owns the cache and is called back, through KvAttention, where a layer's K/V
// rows are stored and attended over. Adding a layer kind is an edit here
// (docs/models.md, "Adding a layer kind").
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ferrox/model/hparams.h"
#include "ferrox/model/rope_tables.h"
#include "seq_states.h"
#include "steps.h"
#include "sticky_steps.h"
#include "weights.h"

namespace ferrox::model {

// Where each activation lives, carved once for a context's `n_batch` rows out
// of one allocation: no allocation per token, on the host or on a device.
struct Scratch {
    Act x, xn, router, expert_gate, expert_up, logits;
    Act expert_in;    // up to kExpertRows rows an expert reads (times their weights: llama4)
    Act expert_out;   // a pass's expert outputs, one row per (row, choice), grouped by expert
    Act shared;       // the shared experts' output, added to the routed experts' sum
    Act shared_gate;  // qwen35moe: the shared expert's gate logit per row
    // The attention block's q, k, v, att, o and the FFN's gate, up, ffn are never
    // live at the same time, so the two blocks share one region.
    Act q, k, v, att, o, gate, up, ffn;
    // Latent attention (deepseek2) before absorption: q's low rank, q per
    // head [qk_nope | rotated], each token's [latent | rotated], and the
    // heads' outputs mapped back through v_b. Empty for other rows. Files
    // with attn_kv_b (Hparams::mla_kv_b) instead: the normed latent and its
    // expansion, per head [qk_nope key | value], in place of mla_o.
    Act mla_q_a, mla_q, mla_kv, mla_o, mla_c, mla_kvb;
    // Gated attention's q with its gate per head; a Gated DeltaNet layer's
    // in-projections (conv input, z, beta, alpha) and its gated-norm output.
    Act qg, dn_qkv, dn_z, dn_beta, dn_alpha, dn_out;
    // [global, local, global for q under an attention temperature][position][head_dim / 2]
    Act rope_cos[3], rope_sin[3];
    // Per-layer embeddings (gemma4 E2B/E4B): every layer's input [layer][row]
    // [n_embd_per_layer], live through the pass; the token rows' part before
    // it joins them; a layer's gate.
    Act ple, ple_tok, ple_gate;
    // An expert layer beside a dense FFN (gemma4): the dense branch's output
    // and the router's input, live across the experts' run.
    Act dense, router_in;
};

// Norm weights, biases and sinks where the ops read them.
struct LayerConstants {
    Act attn_norm, ffn_norm, q_norm, k_norm, v_norm, post_attn_norm, post_ffw_norm;
    Act qk_unit_norm;  // llama4's L2 norm of q and k
    Act q_bias, k_bias, v_bias, o_bias, sinks;
    Act gate_exps_bias, up_exps_bias, down_exps_bias;  // [n_expert][rows]
    Act q_a_norm, kv_a_norm;                           // latent attention
    Act ple_post_norm, ple_proj_norm;                  // per-layer embeddings
    // gemma4's expert layers: the router input's weight and the branches' norms.
    Act router_in_scale, post_ffw_norm_1, pre_ffw_norm_2, post_ffw_norm_2;
    Act up_bias, down_bias;  // BERT's FFN
};

// Each layer's constants: the vector bound from the file and where the ops
// read it (empty vectors -- parts an architecture lacks -- are skipped).
inline constexpr std::pair<std::vector<float> LayerWeights::*, Act LayerConstants::*>
    kLayerConstants[] = {
        {&LayerWeights::attn_norm, &LayerConstants::attn_norm},
        {&LayerWeights::ffn_norm, &LayerConstants::ffn_norm},
        {&LayerWeights::q_norm, &LayerConstants::q_norm},
        {&LayerWeights::k_norm, &LayerConstants::k_norm},
        {&LayerWeights::v_norm, &LayerConstants::v_norm},
        {&LayerWeights::qk_unit_norm, &LayerConstants::qk_unit_norm},
        {&LayerWeights::post_attn_norm, &LayerConstants::post_attn_norm},
        {&LayerWeights::post_ffw_norm, &LayerConstants::post_ffw_norm},
        {&LayerWeights::q_bias, &LayerConstants::q_bias},
        {&LayerWeights::k_bias, &LayerConstants::k_bias},
        {&LayerWeights::v_bias, &LayerConstants::v_bias},
        {&LayerWeights::o_bias, &LayerConstants::o_bias},
        {&LayerWeights::sinks, &LayerConstants::sinks},
        {&LayerWeights::gate_exps_bias, &LayerConstants::gate_exps_bias},
        {&LayerWeights::up_exps_bias, &LayerConstants::up_exps_bias},
        {&LayerWeights::down_exps_bias, &LayerConstants::down_exps_bias},
        {&LayerWeights::q_a_norm, &LayerConstants::q_a_norm},
        {&LayerWeights::kv_a_norm, &LayerConstants::kv_a_norm},
        {&LayerWeights::ple_post_norm, &LayerConstants::ple_post_norm},
        {&LayerWeights::ple_proj_norm, &LayerConstants::ple_proj_norm},
        {&LayerWeights::router_in_scale, &LayerConstants::router_in_scale},
        {&LayerWeights::post_ffw_norm_1, &LayerConstants::post_ffw_norm_1},
        {&LayerWeights::pre_ffw_norm_2, &LayerConstants::pre_ffw_norm_2},
        {&LayerWeights::post_ffw_norm_2, &LayerConstants::post_ffw_norm_2},
        {&LayerWeights::up_bias, &LayerConstants::up_bias},
        {&LayerWeights::down_bias, &LayerConstants::down_bias},
};

// Rows of logits a resident model computes per download.
inline constexpr uint32_t kLogitRows = 16;

// The rows one expert's products take at once: up to 16, the CPU plugin
// gives every row MATVEC's result to the bit (docs/cpu.md), so a row's
// numbers do not depend on which rows share its expert.
inline constexpr uint32_t kExpertRows = 16;
// The rows a MoE layer routes and combines in one pass (s.expert_out holds
// their n_expert_used outputs each).
inline constexpr uint32_t kMoeRows = 64;

// The tokens of one sequence a Gated DeltaNet layer takes head by head, each
// head's state kept in cache across them (delta_net.cpp).
inline constexpr uint32_t kDeltaRows = 64;

// Per-position widths of layer il's projections (gemma4's sliding layers
// have head sizes and KV head counts of their own).
inline uint64_t q_dim(const Hparams& hp, uint32_t il) {
    return uint64_t{hp.n_head} * hp.layer_head_dim_k(il);
}
inline uint64_t k_dim(const Hparams& hp, uint32_t il) {
    return uint64_t{hp.layer_n_head_kv(il)} * hp.layer_head_dim_k(il);
}
inline uint64_t v_dim(const Hparams& hp, uint32_t il) {
    return uint64_t{hp.layer_n_head_kv(il)} * hp.layer_head_dim_v(il);
}
inline uint64_t o_dim(const Hparams& hp, uint32_t il) {
    return uint64_t{hp.n_head} * hp.layer_head_dim_v(il);
}
// The widest of them over the layers: what the scratch holds.
template <class Width>
uint64_t widest(const Hparams& hp, Width width) {
    uint64_t w = 0;
    for (uint32_t il = 0; il < std::max<uint32_t>(hp.n_layer, 1); ++il) w = std::max(w, width(il));
    return w;
}
inline uint64_t q_dim(const Hparams& hp) {
    return widest(hp, [&](uint32_t il) { return q_dim(hp, il); });
}
inline uint64_t k_dim(const Hparams& hp) {
    return widest(hp, [&](uint32_t il) { return k_dim(hp, il); });
}
inline uint64_t v_dim(const Hparams& hp) {
    return widest(hp, [&](uint32_t il) { return v_dim(hp, il); });
}
inline uint64_t o_dim(const Hparams& hp) {
    return widest(hp, [&](uint32_t il) { return o_dim(hp, il); });
}

// The angle tables' row width (pairs of a head) for the global (t 0, 2) or
// local (t 1) layers, and the widest of them.
inline uint32_t rope_half(const Hparams& hp, int t) {
    return (t == 1 && hp.head_dim_k_swa ? hp.head_dim_k_swa : hp.head_dim_k) / 2;
}
inline uint32_t rope_half_max(const Hparams& hp) {
    return std::max(rope_half(hp, 0), rope_half(hp, 1));
}

// Latent attention's per-position widths before absorption (0 elsewhere);
// v_b's outputs (mla_o) with the split tensors, kv_b's input and output
// (mla_c, mla_kvb) with the un-split one.
inline uint64_t mla_q_a_dim(const Hparams& hp) { return hp.mla_q_lora; }
inline uint64_t mla_q_dim(const Hparams& hp) { return uint64_t{hp.n_head} * hp.mla_head_k; }
inline uint64_t mla_kv_dim(const Hparams& hp) { return uint64_t{hp.mla_kv_lora} + hp.n_rot; }
inline uint64_t mla_o_dim(const Hparams& hp) {
    return hp.mla_kv_b ? 0 : uint64_t{hp.n_head} * hp.mla_head_v;
}
inline uint64_t mla_c_dim(const Hparams& hp) { return hp.mla_kv_b ? hp.mla_kv_lora : 0; }
inline uint64_t mla_kvb_dim(const Hparams& hp) {
    return hp.mla_kv_b ? uint64_t{hp.n_head} * (hp.mla_head_k - hp.n_rot + hp.mla_head_v) : 0;
}

// The one activation region of a context with `n_batch` rows, in floats;
// lays it out into `s` when `base` is given. `resident`: the region also
// holds a bounded logits window (logits are downloaded from it).
uint64_t activation_layout(const Hparams& hp, bool resident, uint32_t n_batch, Scratch* s,
                           const Act* base);

// A context's activations: the region activation_layout carved, and the
// host-side values of a pass (angles before upload, router scores after
// download).
struct Activations {
    Scratch s;
    Act region;
    uint64_t region_size = 0;  // floats
    std::vector<float> rope_cos[3], rope_sin[3], router_scores, zeros;
    // Per-layer embeddings' token rows as uploaded ([layer][row][width]), and
    // one token's row as read.
    std::vector<float> ple_tok, ple_row;
    std::vector<float> selection;    // one row's expert scores plus the selection bias
    std::vector<float> shared_gate;  // the shared expert's gate logits, downloaded
    std::vector<uint32_t> expert_order;
    // A MoE pass (moe_ffn): each row's chosen experts and weights (row x
    // n_expert_used + choice), the choices in expert order, and each
    // choice's place in that order.
    std::vector<uint32_t> chosen, choice_order, choice_place;
    // The places in choice_order of choices alone with their expert in a
    // pass, and the products experts_alone hands over together.
    std::vector<uint32_t> alone;
    std::vector<Projection> projections;
    std::vector<float> chosen_weight;
    std::vector<float> group_scores;  // group-limited routing: one score per group
    std::vector<uint32_t> group_order;
    // Host copies the gate and the delta rule run on (delta_net.cpp), the
    // convolution's outputs of up to kDeltaRows tokens of one sequence, and
    // the FFN rows an FFN-only layer squares (nemotron_h).
    std::vector<float> gate_host, dn_host, dn_rows, ffn_host;
    // BERT's encoder: rows brought to the host for its LayerNorms and GELU
    // (n_batch rows of the wider of n_embd and n_ff), and the token type
    // and position rows being added (2 x n_embd).
    std::vector<float> encoder_host, encoder_rows;

    // Sizes the host-side values for `max_batch` rows.
    void size_host(const Hparams& hp, uint32_t max_batch, bool resident);
};

// Where a layer's K and V rows (in s.k, s.v) go and how the batch's queries
// (s.q) attend over the cache into s.att: the context's part of attention.
class KvAttention {
  public:
    virtual void store_and_attend(StickySteps& st, uint32_t il, bool local, uint32_t n) = 0;
    // Recurrent layers: the sequence of each of the batch's rows (sorted,
    // so a sequence's rows are adjacent and in position order), and its
    // state for layer il.
    // A cache without recurrent states (a test's) gives none: such a layer fails.
    virtual std::span<const uint32_t> row_sequences() const { return {}; }
    virtual RecurrentState recurrent_state(uint32_t, uint32_t) { return {}; }

  protected:
    ~KvAttention() = default;
};

// The model's read-only half of a pass.
class Decoder {
  public:
    Decoder(const Hparams& hp, const ModelWeights& w, const std::vector<LayerConstants>& consts,
            const Act& output_norm, const RopeSpec (&rope)[2])
        : hp_(hp), w_(w), consts_(consts), output_norm_(output_norm), rope_(rope) {}

    // The batch's forward pass over its rows (sorted by sequence, then
    // position). `out_rows`: the rows whose logits are wanted, into `out`
    // (one vocab row each, in out_rows' order; `hidden`: one n_embd row
    // each, the final-norm hidden state, and no output product). A failure
    // is in `st`.
    void forward(StickySteps& st, Activations& a, KvAttention& kv, std::span<const int32_t> tokens,
                 std::span<const int32_t> positions, std::span<const uint32_t> out_rows,
                 std::span<float> out, bool hidden = false) const;

  private:
    void embed(StickySteps& st, Activations& a, std::span<const int32_t> tokens) const;
    // encoder.cpp: BERT's encoder in place of the decoder's blocks.
    void encode(StickySteps& st, Activations& a, KvAttention& kv, std::span<const int32_t> tokens,
                std::span<const int32_t> positions, std::span<const uint32_t> out_rows,
                std::span<float> out, bool hidden) const;
    void encoder_embeddings(StickySteps& st, Activations& a, std::span<const int32_t> positions,
                            std::span<const int32_t> tokens) const;
    void encoder_layer(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                       uint32_t n) const;
    void per_layer_inputs(StickySteps& st, Activations& a, std::span<const int32_t> tokens) const;
    void per_layer_embedding(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const;
    void rope_tables(StickySteps& st, Activations& a, std::span<const int32_t> positions) const;
    void upload_rope(StickySteps& st, Activations& a, int t, uint32_t n) const;
    void attention_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                         uint32_t n) const;
    void project_qkv(StickySteps& st, Activations& a, uint32_t il, uint32_t n, bool own_kv) const;
    void latent_qkv(StickySteps& st, Activations& a, const LayerWeights& L, const LayerConstants& C,
                    uint32_t n) const;
    void expanded_kv(StickySteps& st, Activations& a, const LayerWeights& L,
                     const LayerConstants& C, uint32_t n) const;
    void latent_values(StickySteps& st, Activations& a, const LayerWeights& L, uint32_t n) const;
    void ffn_block(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const;
    void relu_squared_ffn(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const;
    void relu_squared(StickySteps& st, Activations& a, Act u, uint64_t count) const;
    void attention_core(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                        uint32_t n) const;
    // delta_net.cpp: gated attention's split and gate, the Gated DeltaNet layer.
    void split_gate(StickySteps& st, Activations& a, uint32_t n) const;
    void apply_gate(StickySteps& st, Activations& a, uint32_t n) const;
    void recurrent_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                         uint32_t n) const;
    // mamba2.cpp: a Mamba-2 layer (mamba2, granitehybrid, nemotron_h).
    void mamba2_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                      uint32_t n) const;
    // The layer's last residual add, x += out, fused with the next layer's
    // attn_norm into xn (none after the last layer).
    void residual_to_next(StickySteps& st, Activations& a, Act out, uint32_t il, uint32_t n) const;
    // short_conv.cpp: lfm2's short-convolution layer.
    void short_conv_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                          uint32_t n) const;
    // A recurrent layer's rows, one run of consecutive rows per sequence:
    // each sequence's state (window and delta-rule state) copied from its
    // current copy into the one this decode writes, then run(state, r0, r1)
    // on rows [r0, r1) in position order. False (st failed) where a row has
    // no sequence or a sequence no state of this layer's size.
    template <class Run>
    bool each_sequence_state(StickySteps& st, KvAttention& kv, uint32_t il, uint32_t n,
                             Run&& run) const {
        const std::span<const uint32_t> seqs = kv.row_sequences();
        if (seqs.size() < n) {
            st.fail(make_error("a recurrent layer without sequence states"));
            return false;
        }
        const uint64_t conv = uint64_t{hp_.ssm_conv_kernel - 1} * hp_.ssm_conv_dim();
        const uint64_t state = hp_.ssm_state_floats();
        for (uint32_t r0 = 0; r0 < n;) {
            uint32_t r1 = r0 + 1;
            while (r1 < n && seqs[r1] == seqs[r0]) ++r1;
            const RecurrentState rs = kv.recurrent_state(il, seqs[r0]);
            if (rs.conv_out.size() != conv || rs.state_out.size() != state) {
                st.fail(make_error("sequence {}: no recurrent state for layer {}", seqs[r0], il));
                return false;
            }
            std::copy(rs.conv_in.begin(), rs.conv_in.end(), rs.conv_out.begin());
            std::copy(rs.state_in.begin(), rs.state_in.end(), rs.state_out.begin());
            run(rs, r0, r1);
            r0 = r1;
        }
        return true;
    }
    void dense_ffn(StickySteps& st, Activations& a, uint32_t il, uint32_t n, Act out) const;
    void dense_and_experts(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const;
    void expert_rows(StickySteps& st, Activations& a, const LayerWeights& L,
                     const LayerConstants& C, uint32_t e, std::span<const uint32_t> choices,
                     uint32_t r0, Act out) const;
    void experts_alone(StickySteps& st, Activations& a, const LayerWeights& L,
                       const LayerConstants& C, std::span<const uint32_t> places,
                       uint32_t r0) const;
    void moe_ffn(StickySteps& st, Activations& a, const LayerWeights& L, const LayerConstants& C,
                 uint32_t n) const;
    void route(Activations& a, std::span<float> logits, std::span<float> weights,
               std::span<const float> selection_bias) const;
    void shared_experts(StickySteps& st, Activations& a, const LayerWeights& L, uint32_t n) const;
    void output(StickySteps& st, Activations& a, std::span<const uint32_t> out_rows,
                std::span<float> out, bool hidden) const;
    void output_logits(StickySteps& st, Activations& a, Act xn, uint32_t n,
                       std::span<float> out) const;

    const Hparams& hp_;
    const ModelWeights& w_;
    const std::vector<LayerConstants>& consts_;
    const Act& output_norm_;
    const RopeSpec (&rope_)[2];  // [global, local]
};

}  // namespace ferrox::model
