#include "decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ferrox/model/architecture.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "residency.h"

namespace ferrox::model {

namespace {

// The widest FFN gate/up row a layer computes for all positions at once: the
// dense FFN's, or the shared experts' (glm4moe).
uint64_t ffn_width(const Hparams& hp) {
    // n_ff: the widest layer's, where layers differ (gemma4).
    return std::max<uint64_t>({hp.n_ff, hp.n_ff_shared, 1});
}

// Per position: gated attention's q with gates, and a Gated DeltaNet
// layer's projections and output (0 for other rows).
uint64_t delta_net_floats(const Hparams& hp) {
    const uint64_t gated = hp.arch && hp.arch->gated_attention ? 2 * q_dim(hp) : 0;
    return gated + hp.ssm_conv_dim() + 2 * uint64_t{hp.ssm_inner} + 2 * uint64_t{hp.ssm_v_heads};
}

// Per position: the larger of the attention block's and the FFN's buffers.
uint64_t block_floats(const Hparams& hp) {
    const uint64_t latent = hp.arch && hp.arch->mla
                                ? mla_q_a_dim(hp) + mla_q_dim(hp) + mla_kv_dim(hp) + mla_o_dim(hp) +
                                      mla_c_dim(hp) + mla_kvb_dim(hp)
                                : 0;
    const uint64_t attention =
        q_dim(hp) + k_dim(hp) + v_dim(hp) + o_dim(hp) + hp.n_embd + latent + delta_net_floats(hp);
    const uint64_t ffn = 2 * ffn_width(hp) + hp.n_embd;
    return std::max(attention, ffn);
}

// Table t's cos and sin for n rows: written in place in the region on the
// host, in host vectors that upload_rope() then copies when resident.
std::pair<std::span<float>, std::span<float>> rope_rows(const Hparams& hp, Activations& a, int t,
                                                        uint32_t n) {
    const size_t used = size_t{n} * rope_half(hp, t);
    if (a.s.rope_cos[t].host) return {{a.s.rope_cos[t].f32(), used}, {a.s.rope_sin[t].f32(), used}};
    return {{a.rope_cos[t].data(), used}, {a.rope_sin[t].data(), used}};
}

}  // namespace

uint64_t activation_layout(const Hparams& hp, bool resident, uint32_t n_batch, Scratch* sp,
                           const Act* base) {
    Scratch unused;
    Scratch& s = sp ? *sp : unused;
    uint64_t used = 0;
    const auto carve = [&](Act& a, uint64_t floats) {
        if (base) a = base->at(used);
        used += floats;
    };
    const uint64_t b = n_batch, ff = ffn_width(hp);
    const uint64_t half = rope_half_max(hp);
    carve(s.x, b * hp.n_embd);
    carve(s.xn, b * hp.n_embd);
    const uint64_t blocks = used;
    carve(s.q, b * q_dim(hp));
    carve(s.k, b * k_dim(hp));
    carve(s.v, b * v_dim(hp));
    carve(s.att, b * o_dim(hp));
    carve(s.o, b * hp.n_embd);
    if (hp.arch && hp.arch->mla) {
        carve(s.mla_q_a, b * mla_q_a_dim(hp));
        carve(s.mla_q, b * mla_q_dim(hp));
        carve(s.mla_kv, b * mla_kv_dim(hp));
        carve(s.mla_o, b * mla_o_dim(hp));
        carve(s.mla_c, b * mla_c_dim(hp));
        carve(s.mla_kvb, b * mla_kvb_dim(hp));
    }
    carve(s.qg, hp.arch && hp.arch->gated_attention ? b * 2 * q_dim(hp) : 0);
    carve(s.dn_qkv, b * hp.ssm_conv_dim());
    carve(s.dn_z, b * hp.ssm_inner);
    carve(s.dn_beta, b * hp.ssm_v_heads);
    carve(s.dn_alpha, b * hp.ssm_v_heads);
    carve(s.dn_out, b * hp.ssm_inner);
    used = blocks;  // the FFN block starts over
    carve(s.gate, b * ff);
    carve(s.up, b * ff);
    carve(s.ffn, b * hp.n_embd);
    used = blocks + b * block_floats(hp);
    carve(s.router, b * hp.n_expert);
    // An expert's products take up to kExpertRows rows at once, and the
    // lone choices of a pass n_expert_used at once (experts_alone); their
    // outputs stay until the rows of a pass (up to kMoeRows) are combined.
    const uint64_t group = std::min<uint64_t>(b, kExpertRows);
    const uint64_t hidden = std::max<uint64_t>(group, hp.n_expert_used);
    carve(s.expert_gate, hidden * hp.n_ff_expert);
    carve(s.expert_up, hidden * hp.n_ff_expert);
    carve(s.expert_in, hp.n_expert ? group * hp.n_embd : 0);
    carve(s.expert_out, std::min<uint64_t>(b, kMoeRows) * hp.n_expert_used * hp.n_embd);
    carve(s.shared, hp.n_ff_shared > 0 ? b * hp.n_embd : 0);
    carve(s.shared_gate, hp.arch && hp.arch->shared_expert_gate ? b : 0);
    const bool beside = hp.arch && hp.arch->dense_beside_experts && hp.n_expert > 0;
    carve(s.dense, beside ? b * hp.n_embd : 0);
    carve(s.router_in, beside ? b * hp.n_embd : 0);
    const uint64_t ple = uint64_t{hp.n_embd_per_layer} * hp.n_layer;
    carve(s.ple, b * ple);
    carve(s.ple_tok, b * ple);
    carve(s.ple_gate, b * hp.n_embd_per_layer);
    for (int t = 0; t < 3; ++t) {
        const uint64_t rows = t < 2 || hp.attn_temp_scale != 0 ? b : 0;
        carve(s.rope_cos[t], rows * half);
        carve(s.rope_sin[t], rows * half);
    }
    if (resident) carve(s.logits, uint64_t{std::min(kLogitRows, n_batch)} * hp.vocab);
    return used;
}

void Activations::size_host(const Hparams& hp, uint32_t max_batch, bool resident) {
    const uint64_t half = rope_half_max(hp);
    for (int t = 0; t < 3 && resident; ++t) {
        const size_t rows = t < 2 || hp.attn_temp_scale != 0 ? max_batch : 0;
        rope_cos[t].assign(rows * half, 0);
        rope_sin[t].assign(rows * half, 0);
    }
    router_scores.assign((size_t{max_batch} + 1) * hp.n_expert, 0);  // + one row of weights
    expert_order.assign(hp.n_expert, 0);
    chosen.assign(size_t{kMoeRows} * hp.n_expert_used, 0);
    chosen_weight.assign(chosen.size(), 0);
    selection.assign(hp.n_expert, 0);
    shared_gate.assign(hp.arch && hp.arch->shared_expert_gate ? max_batch : 0, 0);
    group_scores.assign(hp.n_expert_groups, 0);
    group_order.assign(hp.n_expert_groups, 0);
    if (hp.n_expert) zeros.assign(size_t{max_batch} * hp.n_embd, 0);
    if (hp.arch && hp.arch->gated_attention) gate_host.assign(size_t{max_batch} * q_dim(hp), 0);
    // The squared ReLU's host round trip: a dense FFN layer's rows, or an
    // expert's (up to kExpertRows) and the shared expert's (nemotron_h_moe).
    if (hp.arch && hp.arch->one_block_layers)
        ffn_host.assign(std::max({size_t{max_batch} * hp.n_ff,
                                  size_t{std::min(max_batch, kExpertRows)} * hp.n_ff_expert,
                                  size_t{max_batch} * hp.n_ff_shared}),
                        0);
    // Per row the larger of gated q and a DeltaNet layer's values, and one
    // convolution work row (delta_net.cpp).
    const uint64_t gated = hp.arch && hp.arch->gated_attention ? 2 * q_dim(hp) : 0;
    const uint64_t dn =
        hp.ssm_conv_dim() + 2 * uint64_t{hp.ssm_inner} + 2 * uint64_t{hp.ssm_v_heads};
    if (gated + dn > 0) dn_host.assign(max_batch * std::max(gated, dn) + hp.ssm_conv_dim(), 0);
    if (hp.arch && hp.arch->delta_net_layers)
        dn_rows.assign(uint64_t{std::min(max_batch, kDeltaRows)} * hp.ssm_conv_dim(), 0);
    ple_row.assign(size_t{hp.n_embd_per_layer} * hp.n_layer, 0);
    if (hp.arch && hp.arch->bert_encoder) {
        encoder_host.assign(size_t{max_batch} * std::max<uint64_t>(hp.n_embd, hp.n_ff), 0);
        encoder_rows.assign(2 * size_t{hp.n_embd}, 0);
    }
    ple_tok.assign(size_t{max_batch} * ple_row.size(), 0);
}

void Decoder::forward(StickySteps& st, Activations& a, KvAttention& kv,
                      std::span<const int32_t> tokens, std::span<const int32_t> positions,
                      std::span<const uint32_t> out_rows, std::span<float> out, bool hidden) const {
    if (hp_.arch->bert_encoder) return encode(st, a, kv, tokens, positions, out_rows, out, hidden);
    const auto n = static_cast<uint32_t>(tokens.size());
    embed(st, a, tokens);
    if (hp_.n_embd_per_layer) per_layer_inputs(st, a, tokens);
    rope_tables(st, a, positions);
    for (uint32_t il = 0; il < hp_.n_layer; ++il) {
        attention_block(st, a, kv, il, n);
        // mamba2's and nemotron_h's layers are one block each, the FFN among them.
        if (!hp_.arch->one_block_layers) ffn_block(st, a, il, n);
    }
    output(st, a, out_rows, out, hidden);
}

void Decoder::embed(StickySteps& st, Activations& a, std::span<const int32_t> tokens) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
        const int32_t id = tokens[i];
        if (id < 0 || static_cast<uint64_t>(id) >= hp_.vocab)
            return st.fail(
                make_error("token id {} at batch index {} is outside the vocabulary (0..{})", id, i,
                           hp_.vocab - 1));
    }
    st.embed(tokens, hp_.embedding_scale, a.s.x);
}

