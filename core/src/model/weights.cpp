#include "weights.h"

#include <cmath>
#include <unordered_set>

#include "ferrox/model/architecture.h"
#include "ferrox/model/model.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"

namespace ferrox::model {
namespace {

Error missing(const gguf::File& file, const std::string& name, const Hparams& hp) {
    return make_error("{}: tensor '{}' is missing (architecture '{}' needs it)",
                      file.path().string(), name, hp.arch_name);
}

Expected<const gguf::Tensor*> require(const gguf::File& file, const std::string& name,
                                      const Hparams& hp) {
    const gguf::Tensor* t = file.find_tensor(name);
    if (!t) return missing(file, name, hp);
    return t;
}

// A 1-D tensor of `length` values as f32.
Expected<std::vector<float>> bind_vector(const gguf::File& file, const std::string& name,
                                         uint64_t length) {
    const gguf::Tensor* t = file.find_tensor(name);
    if (!t) return make_error("{}: tensor '{}' is missing", file.path().string(), name);
    if (t->element_count() != length)
        return make_error("{}: tensor '{}' has {} elements, expected {}", file.path().string(),
                          name, t->element_count(), length);
    std::vector<float> v(length);
    if (!quant::dequantize_row(t->kind(), t->data().data(), v.data(), length))
        return make_error("{}: tensor '{}': cannot read {} values as f32", file.path().string(),
                          name, kind_name(t->kind()));
    return v;
}

// Per-expert views of a stacked [cols, rows, n_expert] tensor: each expert's
// slice is contiguous, so a view is a subspan -- no repacking.
Expected<std::vector<WeightMatrix>> bind_experts(const gguf::File& file, const std::string& name,
                                                 uint64_t rows, uint64_t cols, uint32_t n_expert) {
    const gguf::Tensor* t = file.find_tensor(name);
    if (!t) return make_error("{}: tensor '{}' is missing", file.path().string(), name);
    const auto shape = t->shape();
    if (shape.size() != 3 || shape[0] != cols || shape[1] != rows || shape[2] != n_expert)
        return make_error("{}: tensor '{}' is not [{}, {}, {}]", file.path().string(), name, cols,
                          rows, n_expert);
    const uint64_t slice = t->byte_size() / n_expert;
    std::vector<WeightMatrix> views;
    for (uint32_t e = 0; e < n_expert; ++e) {
        auto w = WeightMatrix::borrowed(fmt::format("{}[expert {}]", name, e), t->kind(), rows,
                                        cols, t->data().subspan(e * slice, slice), t->mapping());
        if (!w) return w.error();
        views.push_back(std::move(*w));
    }
    return views;
}

// A tensor name from the file, safe for a terminal: non-printable bytes as \xNN.
std::string printable(std::string_view name) {
    std::string out;
    for (const char c : name) {
        const auto b = static_cast<unsigned char>(c);
        if (b >= 0x20 && b < 0x7f && b != '\\')
            out.push_back(c);
        else
            out += fmt::format("\\x{:02x}", b);
    }
    return out;
}

// Tensors an architecture's files may hold that ferrox deliberately does not
// read. None so far: llama.cpp refuses a file with a tensor it does not load,
// and every tensor it loads for these architectures changes the output.
bool ignorable(const Hparams&, std::string_view) { return false; }

}  // namespace

std::string layer_tensor(uint32_t il, std::string_view suffix) {
    return fmt::format("blk.{}.{}", il, suffix);
}

Expected<WeightMatrix> bind_matrix(const gguf::File& file, const std::string& name, uint64_t rows,
                                   uint64_t cols) {
    const gguf::Tensor* t = file.find_tensor(name);
    if (!t) return make_error("{}: tensor '{}' is missing", file.path().string(), name);
    if (t->shape().size() != 2 || t->row_length() != cols || t->row_count() != rows)
        return make_error("{}: tensor '{}' has shape [{}], expected [{}, {}]", file.path().string(),
                          name, fmt::join(t->shape(), ", "), cols, rows);
    return WeightMatrix::borrowed(name, t->kind(), rows, cols, t->data(), t->mapping());
}

// Rows [first, first + rows) of a bound matrix, as a matrix of its own: a
// fused tensor's parts (attn_qkv's q, k and v; phi3's gate||up). Each row is
// whole blocks, so the part is a subspan of the mapping -- zero copy.
Expected<WeightMatrix> row_view(const gguf::Tensor& t, std::string name, uint64_t first,
                                uint64_t rows) {
    const uint64_t row_bytes = t.byte_size() / t.row_count();
    return WeightMatrix::borrowed(std::move(name), t.kind(), rows, t.row_length(),
                                  t.data().subspan(first * row_bytes, rows * row_bytes),
                                  t.mapping());
}

Expected<ModelWeights> bind_weights(const gguf::File& file, const Hparams& hp) {
    ModelWeights mw;
    std::unordered_set<std::string> bound;
    const uint64_t d = hp.n_embd;
    auto embd = require(file, "token_embd.weight", hp);
    if (!embd) return embd.error();
    mw.token_embd = *embd;
    bound.insert("token_embd.weight");
    if (mw.token_embd->row_length() != d)
        return make_error("{}: tensor 'token_embd.weight' rows are {} long, embedding_length is {}",
                          file.path().string(), mw.token_embd->row_length(), d);
    const ArchSpec& spec = architecture(hp.arch);
    const bool tied = file.find_tensor("output.weight") == nullptr;
    if (tied && !spec.tied_output) return missing(file, "output.weight", hp);
    auto output = bind_matrix(file, tied ? "token_embd.weight" : "output.weight", hp.vocab, d);
    if (!output) return output.error();
    mw.output = std::move(*output);
    bound.insert(mw.output->name());
    auto onorm = bind_vector(file, "output_norm.weight", d);
    if (!onorm) return onorm.error();
    mw.output_norm = std::move(*onorm);
    bound.insert("output_norm.weight");

    // Per-pair RoPE divisors, optional, one set for all layers (llama.cpp
    // reads them for llama; LongRoPE's pair only with that scaling).
    const auto optional_vector = [&](std::vector<float>& dst,
                                     const std::string& name) -> Expected<void> {
        if (!file.find_tensor(name)) return {};
        auto v = bind_vector(file, name, hp.n_rot / 2);
        if (!v) return v.error();
        for (const float f : *v)
            if (!(f > 0) || !std::isfinite(f))
                return make_error("{}: tensor '{}' holds {}, not a frequency divisor",
                                  file.path().string(), name, f);
        dst = std::move(*v);
        bound.insert(name);
        return {};
    };
    if (spec.rope_factors != RopeFactorTensors::None) {
        if (hp.rope_scaling == RopeScaling::LongRope ||
            spec.rope_factors == RopeFactorTensors::LongRope) {
            for (auto r :
                 {optional_vector(mw.rope_factors.short_factors, "rope_factors_short.weight"),
                  optional_vector(mw.rope_factors.long_factors, "rope_factors_long.weight")})
                if (!r) return r.error();
        } else if (auto r = optional_vector(mw.rope_factors.freqs, "rope_freqs.weight"); !r) {
            return r.error();
        }
    }

    const uint64_t q_dim = uint64_t{hp.n_head} * hp.head_dim_k;
    const uint64_t k_dim = uint64_t{hp.n_head_kv} * hp.head_dim_k;
    const uint64_t v_dim = uint64_t{hp.n_head_kv} * hp.head_dim_v;
    const uint64_t o_dim = uint64_t{hp.n_head} * hp.head_dim_v;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        LayerWeights lw;
        auto matrix = [&](std::optional<WeightMatrix>& dst, std::string_view suffix, uint64_t rows,
                          uint64_t cols) -> Expected<void> {
            auto m = bind_matrix(file, layer_tensor(il, suffix), rows, cols);
            if (!m) return m.error();
            bound.insert(m->name());
            dst = std::move(*m);
            return {};
        };
        auto vector = [&](std::vector<float>& dst, std::string_view suffix,
                          uint64_t n) -> Expected<void> {
            auto name = layer_tensor(il, suffix);
            auto v = bind_vector(file, name, n);
            if (!v) return v.error();
            bound.insert(std::move(name));
            dst = std::move(*v);
            return {};
        };
        // Rows of several matrices in one tensor, bound as one view each.
        auto fused =
            [&](std::string_view suffix,
                std::initializer_list<std::pair<std::optional<WeightMatrix>*, uint64_t>> parts)
            -> Expected<void> {
            uint64_t rows = 0;
            for (const auto& part : parts) rows += part.second;
            const std::string name = layer_tensor(il, suffix);
            if (auto m = bind_matrix(file, name, rows, d); !m) return m.error();
            const gguf::Tensor& t = *file.find_tensor(name);
            uint64_t first = 0;
            for (const auto& [dst, n] : parts) {
                auto view = row_view(t, fmt::format("{}[rows {}..{}]", name, first, first + n - 1),
                                     first, n);
                if (!view) return view.error();
                *dst = std::move(*view);
                first += n;
            }
            bound.insert(name);
            return {};
        };
        // llama.cpp takes a fused attn_qkv (q, k, v rows in that order) for
        // every architecture whose q/k/v it loads; phi3's files have one.
        if (file.find_tensor(layer_tensor(il, "attn_qkv.weight"))) {
            if (auto r = fused("attn_qkv.weight", {{&lw.q, q_dim}, {&lw.k, k_dim}, {&lw.v, v_dim}});
                !r)
                return r.error();
        } else {
            for (auto r :
                 {matrix(lw.q, "attn_q.weight", q_dim, d), matrix(lw.k, "attn_k.weight", k_dim, d),
                  matrix(lw.v, "attn_v.weight", v_dim, d)})
                if (!r) return r.error();
        }
        if (auto r = matrix(lw.o, "attn_output.weight", d, o_dim); !r) return r.error();
        if (hp.pre_norms)
            for (auto r : {vector(lw.attn_norm, "attn_norm.weight", d),
                           vector(lw.ffn_norm, spec.ffn_norm_tensor, d)})
                if (!r) return r.error();
        // Required (gpt-oss) or, where the row allows it, bound for the layers that have it.
        if (spec.attn_output_bias == TensorUse::Required ||
            (spec.attn_output_bias == TensorUse::Optional &&
             file.find_tensor(layer_tensor(il, "attn_output.bias"))))
            if (auto r = vector(lw.o_bias, "attn_output.bias", d); !r) return r.error();
        if (hp.attn_sinks)
            if (auto r = vector(lw.sinks, "attn_sinks.weight", hp.n_head); !r) return r.error();
        if (hp.qk_norm != QkNorm::None) {
            const bool whole = hp.qk_norm == QkNorm::Whole;
            for (auto r : {vector(lw.q_norm, "attn_q_norm.weight", whole ? q_dim : hp.head_dim_k),
                           vector(lw.k_norm, "attn_k_norm.weight", whole ? k_dim : hp.head_dim_k)})
                if (!r) return r.error();
        }
        if (hp.post_norms)
            for (auto r : {vector(lw.post_attn_norm, "post_attention_norm.weight", d),
                           vector(lw.post_ffw_norm, "post_ffw_norm.weight", d)})
                if (!r) return r.error();
        if (hp.qkv_bias)
            for (auto r :
                 {vector(lw.q_bias, "attn_q.bias", q_dim), vector(lw.k_bias, "attn_k.bias", k_dim),
                  vector(lw.v_bias, "attn_v.bias", v_dim)})
                if (!r) return r.error();
        if (hp.n_expert == 0 && spec.fused_gate_up) {
            for (auto r : {fused("ffn_up.weight", {{&lw.gate, hp.n_ff}, {&lw.up, hp.n_ff}}),
                           matrix(lw.down, "ffn_down.weight", d, hp.n_ff)})
                if (!r) return r.error();
        } else if (hp.n_expert == 0) {
            for (auto r : {matrix(lw.gate, "ffn_gate.weight", hp.n_ff, d),
                           matrix(lw.up, "ffn_up.weight", hp.n_ff, d),
                           matrix(lw.down, "ffn_down.weight", d, hp.n_ff)})
                if (!r) return r.error();
        } else {
            if (auto r = matrix(lw.router, "ffn_gate_inp.weight", hp.n_expert, d); !r)
                return r.error();
            const uint64_t f = hp.n_ff_expert;
            auto g =
                bind_experts(file, layer_tensor(il, "ffn_gate_exps.weight"), f, d, hp.n_expert);
            if (!g) return g.error();
            auto u = bind_experts(file, layer_tensor(il, "ffn_up_exps.weight"), f, d, hp.n_expert);
            if (!u) return u.error();
            auto dn =
                bind_experts(file, layer_tensor(il, "ffn_down_exps.weight"), d, f, hp.n_expert);
            if (!dn) return dn.error();
            for (const char* part :
                 {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"})
                bound.insert(layer_tensor(il, part));
            lw.gate_exps = std::move(*g);
            lw.up_exps = std::move(*u);
            lw.down_exps = std::move(*dn);
            if (hp.expert_biases)
                for (auto r : {vector(lw.router_bias, "ffn_gate_inp.bias", hp.n_expert),
                               vector(lw.gate_exps_bias, "ffn_gate_exps.bias", f * hp.n_expert),
                               vector(lw.up_exps_bias, "ffn_up_exps.bias", f * hp.n_expert),
                               vector(lw.down_exps_bias, "ffn_down_exps.bias", d * hp.n_expert)})
                    if (!r) return r.error();
        }
        mw.layers.push_back(std::move(lw));
    }
    for (const gguf::Tensor& t : file.tensors())
        if (!bound.contains(t.name()) && !ignorable(hp, t.name()))
            return make_error(
                "{}: tensor '{}' is not used by ferrox's '{}' decoder; refusing the file rather "
                "than running it without that tensor",
                file.path().string(), printable(t.name()), hp.arch_name);
    return mw;
}

}  // namespace ferrox::model
