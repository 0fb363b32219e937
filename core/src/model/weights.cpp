#include "weights.h"

#include <cmath>
#include <unordered_set>
#include <variant>

#include "ferrox/model/architecture.h"
#include "ferrox/model/model.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "tensor_table.h"

namespace ferrox::model {
namespace {

Error missing(const gguf::File& file, const std::string& name, const Hparams& hp) {
    // Latent attention's two layouts are told apart by key, as llama.cpp does:
    // say which one the keys chose.
    std::string layout;
    if (hp.arch && hp.arch->mla &&
        (name.ends_with(".attn_kv_b.weight") || name.ends_with(".attn_k_b.weight") ||
         name.ends_with(".attn_v_b.weight")))
        layout =
            fmt::format("; {}.attention.key_length_mla is {}, so the file must hold {}",
                        hp.arch_name, hp.mla_kv_b ? "absent" : "given",
                        hp.mla_kv_b ? "attn_kv_b (the older layout)" : "attn_k_b and attn_v_b");
    return make_error("{}: tensor '{}' is missing (architecture '{}' needs it{})",
                      file.path().string(), name, hp.arch_name, layout);
}

// Which keys sized layer `il`'s tensors, where layers differ (gemma4): a
// shape refusal then names the key as well as the tensor.
std::string layer_geometry_keys(const Hparams& hp, uint32_t il) {
    if (hp.n_head_kv_layers.empty() && hp.n_ff_layers.empty() && hp.head_dim_k_swa == 0) return {};
    if (il >= hp.n_layer) return {};
    const bool local = hp.is_local_layer(il);
    return fmt::format(
        " (layer {} is {}: {}.attention.{} {}, attention.head_count_kv[{}] {}, "
        "feed_forward_length[{}] {})",
        il, local ? "sliding-window" : "global", hp.arch_name,
        local ? "key_length_swa" : "key_length", hp.layer_head_dim_k(il), il,
        hp.layer_n_head_kv(il), il, hp.layer_n_ff(il));
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

// The keys that sized an expert stack (not latent attention's per-head
// stacks): a shape refusal names them.
std::string expert_keys(const Hparams& hp) {
    if (hp.n_expert == 0) return {};
    // Mixtral's and Granite 4.0 H's experts are feed_forward_length wide.
    const bool own_width = hp.arch && (hp.arch->moe || hp.arch->dense_beside_experts);
    return fmt::format(" ({0}.expert_count {1}, {0}.{2} {3})", hp.arch_name, hp.n_expert,
                       own_width ? "expert_feed_forward_length" : "feed_forward_length",
                       hp.n_ff_expert);
}

// The keys that sized a layer tensor, for its shape refusal.
std::string sizing_keys(const Hparams& hp, const TensorRule& rule, uint32_t il) {
    const bool experts = rule.form == TensorForm::Experts && rule.stack == Extent::Experts;
    return layer_geometry_keys(hp, il) + (experts ? expert_keys(hp) : std::string());
}

// A fused expert stack ([cols, sum of the parts' rows, n_expert]: gemma4's
// ffn_gate_up_exps) as each part's per-expert views: an expert's slice is
// contiguous and its rows whole blocks, so a view is a subspan.
Expected<void> bind_expert_parts(const gguf::File& file, const std::string& name,
                                 const gguf::Tensor& t, const TensorBinding& b, const Hparams& hp,
                                 uint32_t il, LayerWeights& layer) {
    const TensorRule& rule = b.rule;
    const uint64_t cols = extent_value(rule.cols, hp, il), rows = rule_rows(rule, hp, il);
    const uint64_t n = extent_value(rule.stack, hp, il);
    const auto shape = t.shape();
    if (shape.size() != 3 || shape[0] != cols || shape[1] != rows || shape[2] != n || n == 0)
        return make_error("{}: tensor '{}' has shape [{}], expected [{}, {}, {}]",
                          file.path().string(), name, fmt::join(shape, ", "), cols, rows, n);
    const uint64_t slice = t.byte_size() / n, row_bytes = slice / rows;
    for (uint8_t i = 0; i < rule.n_parts; ++i) (layer.*b.expert_part_slots[i]).clear();
    for (uint64_t e = 0; e < n; ++e) {
        uint64_t first = 0;
        for (uint8_t i = 0; i < rule.n_parts; ++i) {
            const uint64_t part_rows = extent_value(rule.parts[i].rows, hp, il);
            auto w = WeightMatrix::borrowed(
                fmt::format("{}[expert {}, rows {}..{}]", name, e, first, first + part_rows - 1),
                t.kind(), part_rows, cols,
                t.data().subspan(e * slice + first * row_bytes, part_rows * row_bytes),
                t.mapping());
            if (!w) return w.error();
            (layer.*b.expert_part_slots[i]).push_back(std::move(*w));
            first += part_rows;
        }
    }
    return {};
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

// Rank pooling scores through the head, so it must be there; its matrices
// were read by count, so their shapes (cls.output.weight [n_embd,
// n_cls_out], a classifier's cls.weight [n_embd, n_embd]) are checked here.
Expected<void> check_rank_head(const gguf::File& file, const Hparams& hp) {
    const gguf::Tensor* t = file.find_tensor("cls.output.weight");
    if (!t && hp.pooling == Pooling::Rank)
        return make_error(
            "{}: tensor 'cls.output.weight' is missing: '{}.pooling_type' is rank, which scores "
            "through that classifier head",
            file.path().string(), hp.arch_name);
    const auto check = [&](std::string_view name, uint64_t cols) -> Expected<void> {
        const gguf::Tensor* m = file.find_tensor(name);
        if (m && (m->shape().size() != 2 || m->shape()[0] != hp.n_embd || m->shape()[1] != cols))
            return make_error("{}: tensor '{}' has shape [{}], expected [{}, {}]",
                              file.path().string(), name, fmt::join(m->shape(), ", "), hp.n_embd,
                              cols);
        return {};
    };
    if (!hp.arch->rank_head) return {};
    if (auto r = check("cls.output.weight", hp.n_cls_out); !r) return r;
    if (hp.arch->rank_classifier) return check("cls.weight", hp.n_embd);
    return {};
}

// The dense projections were read by count: their shapes ([n_embd,
// n_dense] then [n_dense, n_embd]) are checked here, before binding, and
// one without the other is refused (llama.cpp would run half of them).
Expected<void> check_dense_projections(const gguf::File& file, const Hparams& hp) {
    if (!hp.arch->dense_projections) return {};
    const gguf::Tensor* d2 = file.find_tensor("dense_2.weight");
    const gguf::Tensor* d3 = file.find_tensor("dense_3.weight");
    if (!d2 && !d3) return {};
    if (!d2 || !d3)
        return make_error(
            "{}: tensor '{}' is missing: '{}' is there, and the projections run as a pair",
            file.path().string(), d2 ? "dense_3.weight" : "dense_2.weight",
            d2 ? "dense_2.weight" : "dense_3.weight");
    const struct {
        const gguf::Tensor* t;
        const char* name;
        uint64_t cols, rows;
    } shapes[] = {{d2, "dense_2.weight", hp.n_embd, hp.dense_feat},
                  {d3, "dense_3.weight", hp.dense_feat, hp.n_embd}};
    for (const auto& s : shapes)
        if (s.t->shape().size() != 2 || s.t->shape()[0] != s.cols || s.t->shape()[1] != s.rows ||
            hp.dense_feat == 0)
            return make_error(
                "{}: tensor '{}' has shape [{}], expected [{}, {}] ({}.dense_2_feat_out is {})",
                file.path().string(), s.name, fmt::join(s.t->shape(), ", "), s.cols, s.rows,
                hp.arch_name, hp.dense_feat);
    return {};
}

}  // namespace

std::string layer_tensor(uint32_t il, std::string_view suffix) {
    return fmt::format("blk.{}.{}", il, suffix);
}

Expected<WeightMatrix> bind_matrix(const gguf::File& file, const std::string& name, uint64_t rows,
                                   uint64_t cols) {
    const gguf::Tensor* t = file.find_tensor(name);
    if (!t) return make_error("{}: tensor '{}' is missing", file.path().string(), name);
    // A one-row matrix may be stored as a vector (qwen35moe's ffn_gate_inp_shexp).
    const bool dims_ok = t->shape().size() == 2 || (rows == 1 && t->shape().size() == 1);
    if (!dims_ok || t->row_length() != cols || t->row_count() != rows)
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

namespace {

// Binds one tensor into its slot; `layer` is null for a model tensor.
struct Binder {
    const gguf::File& file;
    const Hparams& hp;
    ModelWeights& mw;
    LayerWeights* layer;
    const TensorRule& rule;
    const std::string& name;
    const gguf::Tensor& t;
    uint32_t il;  // the layer's index (0 for a model tensor): its own geometry

    Expected<void> operator()(std::monostate) const { return {}; }
    Expected<void> operator()(const gguf::Tensor* ModelWeights::*slot) const {
        // token_embd's rows are n_embd long; per_layer_token_embd's n_layer x
        // n_embd_per_layer, one row per token id.
        const uint64_t cols = extent_value(rule.cols, hp), rows = extent_value(rule.rows, hp);
        if (t.shape().size() != 2 || t.row_length() != cols || t.row_count() != rows)
            return make_error("{}: tensor '{}' has shape [{}], expected [{} ({}), {} ({})]",
                              file.path().string(), name, fmt::join(t.shape(), ", "), cols,
                              extent_name(rule.cols), rows, extent_name(rule.rows));
        mw.*slot = &t;
        return {};
    }
    Expected<void> operator()(std::optional<WeightMatrix> ModelWeights::*slot) const {
        return to(mw.*slot, matrix());
    }
    Expected<void> operator()(std::vector<float> ModelWeights::*slot) const {
        return to(mw.*slot, vector());
    }
    Expected<void> operator()(std::vector<float> RopeFactors::*slot) const {
        auto v = vector();
        if (!v) return v.error();
        for (const float f : *v)
            if (!(f > 0) || !std::isfinite(f))
                return make_error("{}: tensor '{}' holds {}, not a frequency divisor",
                                  file.path().string(), name, f);
        mw.rope_factors.*slot = std::move(*v);
        return {};
    }
    Expected<void> operator()(LayerMatrix slot) const { return to(layer->*slot, matrix()); }
    Expected<void> operator()(std::vector<WeightMatrix> LayerWeights::*slot) const {
        return to(layer->*slot,
                  bind_experts(file, name, extent_value(rule.rows, hp, il),
                               extent_value(rule.cols, hp, il),
                               static_cast<uint32_t>(extent_value(rule.stack, hp, il))));
    }
    Expected<void> operator()(std::vector<float> LayerWeights::*slot) const {
        return to(layer->*slot, vector());
    }

    Expected<WeightMatrix> matrix() const {
        return bind_matrix(file, name, rule_rows(rule, hp, il), extent_value(rule.cols, hp, il));
    }
    Expected<std::vector<float>> vector() const {
        return bind_vector(file, name,
                           extent_value(rule.rows, hp, il) * extent_value(rule.cols, hp, il));
    }
    template <class T, class U>
    static Expected<void> to(T& dst, Expected<U> value) {
        if (!value) return value.error();
        dst = std::move(*value);
        return {};
    }
};

}  // namespace

Expected<ModelWeights> bind_weights(const gguf::File& file, const Hparams& hp) {
    ModelWeights mw;
    mw.layers.resize(hp.n_layer);
    std::unordered_set<std::string> bound;
    const std::vector<TensorBinding> table = tensor_table(*hp.arch);
    // `layer` is null for a model tensor; `il` counts NextN blocks after the run ones.
    const auto bind = [&](const TensorBinding& b, LayerWeights* layer,
                          uint32_t il) -> Expected<void> {
        const TensorRule& rule = b.rule;
        const auto full_name = [&](std::string_view n) {
            return layer ? layer_tensor(il, n) : std::string(n);
        };
        const std::string name = full_name(rule.name);
        if (!applies(rule.when, hp, il)) return {};
        // Bound as rows of the fused tensor instead (its own rule).
        if (!rule.fused_into.empty() && file.find_tensor(full_name(rule.fused_into))) return {};
        const gguf::Tensor* t = file.find_tensor(name);
        if (!t && rule.use == TensorUse::Required) return missing(file, name, hp);
        if (!t && rule.stand_in.empty()) return {};
        const std::string bound_name = t ? name : std::string(rule.stand_in);
        if (!t) t = file.find_tensor(bound_name);
        if (!t) return missing(file, bound_name, hp);
        if (auto r = std::visit(Binder{file, hp, mw, layer, rule, bound_name, *t, il}, b.slot); !r)
            return layer ? Error(r.error().message() + sizing_keys(hp, rule, il)) : r.error();
        if (rule.n_parts > 0 && rule.form == TensorForm::Experts) {
            if (auto r = bind_expert_parts(file, name, *t, b, hp, il, *layer); !r)
                return Error(r.error().message() + sizing_keys(hp, rule, il));
        } else if (rule.n_parts > 0) {
            // Rows of several matrices in one tensor, bound as one view each:
            // each row is whole blocks, so a part is a subspan -- zero copy.
            if (auto m = bind_matrix(file, name, rule_rows(rule, hp, il),
                                     extent_value(rule.cols, hp, il));
                !m)
                return m.error();
            uint64_t first = 0;
            for (uint8_t i = 0; i < rule.n_parts; ++i) {
                const uint64_t n = extent_value(rule.parts[i].rows, hp, il);
                auto view = row_view(*t, fmt::format("{}[rows {}..{}]", name, first, first + n - 1),
                                     first, n);
                if (!view) return view.error();
                layer->*b.part_slots[i] = std::move(*view);
                first += n;
            }
        }
        bound.insert(name);
        return {};
    };
    if (auto r = check_dense_projections(file, hp); !r) return r.error();
    for (const TensorBinding& b : table)
        if (b.rule.scope == TensorScope::Model)
            if (auto r = bind(b, nullptr, 0); !r) return r.error();
    if (auto r = check_rank_head(file, hp); !r) return r.error();
    // NextN blocks are bound as llama.cpp loads them: all of them, or none
    // where the file has no first NextN projection (a trunk-only file; any
    // other tensor of theirs is then refused as unused).
    if (hp.n_layer_nextn > 0 && file.find_tensor(layer_tensor(hp.n_layer, "nextn.eh_proj.weight")))
        mw.nextn_layers.resize(hp.n_layer_nextn);
    for (uint32_t il = 0; il < hp.n_layer + mw.nextn_layers.size(); ++il) {
        LayerWeights& lw = il < hp.n_layer ? mw.layers[il] : mw.nextn_layers[il - hp.n_layer];
        for (const TensorBinding& b : table)
            if (b.rule.scope == TensorScope::Layer)
                if (auto r = bind(b, &lw, il); !r) return r.error();
    }
    if (mw.per_layer_model_proj) {
        // Each layer's rows of the per-layer projection, as a matrix of its own.
        const std::string name = "per_layer_model_proj.weight";
        const gguf::Tensor& t = *file.find_tensor(name);
        const uint64_t p = hp.n_embd_per_layer;
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            auto view = row_view(t, fmt::format("{}[rows {}..{}]", name, il * p, (il + 1) * p - 1),
                                 il * p, p);
            if (!view) return view.error();
            mw.layers[il].ple_model_proj = std::move(*view);
        }
        mw.layers[0].ple_proj_norm = mw.per_layer_proj_norm;
    }
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        LayerWeights& lw = mw.layers[il];
        // An RMSNorm without a weight is one with unit weights (gemma4's V).
        if (hp.arch->value_norm) lw.v_norm.assign(hp.layer_head_dim_v(il), 1.0f);
        if (hp.qk_l2_norm && hp.has_rope(il)) lw.qk_unit_norm.assign(hp.layer_head_dim_k(il), 1.0f);
        // gemma4's router input: rms_norm(x) x 1/sqrt(n_embd) x scale, one
        // weight vector for the norm op.
        const float inv_sqrt_embd = 1.0f / std::sqrt(static_cast<float>(hp.n_embd));
        for (float& v : lw.router_in_scale) v *= inv_sqrt_embd;
        for (const float v : lw.down_exps_scale)
            if (!std::isfinite(v))
                return make_error("{}: tensor '{}' holds {}, not a finite scale",
                                  file.path().string(), layer_tensor(il, "ffn_down_exps.scale"), v);
        for (const float v : lw.out_scale)
            if (!std::isfinite(v))
                return make_error("{}: tensor '{}' holds {}, not a finite scale",
                                  file.path().string(),
                                  layer_tensor(il, "layer_output_scale.weight"), v);
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