// gemma4's per-layer inputs, as llama.cpp's project_per_layer_inputs: each
// layer's rows of per_layer_model_proj over the scaled embedding, x
// 1/sqrt(n_embd), RMS-normed with per_layer_proj_norm, plus the token's row
// of per_layer_token_embd x sqrt(width), the sum x 1/sqrt(2). Laid out
// [layer][row][width], so that a layer's inputs are one contiguous block.
void Decoder::per_layer_inputs(StickySteps& st, Activations& a,
                               std::span<const int32_t> tokens) const {
    const uint32_t p = hp_.n_embd_per_layer, layers = hp_.n_layer;
    const auto n = static_cast<uint32_t>(tokens.size());
    const uint64_t rows = uint64_t{layers} * n;
    Scratch& s = a.s;
    if (st.failed()) return;  // an id embed() refused would index past the table
    // The token rows, read on the host (embed() checked the ids).
    const gguf::Tensor& table = *w_.per_layer_token_embd;
    const uint64_t row = *row_bytes(table.kind(), a.ple_row.size());
    const float scale = std::sqrt(static_cast<float>(p));
    for (uint32_t r = 0; r < n; ++r) {
        const std::byte* src = table.data().data() + static_cast<uint64_t>(tokens[r]) * row;
        if (!quant::dequantize_row(table.kind(), src, a.ple_row.data(), a.ple_row.size()))
            return st.fail(make_error("per_layer_token_embd.weight: {} rows cannot be read",
                                      kind_name(table.kind())));
        for (uint32_t l = 0; l < layers; ++l)
            for (uint32_t i = 0; i < p; ++i)
                a.ple_tok[(uint64_t{l} * n + r) * p + i] = a.ple_row[uint64_t{l} * p + i] * scale;
    }
    st.upload(std::span<const float>(a.ple_tok).first(rows * p), s.ple_tok);
    for (uint32_t l = 0; l < layers; ++l)
        st.project(*w_.layers[l].ple_model_proj, "per_layer_model_proj", s.x, n,
                   s.ple.at(uint64_t{l} * n * p));
    // x c as x + (c - 1) x: the steps scale only through add.
    const float proj_scale = 1.0f / std::sqrt(static_cast<float>(hp_.n_embd));
    st.add(roles::kPerLayerInput, s.ple, s.ple, rows, p, p, proj_scale - 1.0f);
    st.rms_norm(roles::kPerLayerProjNorm, s.ple, consts_[0].ple_proj_norm, rows, p, hp_.rms_eps,
                s.ple);
    st.add(roles::kPerLayerInput, s.ple, s.ple_tok, rows, p, p, 1.0f);
    st.add(roles::kPerLayerInput, s.ple, s.ple, rows, p, p, 1.0f / std::sqrt(2.0f) - 1.0f);
}

