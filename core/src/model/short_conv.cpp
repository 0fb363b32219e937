// lfm2's short-convolution layer, run on the host between a download and
// an upload as a Gated DeltaNet layer is: in_proj's three parts b, c and x
// as products over all rows, then per sequence in position order a causal
// depthwise convolution of b * x over the last l_cache - 1 products and the
// token's, times c. The math is llama.cpp's (src/models/lfm2.cpp and ggml's
// ssm_conv: the taps summed oldest first, in float), written here per token.
#include <algorithm>
#include <cstring>

#include "decoder.h"
#include "ferrox/model/architecture.h"

namespace ferrox::model {

void Decoder::short_conv_block(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                               uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    Scratch& s = a.s;
    const uint64_t C = hp_.n_embd;
    const uint32_t K = hp_.ssm_conv_kernel;
    // The DeltaNet scratch is wide enough: dn_qkv and dn_z hold n_embd per
    // row here (ssm_conv_dim() = ssm_inner = n_embd), dn_out x and then the output.
    st.project(*L.shortconv_b, "shortconv.in_proj.b", s.xn, n, s.dn_qkv);
    st.project(*L.shortconv_c, "shortconv.in_proj.c", s.xn, n, s.dn_z);
    st.project(*L.shortconv_x, "shortconv.in_proj.x", s.xn, n, s.dn_out);
    // Host rows: b (overwritten by each row's output), c, x, one work row.
    float* b = a.dn_host.data();
    float* c = b + n * C;
    float* x = c + n * C;
    float* bx = x + n * C;
    st.download(s.dn_qkv, {b, n * C});
    st.download(s.dn_z, {c, n * C});
    st.download(s.dn_out, {x, n * C});
    if (st.failed()) return;
    const float* w = L.ssm_conv.data();  // [channel][tap], the oldest tap first
    const bool ran =
        each_sequence_state(st, kv, il, n, [&](const RecurrentState& rs, uint32_t r0, uint32_t r1) {
            float* window = rs.conv_out.data();  // [tap][channel], the oldest first
            for (uint32_t r = r0; r < r1; ++r) {
                const float* br = b + r * C;
                const float* cr = c + r * C;
                const float* xr = x + r * C;
                for (uint64_t ch = 0; ch < C; ++ch) bx[ch] = br[ch] * xr[ch];
                float* y = b + r * C;  // b's row is read: the output takes its place
                for (uint64_t ch = 0; ch < C; ++ch) {
                    float sum = 0;
                    for (uint32_t k = 0; k + 1 < K; ++k) sum += window[k * C + ch] * w[ch * K + k];
                    sum += bx[ch] * w[ch * K + K - 1];
                    y[ch] = cr[ch] * sum;
                }
                // The window moves on by one product.
                std::memmove(window, window + C, (K - 2) * C * sizeof(float));
                std::memcpy(window + (K - 2) * C, bx, C * sizeof(float));
            }
        });
    if (!ran) return;
    st.upload({b, n * C}, s.dn_out);
    st.project(*L.ssm_out, "shortconv.out_proj", s.dn_out, n, s.o);
}

}  // namespace ferrox::model
