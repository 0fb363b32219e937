// A Mamba-2 layer (mamba2), run on the host between a download and an
// upload as the other recurrent layers are: ssm_in's three parts (z, the
// convolution's input x|B|C, dt) as products over all rows, then per
// sequence in position order the causal convolution with its bias and
// SiLU, the selective scan over the per-head states, the D skip, y x
// silu(z) RMS-normed per group, and ssm_out. The math and the order of
// its float sums are llama.cpp's (src/models/mamba-base.cpp and ggml's
// ssm_conv / ssm_scan / rms_norm on the CPU), written here per token.
#include <cmath>
#include <cstring>

#include "decoder.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/ops.h"

namespace ferrox::model {
namespace {

// As ggml's scan: log(1 + e^x), the identity past 20 where it rounds to x
// (the DeltaNet's softplus is ggml's op, log1p: each as its reference).
float scan_softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// Names of their own: a unity build compiles this file beside delta_net.cpp.
struct Mamba2TokenIn {
    const float *xbc, *z, *dt;
};

// One token of one sequence: `conv` ([kernel - 1][channel], the oldest
// first) and `state` ([head][head dim][state size]) are the sequence's,
// updated in place; `out` takes inner_size values; `work` holds conv_dim.
void mamba2_token(const Hparams& hp, const LayerWeights& L, std::span<float> conv,
                  std::span<float> state, Mamba2TokenIn in, float* out, float* work) {
    const uint32_t K = hp.ssm_conv_kernel, N = hp.ssm_state;
    const uint64_t C = hp.ssm_conv_dim(), inner = hp.ssm_inner, P = hp.ssm_head_dim();
    const float* w = L.ssm_conv.data();  // [channel][tap], the oldest tap first
    for (uint64_t c = 0; c < C; ++c) {
        float sum = 0;
        for (uint32_t k = 0; k + 1 < K; ++k) sum += conv[k * C + c] * w[c * K + k];
        sum += in.xbc[c] * w[c * K + K - 1];
        work[c] = ops::silu(sum + L.ssm_conv_bias[c]);
    }
    // The window moves on by one input (read_mamba2 holds the kernel >= 2).
    std::memmove(conv.data(), conv.data() + C, (K - 2) * C * sizeof(float));
    std::memcpy(conv.data() + (K - 2) * C, in.xbc, C * sizeof(float));
    const float* x = work;  // [head][head dim], then B and C per group
    const float* B = work + inner;
    const float* Cm = B + uint64_t{hp.ssm_k_heads} * N;
    const uint32_t heads = hp.ssm_v_heads, per_group = heads / hp.ssm_k_heads;
    for (uint32_t h = 0; h < heads; ++h) {
        const float dt = scan_softplus(in.dt[h] + L.ssm_dt_bias[h]);
        const float decay = std::exp(dt * L.ssm_a[h]);  // ssm_a = -exp(A_log)
        const uint64_t g = h / per_group;
        const float* Bg = B + g * N;
        const float* Cg = Cm + g * N;
        for (uint64_t i = 0; i < P; ++i) {
            const uint64_t ch = h * P + i;
            const float x_dt = x[ch] * dt;
            float* s = state.data() + ch * N;
            float y = 0;
            for (uint32_t n = 0; n < N; ++n) {
                s[n] = s[n] * decay + Bg[n] * x_dt;
                y += s[n] * Cg[n];
            }
            out[ch] = y + x[ch] * L.ssm_d[h];
        }
    }
    for (uint64_t j = 0; j < inner; ++j) out[j] *= ops::silu(in.z[j]);
    // RMS norm per group of inner / groups channels, as ggml's rms_norm:
    // float squares summed in double.
    const uint64_t width = inner / hp.ssm_k_heads;
    for (uint64_t g0 = 0; g0 < inner; g0 += width) {
        double ms = 0;
        for (uint64_t j = g0; j < g0 + width; ++j) ms += static_cast<double>(out[j] * out[j]);
        const float inv =
            1.0f / std::sqrt(static_cast<float>(ms / static_cast<double>(width)) + hp.rms_eps);
        for (uint64_t j = g0; j < g0 + width; ++j) out[j] = out[j] * inv * L.ssm_norm[j];
    }
}

}  // namespace

void Decoder::mamba2_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                           uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    Scratch& s = a.s;
    const uint64_t C = hp_.ssm_conv_dim(), inner = hp_.ssm_inner, heads = hp_.ssm_v_heads;
    st.project(*L.ssm_in, "ssm_in.xbc", s.xn, n, s.dn_qkv);
    st.project(*L.ssm_gate, "ssm_in.z", s.xn, n, s.dn_z);
    st.project(*L.ssm_dt, "ssm_in.dt", s.xn, n, s.dn_alpha);
    // Host rows: x|B|C, z, dt, the output, one work row (size_host).
    float* xbc = a.dn_host.data();
    float* z = xbc + n * C;
    float* dt = z + n * inner;
    float* out = dt + n * heads;
    float* work = out + n * inner;
    st.download(s.dn_qkv, {xbc, n * C});
    st.download(s.dn_z, {z, n * inner});
    st.download(s.dn_alpha, {dt, n * heads});
    if (st.failed()) return;
    const bool ran =
        each_sequence_state(st, kv, il, n, [&](const RecurrentState& rs, uint32_t r0, uint32_t r1) {
            for (uint32_t r = r0; r < r1; ++r)
                mamba2_token(hp_, L, rs.conv_out, rs.state_out,
                             {xbc + r * C, z + r * inner, dt + r * heads}, out + r * inner, work);
        });
    if (!ran) return;
    st.upload({out, n * inner}, s.dn_out);
    st.project(*L.ssm_out, "ssm_out", s.dn_out, n, s.o);
}

}  // namespace ferrox::model