// After layer il's FFN joined the residual stream (gemma4 E2B/E4B):
// x += norm(proj(gelu(inp_gate x) * the layer's per-layer input)).
void Decoder::per_layer_embedding(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    const uint32_t p = hp_.n_embd_per_layer, d = hp_.n_embd;
    Scratch& s = a.s;
    st.project(*L.ple_gate, "inp_gate", s.x, n, s.ple_gate);
    st.glu(FfnActivation::GeluTanh, s.ple_gate, s.ple.at(uint64_t{il} * n * p), uint64_t{n} * p);
    st.project(*L.ple_proj, "proj", s.ple_gate, n, s.ffn);
    st.rms_norm(roles::kPerLayerPostNorm, s.ffn, consts_[il].ple_post_norm, n, d, hp_.rms_eps,
                s.ffn);
    st.add(roles::kResidual, s.x, s.ffn, n, d, d, 1.0f);
}

void Decoder::upload_rope(StickySteps& st, Activations& a, int t, uint32_t n) const {
    if (a.s.rope_cos[t].host) return;
    const auto [cos, sin] = rope_rows(hp_, a, t, n);
    st.upload(cos, a.s.rope_cos[t]);
    st.upload(sin, a.s.rope_sin[t]);
}

// cos/sin per row of this batch, once for global and once for local
// (sliding-window) layers: every head and layer of a kind shares them.
void Decoder::rope_tables(StickySteps& st, Activations& a,
                          std::span<const int32_t> positions) const {
    const auto n = static_cast<uint32_t>(positions.size());
    for (int local = 0; local < 2; ++local) {
        if (local && hp_.sliding_window == 0) break;
        const auto [cos, sin] = rope_rows(hp_, a, local, n);
        rope_table(rope_[local], positions, rope_half(hp_, local), cos, sin);
        upload_rope(st, a, local, n);
    }
    if (hp_.attn_temp_scale == 0) return;
    // q's angles scaled by its position's temperature: rotating by (f cos,
    // f sin) is rotating and then multiplying by f, in one op. The factor
    // is computed as llama.cpp computes it (float position, double log).
    const auto [cos0, sin0] = rope_rows(hp_, a, 0, n);
    const auto [cos2, sin2] = rope_rows(hp_, a, 2, n);
    const uint32_t half = rope_half(hp_, 0);
    // On the layers without RoPE (llama4) the table is (f, 0): q unrotated, times f.
    for (uint32_t r = 0; r < n; ++r) {
        const float pos = static_cast<float>(positions[r]) + hp_.attn_temp_offset;
        const double steps_past =
            static_cast<double>(std::floor(pos / static_cast<float>(hp_.attn_temp_length)));
        const auto f = static_cast<float>(
            std::log(steps_past + 1.0) * static_cast<double>(hp_.attn_temp_scale) + 1.0);
        for (uint32_t i = 0; i < half; ++i) {
            cos2[size_t{r} * half + i] = hp_.attn_temp_nope ? f : cos0[size_t{r} * half + i] * f;
            sin2[size_t{r} * half + i] = hp_.attn_temp_nope ? 0.0f : sin0[size_t{r} * half + i] * f;
        }
    }
    upload_rope(st, a, 2, n);
}

void Decoder::attention_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                              uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    const LayerConstants& C = consts_[il];
    const uint32_t d = hp_.n_embd;
    Scratch& s = a.s;
    // Later layers get xn from the previous FFN's residual add fused with
    // this norm; without pre-norms (olmo2) the block reads x itself.
    if (il == 0 && hp_.arch->pre_norms)
        st.rms_norm(roles::kAttnNorm, s.x, C.attn_norm, n, d, hp_.rms_eps, s.xn);
    if (hp_.is_ffn_only(il)) {     // nemotron_h: the FFN is the layer's one block
        if (hp_.expert_layer(il))  // nemotron_h_moe
            moe_ffn(st, a, L, C, n);
        else
            relu_squared_ffn(st, a, il, n);
        return residual_to_next(st, a, s.ffn, il, n);
    }
    if (!hp_.is_recurrent(il))
        attention_core(st, a, kv, il, n);
    else if (hp_.arch->shortconv_layers)  // lfm2, into s.o
        short_conv_block(st, a, kv, il, n);
    else if (hp_.arch->mamba2_layers)  // mamba2, granitehybrid, nemotron_h, into s.o
        mamba2_block(st, a, kv, il, n);
    else  // a Gated DeltaNet layer (qwen35), into s.o
        recurrent_block(st, a, kv, il, n);
    if (!L.o_bias.empty())  // gpt-oss's every layer, a llama file's some
        st.add(roles::kOutputBias, s.o, C.o_bias, n, d, 0, 1.0f);
    // mamba2, nemotron_h: the block, then straight into the next layer's norm.
    if (hp_.arch->one_block_layers) return residual_to_next(st, a, s.o, il, n);
    if (hp_.arch->post_norms)
        st.rms_norm(roles::kPostAttnNorm, s.o, C.post_attn_norm, n, d, hp_.rms_eps, s.o);
    // The residual add and the FFN's norm: xn = ffn_norm(x += o).
    if (!hp_.arch->pre_norms)
        return st.add(roles::kResidual, s.x, s.o, n, d, d, hp_.residual_scale);
    st.add_rms_norm(roles::kFfnNorm, s.x, s.o, d, hp_.residual_scale, C.ffn_norm, n, d, hp_.rms_eps,
                    s.xn);
}

// q, k and v, RoPE, attention over the cache and the output projection, into s.o.
void Decoder::attention_core(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                             uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    const LayerConstants& C = consts_[il];
    const uint32_t hd = hp_.layer_head_dim_k(il);
    Scratch& s = a.s;
    // A shared-KV layer (gemma4) attends over an earlier layer's K and V: only q.
    const bool own_kv = hp_.owns_kv(il);
    if (hp_.arch->mla)
        latent_qkv(st, a, L, C, n);
    else
        project_qkv(st, a, il, n, own_kv);
    const bool local = hp_.is_local_layer(il);
    const uint32_t n_rot = rope_[local].n_rot;
    if (hp_.has_rope(il)) {
        const bool temperature = hp_.attn_temp_scale != 0 && !local && !hp_.attn_temp_nope;
        // The temperature scales all of q (llama.cpp multiplies the whole
        // head): past the rotated pairs its table holds (f, 0) (rope_table's
        // identity times f), so with adjacent pairs the whole head goes
        // through it, as the resident rope entry always does.
        const uint32_t q_rot = temperature && hp_.arch->rope == RopeStyle::Normal ? hd : n_rot;
        st.rope(s.q, s.rope_cos[temperature ? 2 : local], s.rope_sin[temperature ? 2 : local], n,
                hp_.n_head, hd, q_rot, hp_.arch->rope);
        if (own_kv)
            st.rope(s.k, s.rope_cos[local], s.rope_sin[local], n, hp_.layer_n_head_kv(il), hd,
                    n_rot, hp_.arch->rope);
        // llama4's L2 norm: per head, without a weight, after RoPE (as llama.cpp orders it).
        if (!L.qk_unit_norm.empty()) {
            st.rms_norm(roles::kQNorm, s.q, C.qk_unit_norm, uint64_t{n} * hp_.n_head, hd,
                        hp_.rms_eps, s.q);
            if (own_kv)
                st.rms_norm(roles::kKNorm, s.k, C.qk_unit_norm,
                            uint64_t{n} * hp_.layer_n_head_kv(il), hd, hp_.rms_eps, s.k);
        }
    } else if (hp_.attn_temp_nope) {
        // llama4's layers without RoPE: q times its position's temperature,
        // the whole head through the (f, 0) table.
        st.rope(s.q, s.rope_cos[2], s.rope_sin[2], n, hp_.n_head, hd, hd, RopeStyle::Normal);
    }
    kv.store_and_attend(st, il, local, n);
    if (hp_.arch->gated_attention) apply_gate(st, a, n);
    Act att = s.att;
    if (hp_.arch->mla && !hp_.mla_kv_b) {
        latent_values(st, a, L, n);
        att = s.mla_o;
    }
    st.project(*L.o, "attn_output", att, n, s.o);
}

