// Qwen3.5's two layer parts the common ops do not cover, run on host memory
// between a download and an upload (the MoE router's round trip): gated
// attention's gate, and a Gated DeltaNet layer's causal convolution and
// delta-rule recurrence over each sequence's state. The math is
// llama.cpp's (src/models/qwen35.cpp, delta-net-base.cpp, ggml's
// gated_delta_net and ssm_conv), written here per token. The recurrence
// itself is the backend ABI's delta_net entry (1.9): the CPU plugin runs its
// heads over its threads, the core's fallback runs them here, and both run
// the one loop in core/src/delta_rule.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "decoder.h"
#include "delta_rule.h"
#include "ferrox/model/architecture.h"
#include "residency.h"

namespace ferrox::model {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
// x / sqrt(sum x^2 + eps): llama.cpp's L2 norm of q and k (an RMS norm with
// eps / n, scaled by 1 / sqrt(n)).
void l2_norm(float* x, uint32_t n, float eps) {
    double sum = 0;
    for (uint32_t i = 0; i < n; ++i) sum += double{x[i]} * double{x[i]};
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum) + eps);
    for (uint32_t i = 0; i < n; ++i) x[i] *= scale;
}

// One token of one sequence through the convolution: the window and x
// (conv_dim values) into `qkv`, SiLU, then q and k L2-normed per key head.
// `conv` is the sequence's window (moved on by x).
void conv_token(const Hparams& hp, const LayerWeights& L, std::span<float> conv, const float* x,
                float* qkv) {
    const uint32_t K = hp.ssm_conv_kernel, S = hp.ssm_state;
    const uint64_t C = hp.ssm_conv_dim();
    const float* w = L.ssm_conv.data();  // [channel][tap], the oldest tap first
    for (uint64_t c = 0; c < C; ++c) {
        float sum = 0;
        for (uint32_t k = 0; k + 1 < K; ++k) sum += conv[k * C + c] * w[c * K + k];
        sum += x[c] * w[c * K + K - 1];
        qkv[c] = silu(sum);
    }
    if (K > 1) {  // the window moves on by one input
        std::memmove(conv.data(), conv.data() + C, (K - 2) * C * sizeof(float));
        std::memcpy(conv.data() + (K - 2) * C, x, C * sizeof(float));
    }
    for (uint32_t h = 0; h < 2 * hp.ssm_k_heads; ++h) l2_norm(qkv + uint64_t{h} * S, S, hp.rms_eps);
}

// The gated RMS norm of one token's outputs: per value head norm(o) x
// weight x silu(z), in place.
void gated_norm(const Hparams& hp, const LayerWeights& L, const float* z, float* out) {
    const uint32_t S = hp.ssm_state;
    for (uint32_t h = 0; h < hp.ssm_v_heads; ++h) {
        float* o = out + uint64_t{h} * S;
        const float* zh = z + uint64_t{h} * S;
        double ms = 0;
        for (uint32_t j = 0; j < S; ++j) ms += double{o[j]} * double{o[j]};
        const float inv = 1.0f / std::sqrt(static_cast<float>(ms / S) + hp.rms_eps);
        for (uint32_t j = 0; j < S; ++j) o[j] = o[j] * inv * L.ssm_norm[j] * silu(zh[j]);
    }
}

// qwen3next's ssm_ba rows, bound as two halves: row r's halves
// together are, per key head g, its r_k value heads' betas then their alphas.
// Rewritten in place into betas and alphas by value head; `tmp` holds 2 vh floats.
void ungroup_beta_alpha(const Hparams& hp, float* beta, float* alpha, uint32_t n, float* tmp) {
    const uint32_t vh = hp.ssm_v_heads, per_key = vh / hp.ssm_k_heads;
    for (uint64_t r = 0; r < n; ++r) {
        std::copy_n(beta + r * vh, vh, tmp);
        std::copy_n(alpha + r * vh, vh, tmp + vh);
        for (uint32_t h = 0; h < vh; ++h) {
            const uint32_t g = h / per_key, j = h % per_key;
            beta[r * vh + h] = tmp[2 * g * per_key + j];
            alpha[r * vh + h] = tmp[2 * g * per_key + per_key + j];
        }
    }
}

}  // namespace

Expected<void> dispatch_delta_net(Dispatcher& dispatcher, const ferrox_delta_net_desc& desc) {
    if (const char* why = delta_rule::invalid(desc)) return make_error("{}", why);
    return dispatcher.delta_net(desc, roles::kDeltaNet, [&] {
        for (uint32_t h = 0; h < desc.n_v_heads; ++h) delta_rule::run_head(desc, h);
    });
}

