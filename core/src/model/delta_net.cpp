// Qwen3.5's two layer parts the common ops do not cover, run on the host
// between a download and an upload (the MoE router's round trip): gated
// attention's gate, and a Gated DeltaNet layer's causal convolution and
// delta-rule recurrence over each sequence's state. The math is
// llama.cpp's (src/models/qwen35.cpp, delta-net-base.cpp, ggml's
// gated_delta_net and ssm_conv), written here per token.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "decoder.h"
#include "ferrox/model/architecture.h"

namespace ferrox::model {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
// As ggml: the identity past 20, where log(1 + e^x) rounds to x.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Partial sums a dot product over a state row keeps apart: a fixed order
// (the same for every batch, so batch invariance holds), and one the
// compiler keeps in vector registers, where a single running sum would make
// every product wait for the one before.
constexpr uint32_t kLanes = 8;

// The two row loops below are most of a Gated DeltaNet step, and the core is
// built for the baseline ISA: on x86-64 GCC also compiles them for AVX2
// (8 lanes = one 256-bit register) and picks the clone at load time. AVX2
// without FMA: each lane's multiplies and adds stay separate roundings, so
// every clone gives the baseline's bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FERROX_ROW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FERROX_ROW_CLONES
#endif

float sum_lanes(const float (&part)[kLanes]) {
    float s = 0;
    for (float p : part) s += p;
    return s;
}

// One row of a head's state, row[i] for i < n: decays it in place and returns
// its dot product with k, in one pass over the row. (Indices are size_t and
// the lanes a fixed block: with 32-bit indices that may wrap, GCC does not
// vectorise the loop.)
FERROX_ROW_CLONES float decay_then_dot(float* __restrict row, float decay,
                                       const float* __restrict k, uint32_t n) {
    float part[kLanes] = {};
    const size_t whole = n - n % kLanes;
    for (size_t i = 0; i < whole; i += kLanes) {
        float* r = row + i;
        const float* kb = k + i;
        for (size_t l = 0; l < kLanes; ++l) {
            r[l] *= decay;
            part[l] += r[l] * kb[l];
        }
    }
    for (size_t i = whole; i < n; ++i) {
        row[i] *= decay;
        part[i - whole] += row[i] * k[i];
    }
    return sum_lanes(part);
}

// Adds delta x k to the row and returns its dot product with q, in one pass.
FERROX_ROW_CLONES float update_then_dot(float* __restrict row, float delta,
                                        const float* __restrict k, const float* __restrict q,
                                        uint32_t n) {
    float part[kLanes] = {};
    const size_t whole = n - n % kLanes;
    for (size_t i = 0; i < whole; i += kLanes) {
        float* r = row + i;
        const float* kb = k + i;
        const float* qb = q + i;
        for (size_t l = 0; l < kLanes; ++l) {
            r[l] += delta * kb[l];
            part[l] += r[l] * qb[l];
        }
    }
    for (size_t i = whole; i < n; ++i) {
        row[i] += delta * k[i];
        part[i - whole] += row[i] * q[i];
    }
    return sum_lanes(part);
}

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

// One value head's rows of a sequence, `rows` tokens in position order: per
// token the decayed delta rule on the head's state [value j][key i] and its
// output q . S. Head by head rather than token by token, so that the head's
// state (S x S floats) stays in cache across the tokens of a prompt chunk.
struct HeadRows {
    const float* qkv;           // rows x conv_dim: each token's q, k, v after conv_token
    const float *beta, *alpha;  // rows x v_heads
    float* out;                 // rows x inner: this head's S outputs at h x S in each row
    uint32_t rows;
};

void delta_head(const Hparams& hp, const LayerWeights& L, uint32_t h, float* M, HeadRows in) {
    const uint32_t S = hp.ssm_state, kh = hp.ssm_k_heads, vh = hp.ssm_v_heads;
    const uint64_t C = hp.ssm_conv_dim(), inner = hp.ssm_inner;
    // Value head h reads key head h mod kh (qwen35's files tile the key heads),
    // or h / (vh / kh) where consecutive value heads share one (qwen3next).
    const uint32_t key_head = hp.arch->delta_net_grouped ? h / (vh / kh) : h % kh;
    const float scale = 1.0f / std::sqrt(static_cast<float>(S));
    for (uint32_t r = 0; r < in.rows; ++r) {
        const float* qkv = in.qkv + r * C;
        const float* qh = qkv + uint64_t{key_head} * S;
        const float* kk = qkv + (uint64_t{kh} + key_head) * S;
        const float* vv = qkv + 2 * uint64_t{kh} * S + uint64_t{h} * S;
        const float decay = std::exp(softplus(in.alpha[r * vh + h] + L.ssm_dt_bias[h]) *
                                     L.ssm_a[h]);  // ssm_a = -exp(A)
        const float beta = sigmoid(in.beta[r * vh + h]);
        float* o = in.out + r * inner + uint64_t{h} * S;
        for (uint32_t j = 0; j < S; ++j) {
            float* row = M + uint64_t{j} * S;
            const float delta = (vv[j] - decay_then_dot(row, decay, kk, S)) * beta;
            o[j] = update_then_dot(row, delta, kk, qh, S) * scale;
        }
    }
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
            const uint64_t SS = uint64_t{hp_.ssm_state} * hp_.ssm_state;
            float* qkv = a.dn_rows.data();
            for (uint32_t c0 = r0; c0 < r1; c0 += kDeltaRows) {
                const uint32_t rows = std::min(r1 - c0, kDeltaRows);
                for (uint32_t r = 0; r < rows; ++r)
                    conv_token(hp_, L, rs.conv_out, x + (c0 + r) * C, qkv + r * C);
                for (uint32_t h = 0; h < vh; ++h)
                    delta_head(hp_, L, h, rs.state_out.data() + h * SS,
                               {qkv, beta + c0 * vh, alpha + c0 * vh, out + c0 * inner, rows});
                for (uint32_t r = c0; r < c0 + rows; ++r)
                    gated_norm(hp_, L, z + r * inner, out + r * inner);
            }
        });
    if (!ran) return;
    st.upload({out, n * inner}, s.dn_out);
    st.project(*L.ssm_out, "ssm_out", s.dn_out, n, s.o);
}

}  // namespace ferrox::model