// q, k and v of every head from their projections, with biases and q/k norms
// (k and v only where the layer has a cache of its own: own_kv).
void Decoder::project_qkv(StickySteps& st, Activations& a, uint32_t il, uint32_t n,
                          bool own_kv) const {
    const LayerWeights& L = w_.layers[il];
    const LayerConstants& C = consts_[il];
    Scratch& s = a.s;
    const uint32_t hd = hp_.layer_head_dim_k(il), n_kv = hp_.layer_n_head_kv(il);
    const Act in = hp_.arch->pre_norms ? s.xn : s.x;
    if (hp_.arch->gated_attention) {  // q with a gate per head, split into s.q and the gates
        st.project(*L.q, "attn_q", in, n, s.qg);
        split_gate(st, a, n);
    } else {
        st.project(*L.q, "attn_q", in, n, s.q);
    }
    if (own_kv) {
        st.project(*L.k, "attn_k", in, n, s.k);
        // Without attn_v (gemma4's value_from_key) K's projection is V too.
        st.project(L.v ? *L.v : *L.k, "attn_v", in, n, s.v);
    }
    if (hp_.qkv_bias) {
        st.add(roles::kQkvBias, s.q, C.q_bias, n, static_cast<uint32_t>(q_dim(hp_, il)), 0, 1.0f);
        if (own_kv) {
            st.add(roles::kQkvBias, s.k, C.k_bias, n, static_cast<uint32_t>(k_dim(hp_, il)), 0,
                   1.0f);
            st.add(roles::kQkvBias, s.v, C.v_bias, n, static_cast<uint32_t>(v_dim(hp_, il)), 0,
                   1.0f);
        }
    }
    if (hp_.arch->qk_norm != QkNorm::None) {
        // Per head: one row per head of head_dim values; whole: one row per position.
        const bool whole = hp_.arch->qk_norm == QkNorm::Whole;
        const uint64_t q_rows = whole ? n : uint64_t{n} * hp_.n_head;
        const uint64_t k_rows = whole ? n : uint64_t{n} * n_kv;
        const auto q_len = static_cast<uint32_t>(whole ? q_dim(hp_, il) : hd);
        const auto k_len = static_cast<uint32_t>(whole ? k_dim(hp_, il) : hd);
        // A row whose q/k norms are optional normalises where the layer has them.
        if (!L.q_norm.empty())
            st.rms_norm(roles::kQNorm, s.q, C.q_norm, q_rows, q_len, hp_.rms_eps, s.q);
        if (!L.k_norm.empty() && own_kv)
            st.rms_norm(roles::kKNorm, s.k, C.k_norm, k_rows, k_len, hp_.rms_eps, s.k);
    }
    if (hp_.arch->value_norm && own_kv)  // gemma4: per head, unit weights
        st.rms_norm(roles::kVNorm, s.v, C.v_norm, uint64_t{n} * n_kv, hp_.layer_head_dim_v(il),
                    hp_.rms_eps, s.v);
}

// Latent attention's q, k and v in the cache's terms (llama.cpp's absorbed
// path): one KV head per token, k = [rotated part | normed latent] and v =
// the normed latent; each query head q = [its rotated part | its unrotated
// part absorbed through k_b into latent space]. The rotated part leads so
// that the common RoPE step rotates it as a prefix of the head; the dot
// products are those of llama.cpp's [latent | rotated] order.
void Decoder::latent_qkv(StickySteps& st, Activations& a, const LayerWeights& L,
                         const LayerConstants& C, uint32_t n) const {
    Scratch& s = a.s;
    const uint32_t nh = hp_.n_head, hd = hp_.head_dim_k, rot = hp_.n_rot;
    const uint32_t lora = hp_.mla_kv_lora, hk = hp_.mla_head_k, nope = hk - rot;
    if (L.q_a) {
        st.project(*L.q_a, "attn_q_a", s.xn, n, s.mla_q_a);
        st.rms_norm(roles::kQANorm, s.mla_q_a, C.q_a_norm, n, hp_.mla_q_lora, hp_.rms_eps,
                    s.mla_q_a);
        st.project(*L.q_b, "attn_q_b", s.mla_q_a, n, s.mla_q);
    } else {
        st.project(*L.q, "attn_q", s.xn, n, s.mla_q);
    }
    st.project(*L.kv_a, "attn_kv_a_mqa", s.xn, n, s.mla_kv);
    if (hp_.mla_kv_b) return expanded_kv(st, a, L, C, n);
    for (uint32_t i = 0; i < n; ++i) {
        const Act kv = s.mla_kv.at(uint64_t{i} * hd);  // [latent | rotated]
        const Act v = s.v.at(uint64_t{i} * lora), k = s.k.at(uint64_t{i} * hd);
        st.rms_norm(roles::kKvANorm, kv, C.kv_a_norm, 1, lora, hp_.rms_eps, v);
        st.store_kv(v, k.at(rot), FERROX_KIND_F32, lora);
        st.store_kv(kv.at(lora), k, FERROX_KIND_F32, rot);
        for (uint32_t h = 0; h < nh; ++h) {
            const Act qh = s.mla_q.at((uint64_t{i} * nh + h) * hk);  // [unrotated | rotated]
            const Act dst = s.q.at((uint64_t{i} * nh + h) * hd);
            st.store_kv(qh.at(nope), dst, FERROX_KIND_F32, rot);
            st.project(L.k_b[h], "attn_k_b", qh, 1, dst.at(rot));
        }
    }
}