// attn_q's rows per head are [q | gate]: q into s.q, the gates kept on the host.
void Decoder::split_gate(StickySteps& st, Activations& a, uint32_t n) const {
    const uint32_t hd = hp_.head_dim_k, nh = hp_.n_head;
    const uint64_t qd = q_dim(hp_);
    float* both = a.dn_host.data();  // 2 x q_dim per row fits: see size_host
    std::vector<float>& gates = a.gate_host;
    st.download(a.s.qg, {both, n * 2 * qd});
    if (st.failed()) return;
    for (uint64_t r = 0; r < n; ++r)
        for (uint32_t h = 0; h < nh; ++h) {
            const float* src = both + (r * nh + h) * 2 * hd;
            std::copy_n(src + hd, hd, gates.data() + (r * nh + h) * hd);
            // q moves down within the same buffer: its place is never past its source.
            std::memmove(both + (r * nh + h) * hd, src, hd * sizeof(float));
        }
    st.upload({both, n * qd}, a.s.q);
}

// The attention output times sigmoid(gate), before attn_output.
void Decoder::apply_gate(StickySteps& st, Activations& a, uint32_t n) const {
    const uint64_t count = uint64_t{n} * o_dim(hp_);
    float* att = a.dn_host.data();
    st.download(a.s.att, {att, count});
    if (st.failed()) return;
    for (uint64_t i = 0; i < count; ++i) att[i] *= sigmoid(a.gate_host[i]);
    st.upload({att, count}, a.s.att);
}

// A Gated DeltaNet layer (qwen35): the in-projections of all rows as
// products, each sequence's rows in position order through the
// convolution and the delta rule from its state, the out-projection into s.o.
void Decoder::recurrent_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                              uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    Scratch& s = a.s;
    const uint64_t C = hp_.ssm_conv_dim(), inner = hp_.ssm_inner, vh = hp_.ssm_v_heads;
    st.project(*L.ssm_in, "attn_qkv", s.xn, n, s.dn_qkv);
    st.project(*L.ssm_gate, "attn_gate", s.xn, n, s.dn_z);
    st.project(*L.ssm_beta, "ssm_beta", s.xn, n, s.dn_beta);
    st.project(*L.ssm_alpha, "ssm_alpha", s.xn, n, s.dn_alpha);
    float* x = a.dn_host.data();
    float* z = x + n * C;
    float* beta = z + n * inner;
    float* alpha = beta + n * vh;
    float* out = alpha + n * vh;
    st.download(s.dn_qkv, {x, n * C});
    st.download(s.dn_z, {z, n * inner});
    st.download(s.dn_beta, {beta, n * vh});
    st.download(s.dn_alpha, {alpha, n * vh});
    if (st.failed()) return;
    if (hp_.arch->delta_net_grouped) ungroup_beta_alpha(hp_, beta, alpha, n, out);
    const bool ran =
        each_sequence_state(st, kv, il, n, [&](const RecurrentState& rs, uint32_t r0, uint32_t r1) {
            float* qkv = a.dn_rows.data();
            for (uint32_t c0 = r0; c0 < r1; c0 += kDeltaRows) {
                const uint32_t rows = std::min(r1 - c0, kDeltaRows);
                for (uint32_t r = 0; r < rows; ++r)
                    conv_token(hp_, L, rs.conv_out, x + (c0 + r) * C, qkv + r * C);
                ferrox_delta_net_desc d{};
                d.struct_size = sizeof d;
                d.abi_version = FERROX_ABI_VERSION;
                d.n_rows = rows;
                d.n_k_heads = hp_.ssm_k_heads;
                d.n_v_heads = hp_.ssm_v_heads;
                d.head_dim = hp_.ssm_state;
                d.grouped = hp_.arch->delta_net_grouped ? 1 : 0;
                d.qkv_stride = C;
                d.out_stride = inner;
                d.qkv = qkv;
                d.beta = beta + c0 * vh;
                d.alpha = alpha + c0 * vh;
                d.dt_bias = L.ssm_dt_bias.data();
                d.a = L.ssm_a.data();
                d.state = rs.state_out.data();
                d.out = out + c0 * inner;
                st.delta_net(d);
                if (st.failed()) return;
                for (uint32_t r = c0; r < c0 + rows; ++r)
                    gated_norm(hp_, L, z + r * inner, out + r * inner);
            }
        });
    if (!ran) return;
    st.upload({out, n * inner}, s.dn_out);
    st.project(*L.ssm_out, "ssm_out", s.dn_out, n, s.o);
}

}  // namespace ferrox::model
