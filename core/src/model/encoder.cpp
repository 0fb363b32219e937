// BERT's encoder pass (ArchSpec::bert_encoder), over the decoder's Steps:
// the embeddings with their token type and learned position rows, then per
// layer attention both ways and a GELU FFN, each followed by a residual add
// and a LayerNorm with a bias (post-norm), as llama.cpp's bert graph.
// LayerNorm and a plain GELU have no Steps entry (the plugin ABI has none),
// so they run on the host between a download and an upload, as the MoE
// router's scores do; on HostSteps those are copies.
#include <algorithm>

#include "decoder.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "residency.h"

namespace ferrox::model {
namespace {

// `n` rows of `width` values at `at` brought to the host, each changed by
// f(row, index), and put back.
template <class F>
void on_host(StickySteps& st, std::vector<float>& host, Act at, uint32_t n, uint64_t width, F&& f) {
    const std::span<float> rows(host.data(), uint64_t{n} * width);
    st.download(at, rows);
    if (st.failed()) return;  // nothing was read to change
    for (uint32_t r = 0; r < n; ++r) f(rows.subspan(uint64_t{r} * width, width), r);
    st.upload(rows, at);
}

// Row `r` of a table read by rows (token_types, position_embd) as f32.
bool read_row(const gguf::Tensor& table, uint64_t r, std::span<float> out) {
    const std::optional<uint64_t> bytes = row_bytes(table.kind(), out.size());
    return bytes && quant::dequantize_row(table.kind(), table.data().data() + r * *bytes,
                                          out.data(), out.size());
}

}  // namespace

void Decoder::encode(StickySteps& st, Activations& a, KvAttention& kv,
                     std::span<const int32_t> tokens, std::span<const int32_t> positions,
                     std::span<const uint32_t> out_rows, std::span<float> out, bool hidden) const {
    const auto n = static_cast<uint32_t>(tokens.size());
    if (!hidden)
        return st.fail(
            make_error("'{}' is an encoder: it gives hidden states, never logits", hp_.arch_name));
    for (uint32_t r = 0; r < n && hp_.arch->learned_positions; ++r)
        if (positions[r] < 0 || static_cast<uint32_t>(positions[r]) >= hp_.n_ctx_train)
            return st.fail(make_error(
                "position {} at batch index {} has no learned row: position_embd.weight holds "
                "{} ({}.context_length)",
                positions[r], r, hp_.n_ctx_train, hp_.arch_name));
    encoder_embeddings(st, a, positions, tokens);
    if (!hp_.arch->learned_positions) rope_tables(st, a, positions);  // nomic-bert
    for (uint32_t il = 0; il < hp_.n_layer; ++il) encoder_layer(st, a, kv, il, n);
    // The wanted rows of the last layer's output (no final norm), adjacent
    // rows in one download.
    const uint32_t d = hp_.n_embd;
    const auto n_out = static_cast<uint32_t>(out_rows.size());
    for (uint32_t k0 = 0; k0 < n_out;) {
        uint32_t k1 = k0 + 1;
        while (k1 < n_out && out_rows[k1] == out_rows[k1 - 1] + 1) ++k1;
        st.download(a.s.x.at(uint64_t{out_rows[k0]} * d),
                    out.subspan(uint64_t{k0} * d, uint64_t{k1 - k0} * d));
        k0 = k1;
    }
}

// x = LayerNorm(token row + token type 0's row + the position's row), as
// llama.cpp (every token is of type 0, "sentence A").
void Decoder::encoder_embeddings(StickySteps& st, Activations& a,
                                 std::span<const int32_t> positions,
                                 std::span<const int32_t> tokens) const {
    const uint32_t d = hp_.n_embd;
    embed(st, a, tokens);  // checks the ids
    if (st.failed()) return;
    const std::span<float> type_row(a.encoder_rows.data(), d),
        pos_row(a.encoder_rows.data() + d, d);
    if (w_.token_types) {
        if (!read_row(*w_.token_types, 0, type_row))
            return st.fail(make_error("token_types.weight: {} rows cannot be read",
                                      kind_name(w_.token_types->kind())));
    } else {
        std::fill(type_row.begin(), type_row.end(), 0.0f);
    }
    on_host(st, a.encoder_host, a.s.x, static_cast<uint32_t>(tokens.size()), d,
            [&](std::span<float> x, uint32_t r) {
                if (!w_.position_embd) {  // nomic-bert: RoPE in the layers instead
                    for (uint32_t i = 0; i < d; ++i) x[i] += type_row[i];
                    return ops::layer_norm(x, w_.embd_norm, w_.embd_norm_bias, hp_.rms_eps, x);
                }
                if (!read_row(*w_.position_embd, static_cast<uint64_t>(positions[r]), pos_row))
                    return st.fail(make_error("position_embd.weight: {} rows cannot be read",
                                              kind_name(w_.position_embd->kind())));
                for (uint32_t i = 0; i < d; ++i) x[i] = x[i] + type_row[i] + pos_row[i];
                ops::layer_norm(x, w_.embd_norm, w_.embd_norm_bias, hp_.rms_eps, x);
            });
}

void Decoder::encoder_layer(StickySteps& st, Activations& a, KvAttention& kv, uint32_t il,
                            uint32_t n) const {
    const LayerWeights& L = w_.layers[il];
    const LayerConstants& C = consts_[il];
    const uint32_t d = hp_.n_embd, ff = hp_.layer_n_ff(il);
    const float eps = hp_.rms_eps;
    Scratch& s = a.s;
    const auto norm = [&](const std::vector<float>& w, const std::vector<float>& b) {
        on_host(st, a.encoder_host, s.x, n, d,
                [&](std::span<float> x, uint32_t) { ops::layer_norm(x, w, b, eps, x); });
    };
    // x = LayerNorm(x + attn_output(attention(q, k, v))): q, k and v (with
    // their biases) from x itself, RoPE'd where the row has no learned
    // positions (nomic-bert), attending both ways.
    project_qkv(st, a, il, n, true);
    if (hp_.has_rope(il)) {
        const uint32_t hd = hp_.layer_head_dim_k(il), n_rot = rope_[0].n_rot;
        st.rope(s.q, s.rope_cos[0], s.rope_sin[0], n, hp_.n_head, hd, n_rot, hp_.arch->rope);
        st.rope(s.k, s.rope_cos[0], s.rope_sin[0], n, hp_.layer_n_head_kv(il), hd, n_rot,
                hp_.arch->rope);
    }
    kv.store_and_attend(st, il, false, n);
    st.project(*L.o, "attn_output", s.att, n, s.o);
    if (!L.o_bias.empty()) st.add(roles::kOutputBias, s.o, C.o_bias, n, d, 0, 1.0f);
    st.add(roles::kResidual, s.x, s.o, n, d, d, 1.0f);
    norm(L.attn_out_norm, L.attn_out_norm_bias);
    if (hp_.arch->activation != FfnActivation::GeluTanh) {
        // nomic-bert: x = LayerNorm(x + SwiGLU FFN(x)), no biases.
        dense_ffn(st, a, il, n, s.ffn);
        st.add(roles::kResidual, s.x, s.ffn, n, d, d, 1.0f);
        return norm(L.layer_out_norm, L.layer_out_norm_bias);
    }
    // bert: x = LayerNorm(x + ffn_down(gelu(ffn_up(x)))), GELU as ggml's
    // CPU backend computes it (its f16 table: gelu_tanh_f16).
    st.project(*L.up, "ffn_up", s.x, n, s.up);
    if (!L.up_bias.empty()) st.add(roles::kFfnBias, s.up, C.up_bias, n, ff, 0, 1.0f);
    on_host(st, a.encoder_host, s.up, n, ff, [](std::span<float> u, uint32_t) {
        for (float& v : u) v = ops::gelu_tanh_f16(v);
    });
    st.project(*L.down, "ffn_down", s.up, n, s.ffn);
    if (!L.down_bias.empty()) st.add(roles::kFfnBias, s.ffn, C.down_bias, n, d, 0, 1.0f);
    st.add(roles::kResidual, s.x, s.ffn, n, d, d, 1.0f);
    norm(L.layer_out_norm, L.layer_out_norm_bias);
}

}  // namespace ferrox::model