// Latent attention un-absorbed (files with attn_kv_b, as llama.cpp runs
// them): kv_b expands each token's normed latent into every head's unrotated
// key and its value; each head caches k = [rotated part | unrotated key] (the
// rotated part shared by the heads) and its value, and q = [rotated |
// unrotated] likewise, so that the common RoPE step rotates a prefix: the dot
// products are llama.cpp's [unrotated | rotated] ones in another order.
void Decoder::expanded_kv(StickySteps& st, Activations& a, const LayerWeights& L,
                          const LayerConstants& C, uint32_t n) const {
    Scratch& s = a.s;
    const uint32_t nh = hp_.n_head, rot = hp_.n_rot, lora = hp_.mla_kv_lora;
    const uint32_t hk = hp_.mla_head_k, vh = hp_.mla_head_v, nope = hk - rot;
    const uint64_t kv_w = mla_kv_dim(hp_), kvb_w = nope + vh;
    for (uint32_t i = 0; i < n; ++i)
        st.rms_norm(roles::kKvANorm, s.mla_kv.at(i * kv_w), C.kv_a_norm, 1, lora, hp_.rms_eps,
                    s.mla_c.at(uint64_t{i} * lora));
    st.project(*L.kv_b, "attn_kv_b", s.mla_c, n, s.mla_kvb);
    for (uint32_t i = 0; i < n; ++i) {
        const Act k_rot = s.mla_kv.at(i * kv_w + lora);
        for (uint32_t h = 0; h < nh; ++h) {
            const uint64_t row = uint64_t{i} * nh + h;
            const Act qh = s.mla_q.at(row * hk), kvh = s.mla_kvb.at(row * kvb_w);
            const Act q = s.q.at(row * hk), k = s.k.at(row * hk);
            st.store_kv(qh.at(nope), q, FERROX_KIND_F32, rot);
            st.store_kv(qh, q.at(rot), FERROX_KIND_F32, nope);
            st.store_kv(k_rot, k, FERROX_KIND_F32, rot);
            st.store_kv(kvh, k.at(rot), FERROX_KIND_F32, nope);
            st.store_kv(kvh.at(nope), s.v.at(row * vh), FERROX_KIND_F32, vh);
        }
    }
}

// Each head's attention output (a latent-space row) mapped back through v_b.
void Decoder::latent_values(StickySteps& st, Activations& a, const LayerWeights& L,
                            uint32_t n) const {
    Scratch& s = a.s;
    const uint32_t nh = hp_.n_head, lora = hp_.mla_kv_lora, vh = hp_.mla_head_v;
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t h = 0; h < nh; ++h) {
            const uint64_t row = uint64_t{i} * nh + h;
            st.project(L.v_b[h], "attn_v_b", s.att.at(row * lora), 1, s.mla_o.at(row * vh));
        }
}

// nemotron_h's FFN layer, into s.ffn: ffn_down(relu(ffn_up(xn))^2), no gate.
// No backend op squares a ReLU, so the square runs on the host between a
// download and an upload, as a recurrent block's scan does; relu(u) x u is
// relu(u)^2 bit for bit (ggml's relu then sqr).
void Decoder::relu_squared_ffn(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    Scratch& s = a.s;
    st.project(*L.up, "ffn_up", s.xn, n, s.up);
    relu_squared(st, a, s.up, uint64_t{n} * hp_.layer_n_ff(il));
    st.project(*L.down, "ffn_down", s.up, n, s.ffn);
}

// relu(u)^2 over `count` values of `u` in place, on the host (see above).
void Decoder::relu_squared(StickySteps& st, Activations& a, Act u, uint64_t count) const {
    const std::span<float> host{a.ffn_host.data(), count};
    st.download(u, host);
    if (st.failed()) return;  // nothing downloaded to square
    for (float& v : host) v = v > 0.0f ? v * v : 0.0f;
    st.upload(host, u);
}

void Decoder::dense_ffn(StickySteps& st, Activations& a, uint32_t il, uint32_t n, Act out) const {
    const LayerWeights& L = w_.layers[il];
    Scratch& s = a.s;
    const Act in = hp_.arch->pre_norms ? s.xn : s.x;  // x itself without pre-norms (olmo2)
    st.project(*L.gate, "ffn_gate", in, n, s.gate);
    st.project(*L.up, "ffn_up", in, n, s.up);
    st.glu(hp_.arch->activation, s.gate, s.up, uint64_t{n} * hp_.layer_n_ff(il));
    st.project(*L.down, "ffn_down", s.gate, n, out);
}

// gemma4's expert layer, into s.ffn: the dense FFN over xn = ffn_norm(x),
// post_ffw_norm_1'd, plus the experts over pre_ffw_norm_2(x) routed by
// rms_norm(x) x ffn_gate_inp.scale / sqrt(n_embd), post_ffw_norm_2'd.
void Decoder::dense_and_experts(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    const LayerConstants& C = consts_[il];
    const uint32_t d = hp_.n_embd;
    const float eps = hp_.rms_eps;
    Scratch& s = a.s;
    dense_ffn(st, a, il, n, s.dense);
    st.rms_norm(roles::kPostFfwNorm1, s.dense, C.post_ffw_norm_1, n, d, eps, s.dense);
    st.rms_norm(roles::kRouterInput, s.x, C.router_in_scale, n, d, eps, s.router_in);
    st.rms_norm(roles::kPreFfwNorm2, s.x, C.pre_ffw_norm_2, n, d, eps, s.xn);
    moe_ffn(st, a, L, C, n);
    st.rms_norm(roles::kPostFfwNorm2, s.ffn, C.post_ffw_norm_2, n, d, eps, s.ffn);
    st.add(roles::kMoeCombine, s.ffn, s.dense, n, d, d, 1.0f);
}

// One row's experts and their weights from its router logits, into
// expert_order's first n_expert_used entries and `weights`: qwen3moe softmaxes all logits and
// takes the top k, optionally renormalised; gpt-oss takes the top k logits and softmaxes those
// alone; glm4moe and deepseek2 take the sigmoid of each (or the softmax), choose by that + the
// selection bias among the best groups' experts and weigh by the score alone, optionally
// renormalised, then scaled.
void Decoder::route(Activations& a, std::span<float> logits, std::span<float> weights,
                    std::span<const float> selection_bias) const {
    const uint32_t k = hp_.n_expert_used;
    const MoeGating gating = hp_.moe_gating;
    std::vector<uint32_t>& order = a.expert_order;
    std::iota(order.begin(), order.end(), 0u);
    // llama4 chooses by the raw logits (the sigmoid can round two apart to one value).
    const bool by_logits = hp_.arch->expert_weight_on_input;
    if (by_logits) std::copy(logits.begin(), logits.end(), a.selection.begin());
    if (gating == MoeGating::Softmax) ops::softmax(logits);  // monotonic: the same top k
    if (gating == MoeGating::Sigmoid)
        for (float& v : logits) v = 1.0f / (1.0f + std::exp(-v));  // as ggml_sigmoid
    // What the top k is chosen by: the scores, plus the bias where there is
    // one, with the experts outside the best groups masked out.
    std::span<const float> by = by_logits ? std::span<const float>(a.selection) : logits;
    const bool groups = hp_.n_expert_groups > 1;
    if (!by_logits && (!selection_bias.empty() || groups)) {
        for (size_t e = 0; e < logits.size(); ++e)
            a.selection[e] = logits[e] + (selection_bias.empty() ? 0.0f : selection_bias[e]);
        if (groups)
            ops::keep_top_groups(a.selection, hp_.n_expert_groups, hp_.n_expert_groups_used,
                                 a.group_scores, a.group_order);
        by = a.selection;
    }
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](uint32_t x, uint32_t y) { return by[x] > by[y]; });
    for (uint32_t j = 0; j < k; ++j) weights[j] = logits[order[j]];
    if (gating == MoeGating::SoftmaxWeight) {
        ops::softmax(weights.first(k));
        return;
    }
    if (hp_.expert_weights_norm) {
        float total = 0;
        for (uint32_t j = 0; j < k; ++j) total += weights[j];
        // llama.cpp clamps the sum to the smallest normal f16 (sigmoids can all be ~0).
        if (gating == MoeGating::Sigmoid) total = std::max(total, 6.103515625e-5f);
        for (uint32_t j = 0; j < k; ++j) weights[j] /= total;
    }
    if (hp_.expert_weights_scale != 1.0f)
        for (uint32_t j = 0; j < k; ++j) weights[j] *= hp_.expert_weights_scale;
}

// The shared experts (glm4moe, qwen35moe): one SwiGLU FFN over every row,
// into s.shared, then added to the routed experts' sum in s.ffn, as llama.cpp
// adds them -- weighed per row by sigmoid(ffn_gate_inp_shexp . x) where the
// row has that gate (its logits downloaded with the layer's router scores'
// round trip, the weights applied as the routed experts' are).
void Decoder::shared_experts(StickySteps& st, Activations& a, const LayerWeights& L,
                             uint32_t n) const {
    Scratch& s = a.s;
    const uint32_t d = hp_.n_embd;
    if (hp_.arch->relu_squared_experts) {  // nemotron_h_moe: no gate
        st.project(*L.up_shexp, "ffn_up_shexp", s.xn, n, s.up);
        relu_squared(st, a, s.up, uint64_t{n} * hp_.n_ff_shared);
        st.project(*L.down_shexp, "ffn_down_shexp", s.up, n, s.shared);
        return st.add(roles::kMoeCombine, s.ffn, s.shared, n, d, d, 1.0f);
    }
    st.project(*L.gate_shexp, "ffn_gate_shexp", s.xn, n, s.gate);
    st.project(*L.up_shexp, "ffn_up_shexp", s.xn, n, s.up);
    st.glu(hp_.arch->activation, s.gate, s.up, uint64_t{n} * hp_.n_ff_shared);
    st.project(*L.down_shexp, "ffn_down_shexp", s.gate, n, s.shared);
    if (!L.gate_inp_shexp) return st.add(roles::kMoeCombine, s.ffn, s.shared, n, d, d, 1.0f);
    st.project(*L.gate_inp_shexp, "ffn_gate_inp_shexp", s.xn, n, s.shared_gate);
    st.download(s.shared_gate, {a.shared_gate.data(), n});
    if (st.failed()) return;  // no gate logits to weigh by
    for (uint32_t i = 0; i < n; ++i) {
        const float gate = 1.0f / (1.0f + std::exp(-a.shared_gate[i]));  // as ggml_sigmoid
        st.add(roles::kMoeCombine, s.ffn.at(uint64_t{i} * d), s.shared.at(uint64_t{i} * d), 1, d, 0,
               gate);
    }
}

// The router logits of all n positions in one product and one download
// (the layer's one host round trip); the router bias, gating and top-k on
// the host; each chosen expert's FFN output (with its biases, gpt-oss)
// added into the result with its router weight.
void Decoder::moe_ffn(StickySteps& st, Activations& a, const LayerWeights& L,
                      const LayerConstants& C, uint32_t n) const {
    const uint32_t d = hp_.n_embd;
    Scratch& s = a.s;
    st.upload({a.zeros.data(), size_t{n} * d}, s.ffn);
    // The router reads the experts' input, or its own (gemma4: dense_and_experts).
    st.project(*L.router, "moe_router", hp_.arch->scaled_router_input ? s.router_in : s.xn, n,
               s.router);
    st.download(s.router, {a.router_scores.data(), size_t{n} * hp_.n_expert});
    if (st.failed()) return;  // the scores were not downloaded: nothing to route by
    std::span<float> weights{a.router_scores.data() + size_t{n} * hp_.n_expert, hp_.n_expert};
    const bool on_input = hp_.arch->expert_weight_on_input;
    const uint32_t k = hp_.n_expert_used;
    // Rows kMoeRows at a time: each row's experts chosen, then each expert's
    // rows through its products together (up to kExpertRows a call, where
    // the CPU plugin gives every row MATVEC's result to the bit, so no row's
    // numbers depend on which rows share its expert), the experts that only
    // one choice took n_expert_used at a time (experts_alone: a decode
    // step's every expert), then each row's outputs added in the order it
    // chose them, as llama.cpp adds them.
    for (uint32_t r0 = 0; r0 < n; r0 += kMoeRows) {
        const uint32_t rows = std::min(n - r0, kMoeRows);
        for (uint32_t i = 0; i < rows; ++i) {
            std::span<float> logits{a.router_scores.data() + size_t{r0 + i} * hp_.n_expert,
                                    hp_.n_expert};
            for (size_t e = 0; e < L.router_bias.size(); ++e) logits[e] += L.router_bias[e];
            route(a, logits, weights, L.selection_bias);
            for (uint32_t j = 0; j < k; ++j) {
                const uint32_t e = a.expert_order[j];
                a.chosen[i * k + j] = e;
                // An expert's output scale (gemma4) joins its router weight.
                a.chosen_weight[i * k + j] =
                    weights[j] *
                    (L.down_exps_scale.empty() || on_input ? 1.0f : L.down_exps_scale[e]);
            }
        }
        // Each (row, choice) in expert order, rows in order within an expert.
        std::vector<uint32_t>& order = a.choice_order;
        order.resize(size_t{rows} * k);
        for (uint32_t c = 0; c < rows * k; ++c) order[c] = c;
        std::stable_sort(order.begin(), order.end(),
                         [&](uint32_t x, uint32_t y) { return a.chosen[x] < a.chosen[y]; });
        a.alone.clear();
        for (size_t g0 = 0; g0 < order.size();) {
            const uint32_t e = a.chosen[order[g0]];
            size_t g1 = g0 + 1;
            while (g1 < order.size() && g1 - g0 < kExpertRows && a.chosen[order[g1]] == e) ++g1;
            // A weighted input (llama4) is gathered first: expert_rows does it.
            if (g1 - g0 == 1 && !on_input)
                a.alone.push_back(static_cast<uint32_t>(g0));
            else
                expert_rows(st, a, L, C, e, {order.data() + g0, g1 - g0}, r0,
                            s.expert_out.at(uint64_t(g0) * d));
            g0 = g1;
        }
        for (size_t c0 = 0; c0 < a.alone.size(); c0 += k)
            experts_alone(st, a, L, C,
                          {a.alone.data() + c0, std::min<size_t>(k, a.alone.size() - c0)}, r0);
        // Where each choice's output is: its place in `order`.
        std::vector<uint32_t>& at = a.choice_place;
        at.resize(order.size());
        for (uint32_t c = 0; c < order.size(); ++c) at[order[c]] = c;
        for (uint32_t i = 0; i < rows; ++i)
            for (uint32_t j = 0; j < k; ++j)
                st.add(roles::kMoeCombine, s.ffn.at(uint64_t{r0 + i} * d),
                       s.expert_out.at(uint64_t{at[i * k + j]} * d), 1, d, 0,
                       on_input ? 1.0f : a.chosen_weight[i * k + j]);
    }
    if (L.up_shexp) shared_experts(st, a, L, n);
}

// One expert over some of a pass's choices (`choices`: row x n_expert_used +
// choice, rows from `r0`): their inputs gathered (times their weights where
// the expert reads its weighted input: llama4), the expert's FFN over all of
// them (with its biases, gpt-oss), each output into its choice's row of
// `out` (m rows). A lone choice reads its row in place, as a 1-row product.
void Decoder::expert_rows(StickySteps& st, Activations& a, const LayerWeights& L,
                          const LayerConstants& C, uint32_t e, std::span<const uint32_t> choices,
                          uint32_t r0, Act out) const {
    const uint32_t d = hp_.n_embd, f = hp_.n_ff_expert, k = hp_.n_expert_used;
    const auto m = static_cast<uint32_t>(choices.size());
    Scratch& s = a.s;
    const bool on_input = hp_.arch->expert_weight_on_input;
    const auto row_of = [&](uint32_t c) { return r0 + c / k; };
    Act in = s.xn.at(uint64_t{row_of(choices[0])} * d);
    if (m > 1 || on_input) {
        // 0 + w x: the product llama.cpp's multiply rounds (llama4), or the row itself.
        st.upload({a.zeros.data(), size_t{m} * d}, s.expert_in);
        for (uint32_t g = 0; g < m; ++g)
            st.add(roles::kMoeCombine, s.expert_in.at(uint64_t{g} * d),
                   s.xn.at(uint64_t{row_of(choices[g])} * d), 1, d, 0,
                   on_input ? a.chosen_weight[choices[g]] : 1.0f);
        in = s.expert_in;
    }
    // An expert's bias row, when the architecture has them, on each of the m rows.
    const auto bias = [&](const Act& rows, Act dst, uint32_t len) {
        if (hp_.arch->expert_biases)
            st.add(roles::kExpertBias, dst, rows.at(uint64_t{e} * len), m, len, 0, 1.0f);
    };
    if (hp_.arch->relu_squared_experts) {  // nemotron_h_moe: no gate, no biases
        st.project(L.up_exps[e], "ffn_up_exps", in, m, s.expert_up);
        relu_squared(st, a, s.expert_up, uint64_t{m} * f);
        return st.project(L.down_exps[e], "ffn_down_exps", s.expert_up, m, out);
    }
    st.project(L.gate_exps[e], "ffn_gate_exps", in, m, s.expert_gate);
    bias(C.gate_exps_bias, s.expert_gate, f);
    st.project(L.up_exps[e], "ffn_up_exps", in, m, s.expert_up);
    bias(C.up_exps_bias, s.expert_up, f);
    st.glu(hp_.arch->activation, s.expert_gate, s.expert_up, uint64_t{m} * f);
    st.project(L.down_exps[e], "ffn_down_exps", s.expert_gate, m, out);
    bias(C.down_exps_bias, out, d);
}

// Up to n_expert_used choices, each the only row of its expert in the pass
// (`places`: their places in a.choice_order, where their outputs go in
// s.expert_out): every gate and up product in one project_many, each
// choice's biases and GLU as expert_rows runs them, then every down
// product in one more. Each output equals expert_rows' for a one-row group
// to the bit (project_many's guarantee); what changes is that a CPU
// backend wakes its threads twice for them, not three times per expert.
void Decoder::experts_alone(StickySteps& st, Activations& a, const LayerWeights& L,
                            const LayerConstants& C, std::span<const uint32_t> places,
                            uint32_t r0) const {
    const uint32_t d = hp_.n_embd, f = hp_.n_ff_expert, k = hp_.n_expert_used;
    Scratch& s = a.s;
    std::vector<Projection>& p = a.projections;
    const auto choice = [&](size_t i) { return a.choice_order[places[i]]; };
    const auto expert = [&](size_t i) { return a.chosen[choice(i)]; };
    const auto gate = [&](size_t i) { return s.expert_gate.at(uint64_t{i} * f); };
    const auto up = [&](size_t i) { return s.expert_up.at(uint64_t{i} * f); };
    const auto out = [&](size_t i) { return s.expert_out.at(uint64_t{places[i]} * d); };
    // An expert's bias row, when the architecture has them (gpt-oss).
    const auto bias = [&](const Act& rows, uint32_t e, Act dst, uint32_t len) {
        if (hp_.arch->expert_biases)
            st.add(roles::kExpertBias, dst, rows.at(uint64_t{e} * len), 1, len, 0, 1.0f);
    };
    p.clear();
    if (hp_.arch->relu_squared_experts) {  // nemotron_h_moe: up, relu^2, down; no gate, no biases
        for (size_t i = 0; i < places.size(); ++i)
            p.push_back({&L.up_exps[expert(i)], "ffn_up_exps",
                         s.xn.at(uint64_t{r0 + choice(i) / k} * d), up(i)});
        st.project_many(p, roles::kExpertsBatch);
        for (size_t i = 0; i < places.size(); ++i) relu_squared(st, a, up(i), f);
        p.clear();
        for (size_t i = 0; i < places.size(); ++i)
            p.push_back({&L.down_exps[expert(i)], "ffn_down_exps", up(i), out(i)});
        return st.project_many(p, roles::kExpertsBatch);
    }
    for (size_t i = 0; i < places.size(); ++i) {
        const Act in = s.xn.at(uint64_t{r0 + choice(i) / k} * d);
        p.push_back({&L.gate_exps[expert(i)], "ffn_gate_exps", in, gate(i)});
        p.push_back({&L.up_exps[expert(i)], "ffn_up_exps", in, up(i)});
    }
    st.project_many(p, roles::kExpertsBatch);
    for (size_t i = 0; i < places.size(); ++i) {
        bias(C.gate_exps_bias, expert(i), gate(i), f);
        bias(C.up_exps_bias, expert(i), up(i), f);
        st.glu(hp_.arch->activation, gate(i), up(i), f);
    }
    p.clear();
    for (size_t i = 0; i < places.size(); ++i)
        p.push_back({&L.down_exps[expert(i)], "ffn_down_exps", gate(i), out(i)});
    st.project_many(p, roles::kExpertsBatch);
    for (size_t i = 0; i < places.size(); ++i) bias(C.down_exps_bias, expert(i), out(i), d);
}

void Decoder::ffn_block(StickySteps& st, Activations& a, uint32_t il, uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    const LayerConstants& C = consts_[il];
    const uint32_t d = hp_.n_embd;
    Scratch& s = a.s;
    // xn = ffn_norm(x) already: the attention block's last step.
    if (!hp_.expert_layer(il))  // dense models, and glm4moe's leading dense layers
        dense_ffn(st, a, il, n, s.ffn);
    else if (hp_.arch->dense_beside_experts)
        dense_and_experts(st, a, il, n);
    else
        moe_ffn(st, a, L, C, n);
    if (hp_.arch->post_norms)
        st.rms_norm(roles::kPostFfwNorm, s.ffn, C.post_ffw_norm, n, d, hp_.rms_eps, s.ffn);
    if (!L.out_scale.empty() || L.ple_gate) {
        // gemma4: x = (x + ffn, then its per-layer embedding) x scale, then
        // the next layer's norm on its own.
        st.add(roles::kResidual, s.x, s.ffn, n, d, d, hp_.residual_scale);
        if (L.ple_gate) per_layer_embedding(st, a, il, n);
        if (!L.out_scale.empty())
            st.add(roles::kLayerOutputScale, s.x, s.x, n, d, d, L.out_scale[0] - 1.0f);
        if (il + 1 == hp_.n_layer) return;
        return st.rms_norm(roles::kAttnNorm, s.x, consts_[il + 1].attn_norm, n, d, hp_.rms_eps,
                           s.xn);
    }
    residual_to_next(st, a, s.ffn, il, n);
}

void Decoder::residual_to_next(StickySteps& st, Activations& a, Act out, uint32_t il,
                               uint32_t n) const {
    const uint32_t d = hp_.n_embd;
    if (il + 1 == hp_.n_layer || !hp_.arch->pre_norms)
        return st.add(roles::kResidual, a.s.x, out, n, d, d, hp_.residual_scale);
    // The residual add and the next layer's norm: xn = attn_norm(x += out).
    st.add_rms_norm(roles::kAttnNorm, a.s.x, out, d, hp_.residual_scale, consts_[il + 1].attn_norm,
                    n, d, hp_.rms_eps, a.s.xn);
}

// Logits of `n` normalised rows at `xn` into `out` (n * vocab floats): in
// place on the host, through a bounded device region when resident.
void Decoder::output_logits(StickySteps& st, Activations& a, Act xn, uint32_t n,
                            std::span<float> out) const {
    if (!st.resident())
        return st.project(*w_.output, "output", xn, n,
                          Act{reinterpret_cast<std::byte*>(out.data())});
    for (uint32_t start = 0; start < n; start += kLogitRows) {
        const uint32_t rows = std::min(kLogitRows, n - start);
        st.project(*w_.output, "output", xn.at(uint64_t{start} * hp_.n_embd), rows, a.s.logits);
        st.download(a.s.logits,
                    out.subspan(uint64_t{start} * hp_.vocab, uint64_t{rows} * hp_.vocab));
    }
}

// The wanted rows' logits: the output norm, the output product and the
// architecture's scaling of the logits; `hidden`: the normalised rows
// themselves (what llama.cpp pools for an embedding).
void Decoder::output(StickySteps& st, Activations& a, std::span<const uint32_t> out_rows,
                     std::span<float> out, bool hidden) const {
    const auto n_out = static_cast<uint32_t>(out_rows.size());
    const uint32_t d = hp_.n_embd;
    Scratch& s = a.s;
    if (n_out == 0) return;
    // Wanted rows normalised into xn, adjacent rows in one call (every row
    // of a prefill, or the last one alone, as a single sequence asks).
    for (uint32_t k0 = 0; k0 < n_out;) {
        uint32_t k1 = k0 + 1;
        while (k1 < n_out && out_rows[k1] == out_rows[k1 - 1] + 1) ++k1;
        st.rms_norm(roles::kOutputNorm, s.x.at(uint64_t{out_rows[k0]} * d), output_norm_, k1 - k0,
                    d, hp_.rms_eps, s.xn.at(uint64_t{k0} * d));
        k0 = k1;
    }
    if (st.failed()) return;  // the normalised rows were not written
    if (hidden) return st.download(s.xn, out.first(uint64_t{n_out} * d));
    Act normed = s.xn;
    if (!st.resident() && out.data() == a.region.f32()) {
        // The logits take the region over from its start, across x and
        // xn: the normalised rows move past them first (memmove: the two
        // places may overlap).
        normed = a.region.at(uint64_t{n_out} * hp_.vocab);
        std::memmove(normed.host, s.xn.host, uint64_t{n_out} * d * sizeof(float));
    }
    output_logits(st, a, normed, n_out, out);
    if (st.failed()) return;        // no logits to scale
    if (hp_.logit_scale != 1.0f) {  // granite: multiplied by the reciprocal, as llama.cpp
        const float inv = 1.0f / hp_.logit_scale;
        for (float& v : out.first(size_t{n_out} * hp_.vocab)) v *= inv;
    }
    if (hp_.final_softcap != 0.0f) {  // gemma2: x (1 / cap), tanh, x cap, as llama.cpp
        const float inv = 1.0f / hp_.final_softcap;
        for (float& v : out.first(size_t{n_out} * hp_.vocab))
            v = std::tanh(v * inv) * hp_.final_softcap;
    }
}

}  // namespace ferrox::model
