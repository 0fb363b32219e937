#include "ferrox/model/model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <span>

#include "ferrox/log.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant_kind.h"
#include "residency.h"
#include "steps.h"
#include "weights.h"

namespace ferrox::model {

// Where each activation lives, carved once for `max_batch` positions out of
// one allocation: no allocation per token, on the host or on a device.
struct Scratch {
    Act x, xn, router, expert_gate, expert_up, expert_down, logits;
    // The attention block's q, k, v, att, o and the FFN's gate, up, ffn are never
    // live at the same time, so the two blocks share one region.
    Act q, k, v, att, o, gate, up, ffn;
    Act rope_cos[2], rope_sin[2];  // [global, local][position][head_dim / 2]
};

// Norm weights and biases where the ops read them.
struct LayerConstants {
    Act attn_norm, ffn_norm, q_norm, k_norm, post_attn_norm, post_ffw_norm;
    Act q_bias, k_bias, v_bias;
};

// Rows of logits a resident model computes per download.
constexpr uint32_t kLogitRows = 16;

struct Model::Impl {
    const gguf::File& file;
    Dispatcher& dispatcher;
    Hparams hp;
    CapacityPlan plan, device_plan;
    Residency residency;
    ModelWeights w;
    // token_embd as a matrix for a resident backend's get_rows (w.output when tied).
    std::optional<WeightMatrix> embedding_matrix;
    uint32_t context = 0, max_batch = 0;
    ferrox_kind kv_kind = FERROX_KIND_F32;
    std::unique_ptr<Steps> steps;
    Scratch s;
    std::vector<LayerConstants> consts;
    Act output_norm;
    // Per layer: [context][n_kv * head_dim] of kv_kind.
    std::vector<Act> k_cache, v_cache;
    // Host-side values: RoPE angles before upload, MoE router scores after download.
    std::vector<float> rope_cos[2], rope_sin[2], router_scores, zeros;
    std::vector<uint32_t> expert_order;

    Impl(const gguf::File& f, Dispatcher& d) : file(f), dispatcher(d) {}

    uint64_t q_dim() const { return uint64_t{hp.n_head} * hp.head_dim_k; }
    uint64_t k_dim() const { return uint64_t{hp.n_head_kv} * hp.head_dim_k; }
    uint64_t v_dim() const { return uint64_t{hp.n_head_kv} * hp.head_dim_v; }
    uint64_t o_dim() const { return uint64_t{hp.n_head} * hp.head_dim_v; }
    // F32 and F16 are one-element blocks: the kind table's block size is the element's.
    size_t kv_element_bytes() const { return kind_traits(kv_kind)->block_bytes; }

    Expected<void> embed(std::span<const int32_t> tokens) {
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int32_t id = tokens[i];
            if (id < 0 || static_cast<uint64_t>(id) >= hp.vocab)
                return make_error("token id {} at batch index {} is outside the vocabulary (0..{})",
                                  id, i, hp.vocab - 1);
        }
        const float scale = hp.embed_scale ? std::sqrt(static_cast<float>(hp.n_embd)) : 1.0f;
        return steps->embed(tokens, scale, s.x);
    }

    Expected<void> attention_block(uint32_t il, uint32_t n, uint32_t pos0) {
        const LayerWeights& L = w.layers[il];
        const LayerConstants& C = consts[il];
        const uint32_t d = hp.n_embd, hd = hp.head_dim_k;
        Steps& st = *steps;
        // Later layers get xn from the previous FFN's residual add fused with this norm.
        if (il == 0)
            if (auto r = st.rms_norm(roles::kAttnNorm, s.x, C.attn_norm, n, d, hp.rms_eps, s.xn);
                !r)
                return r;
        if (auto r = st.project(*L.q, "attn_q", s.xn, n, s.q); !r) return r;
        if (auto r = st.project(*L.k, "attn_k", s.xn, n, s.k); !r) return r;
        if (auto r = st.project(*L.v, "attn_v", s.xn, n, s.v); !r) return r;
        if (hp.qkv_bias) {
            const auto q_dim32 = static_cast<uint32_t>(q_dim());
            const auto k_dim32 = static_cast<uint32_t>(k_dim());
            const auto v_dim32 = static_cast<uint32_t>(v_dim());
            if (auto r = st.add(roles::kQkvBias, s.q, C.q_bias, n, q_dim32, 0, 1.0f); !r) return r;
            if (auto r = st.add(roles::kQkvBias, s.k, C.k_bias, n, k_dim32, 0, 1.0f); !r) return r;
            if (auto r = st.add(roles::kQkvBias, s.v, C.v_bias, n, v_dim32, 0, 1.0f); !r) return r;
        }
        if (hp.qk_norm) {
            if (auto r = st.rms_norm(roles::kQNorm, s.q, C.q_norm, uint64_t{n} * hp.n_head, hd,
                                     hp.rms_eps, s.q);
                !r)
                return r;
            if (auto r = st.rms_norm(roles::kKNorm, s.k, C.k_norm, uint64_t{n} * hp.n_head_kv, hd,
                                     hp.rms_eps, s.k);
                !r)
                return r;
        }
        const bool local = hp.is_local_layer(il);
        if (auto r = st.rope(s.q, s.rope_cos[local], s.rope_sin[local], n, hp.n_head, hd, hp.rope);
            !r)
            return r;
        if (auto r =
                st.rope(s.k, s.rope_cos[local], s.rope_sin[local], n, hp.n_head_kv, hd, hp.rope);
            !r)
            return r;
        const uint64_t element = kv_element_bytes();
        if (auto r = st.store_kv(s.k, k_cache[il].at_bytes(pos0 * k_dim() * element), kv_kind,
                                 n * k_dim());
            !r)
            return r;
        if (auto r = st.store_kv(s.v, v_cache[il].at_bytes(pos0 * v_dim() * element), kv_kind,
                                 n * v_dim());
            !r)
            return r;

        ferrox_attention_desc desc{};
        desc.struct_size = sizeof desc;
        desc.abi_version = FERROX_ABI_VERSION;
        desc.n_query = n;
        desc.pos0 = pos0;
        desc.window =
            local ? hp.sliding_window : 0;  // the last `window` positions, itself included
        desc.n_head = hp.n_head;
        desc.n_head_kv = hp.n_head_kv;
        desc.head_dim_k = hp.head_dim_k;
        desc.head_dim_v = hp.head_dim_v;
        desc.scale = hp.attn_scale;
        desc.kv_kind = kv_kind;
        if (auto r = st.attention(desc, s.q, k_cache[il], v_cache[il], s.att); !r) return r;
        if (auto r = st.project(*L.o, "attn_output", s.att, n, s.o); !r) return r;
        if (hp.post_norms)
            if (auto r =
                    st.rms_norm(roles::kPostAttnNorm, s.o, C.post_attn_norm, n, d, hp.rms_eps, s.o);
                !r)
                return r;
        // The residual add and the FFN's norm: xn = ffn_norm(x += o).
        return st.add_rms_norm(roles::kFfnNorm, s.x, s.o, d, 1.0f, C.ffn_norm, n, d, hp.rms_eps,
                               s.xn);
    }

    // cos/sin per position of this chunk, once for global and once for local
    // (sliding-window) layers: every head and layer of a kind shares them.
    Expected<void> rope_tables(uint32_t n, uint32_t pos0) {
        const uint32_t half = hp.head_dim_k / 2;
        for (int local = 0; local < 2; ++local) {
            if (local && hp.sliding_window == 0) break;
            const float base = local ? hp.rope_base_local : hp.rope_base;
            const float freq_scale = local ? 1.0f : hp.rope_freq_scale;
            for (uint32_t i = 0; i < n; ++i)
                ops::rope_angles(pos0 + i, base, freq_scale,
                                 {&rope_cos[local][size_t{i} * half], half},
                                 {&rope_sin[local][size_t{i} * half], half});
            const size_t used = size_t{n} * half;
            if (auto r = steps->upload({rope_cos[local].data(), used}, s.rope_cos[local]); !r)
                return r;
            if (auto r = steps->upload({rope_sin[local].data(), used}, s.rope_sin[local]); !r)
                return r;
        }
        return {};
    }

    Expected<void> dense_ffn(const LayerWeights& L, uint32_t n) {
        if (auto r = steps->project(*L.gate, "ffn_gate", s.xn, n, s.gate); !r) return r;
        if (auto r = steps->project(*L.up, "ffn_up", s.xn, n, s.up); !r) return r;
        if (auto r = steps->glu(hp.activation, s.gate, s.up, uint64_t{n} * hp.n_ff); !r) return r;
        return steps->project(*L.down, "ffn_down", s.gate, n, s.ffn);
    }

    // The router scores of all n positions in one product and one download
    // (the layer's one host round trip, as seed 004 does); softmax, top-k and
    // optional renormalisation on the host; each chosen expert's FFN output
    // added into the result with its router weight.
    Expected<void> moe_ffn(const LayerWeights& L, uint32_t n) {
        const uint32_t d = hp.n_embd, f = hp.n_ff_expert;
        Steps& st = *steps;
        if (auto r = st.upload({zeros.data(), size_t{n} * d}, s.ffn); !r) return r;
        if (auto r = st.project(*L.router, "moe_router", s.xn, n, s.router); !r) return r;
        if (auto r = st.download(s.router, {router_scores.data(), size_t{n} * hp.n_expert}); !r)
            return r;
        for (uint32_t i = 0; i < n; ++i) {
            const Act xi = s.xn.at(uint64_t{i} * d);
            std::span<float> probs{router_scores.data() + size_t{i} * hp.n_expert, hp.n_expert};
            ops::softmax(probs);
            std::iota(expert_order.begin(), expert_order.end(), 0u);
            std::partial_sort(expert_order.begin(), expert_order.begin() + hp.n_expert_used,
                              expert_order.end(),
                              [&](uint32_t a, uint32_t b) { return probs[a] > probs[b]; });
            float total = 0;
            for (uint32_t j = 0; j < hp.n_expert_used; ++j) total += probs[expert_order[j]];
            for (uint32_t j = 0; j < hp.n_expert_used; ++j) {
                const uint32_t e = expert_order[j];
                const float weight = hp.expert_weights_norm ? probs[e] / total : probs[e];
                if (auto r = st.project(L.gate_exps[e], "ffn_gate_exps", xi, 1, s.expert_gate); !r)
                    return r;
                if (auto r = st.project(L.up_exps[e], "ffn_up_exps", xi, 1, s.expert_up); !r)
                    return r;
                if (auto r = st.glu(hp.activation, s.expert_gate, s.expert_up, f); !r) return r;
                if (auto r = st.project(L.down_exps[e], "ffn_down_exps", s.expert_gate, 1,
                                        s.expert_down);
                    !r)
                    return r;
                // The down projection is linear: weighting its output equals
                // weighting its input.
                if (auto r = st.add(roles::kMoeCombine, s.ffn.at(uint64_t{i} * d), s.expert_down, 1,
                                    d, 0, weight);
                    !r)
                    return r;
            }
        }
        return {};
    }

    Expected<void> ffn_block(uint32_t il, uint32_t n) {
        const LayerWeights& L = w.layers[il];
        const LayerConstants& C = consts[il];
        const uint32_t d = hp.n_embd;
        // xn = ffn_norm(x) already: the attention block's last step.
        auto r = hp.n_expert == 0 ? dense_ffn(L, n) : moe_ffn(L, n);
        if (!r) return r;
        if (hp.post_norms)
            if (auto p = steps->rms_norm(roles::kPostFfwNorm, s.ffn, C.post_ffw_norm, n, d,
                                         hp.rms_eps, s.ffn);
                !p)
                return p;
        if (il + 1 == hp.n_layer) return steps->add(roles::kResidual, s.x, s.ffn, n, d, d, 1.0f);
        // The residual add and the next layer's norm: xn = attn_norm(x += ffn).
        return steps->add_rms_norm(roles::kAttnNorm, s.x, s.ffn, d, 1.0f, consts[il + 1].attn_norm,
                                   n, d, hp.rms_eps, s.xn);
    }

    // Logits of `n` normalised rows at `xn` into `out` (n * vocab floats): in
    // place on the host, through a bounded device region when resident.
    Expected<void> output_logits(Act xn, uint32_t n, std::span<float> out) {
        if (!steps->resident())
            return steps->project(*w.output, "output", xn, n,
                                  Act{reinterpret_cast<std::byte*>(out.data())});
        for (uint32_t start = 0; start < n; start += kLogitRows) {
            const uint32_t rows = std::min(kLogitRows, n - start);
            if (auto r = steps->project(*w.output, "output", xn.at(uint64_t{start} * hp.n_embd),
                                        rows, s.logits);
                !r)
                return r;
            if (auto r = steps->download(
                    s.logits, out.subspan(uint64_t{start} * hp.vocab, uint64_t{rows} * hp.vocab));
                !r)
                return r;
        }
        return {};
    }

    // One chunk of at most max_batch positions. `logits`: empty, vocab (last
    // position) or n * vocab (each position).
    Expected<void> chunk(std::span<const int32_t> tokens, uint32_t pos0, std::span<float> logits) {
        const auto n = static_cast<uint32_t>(tokens.size());
        const uint32_t d = hp.n_embd;
        if (auto r = embed(tokens); !r) return r;
        if (auto r = rope_tables(n, pos0); !r) return r;
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            if (auto r = attention_block(il, n, pos0); !r) return r;
            if (auto r = ffn_block(il, n); !r) return r;
        }
        if (logits.empty()) return {};
        if (logits.size() == hp.vocab) {
            const Act last = s.x.at(uint64_t{n - 1} * d);
            if (auto r =
                    steps->rms_norm(roles::kOutputNorm, last, output_norm, 1, d, hp.rms_eps, s.xn);
                !r)
                return r;
            return output_logits(s.xn, 1, logits);
        }
        if (auto r = steps->rms_norm(roles::kOutputNorm, s.x, output_norm, n, d, hp.rms_eps, s.xn);
            !r)
            return r;
        return output_logits(s.xn, n, logits);
    }

    // Per position: the larger of the attention block's and the FFN's buffers.
    uint64_t block_floats() const {
        const uint64_t attention = q_dim() + k_dim() + v_dim() + o_dim() + hp.n_embd;
        const uint64_t ffn = 2 * std::max<uint64_t>(hp.n_ff, 1) + hp.n_embd;
        return std::max(attention, ffn);
    }

    // The one activation region, in floats; lays it out into `s` when `base` is given.
    uint64_t layout(const Act* base) {
        uint64_t used = 0;
        const auto carve = [&](Act& a, uint64_t floats) {
            if (base) a = base->at(used);
            used += floats;
        };
        const uint64_t b = max_batch, ff = std::max<uint64_t>(hp.n_ff, 1);
        const uint64_t half = hp.head_dim_k / 2;
        carve(s.x, b * hp.n_embd);
        carve(s.xn, b * hp.n_embd);
        const uint64_t blocks = used;
        carve(s.q, b * q_dim());
        carve(s.k, b * k_dim());
        carve(s.v, b * v_dim());
        carve(s.att, b * o_dim());
        carve(s.o, b * hp.n_embd);
        used = blocks;  // the FFN block starts over
        carve(s.gate, b * ff);
        carve(s.up, b * ff);
        carve(s.ffn, b * hp.n_embd);
        used = blocks + b * block_floats();
        carve(s.router, b * hp.n_expert);
        carve(s.expert_gate, hp.n_ff_expert);
        carve(s.expert_up, hp.n_ff_expert);
        carve(s.expert_down, hp.n_embd);
        for (int local = 0; local < 2; ++local) {
            carve(s.rope_cos[local], b * half);
            carve(s.rope_sin[local], b * half);
        }
        if (residency.resident)
            carve(s.logits, uint64_t{std::min(kLogitRows, max_batch)} * hp.vocab);
        return used;
    }

    uint64_t scratch_bytes() { return layout(nullptr) * sizeof(float) + host_scratch_bytes(); }

    // Host memory besides the activation region: angle tables, router
    // scores, and the fallback attention's scores row.
    uint64_t host_scratch_bytes() const {
        const uint64_t half = hp.head_dim_k / 2;
        return (4 * uint64_t{max_batch} * half + (uint64_t{max_batch} + 1) * hp.n_expert +
                (hp.n_expert ? uint64_t{max_batch} * hp.n_embd : 0) + context) *
               sizeof(float);
    }

    uint64_t constant_bytes() const {
        uint64_t floats = w.output_norm.size();
        for (const LayerWeights& L : w.layers)
            for (const auto* v :
                 {&L.attn_norm, &L.ffn_norm, &L.q_norm, &L.k_norm, &L.post_attn_norm,
                  &L.post_ffw_norm, &L.q_bias, &L.k_bias, &L.v_bias})
                floats += v->size();
        return floats * sizeof(float);
    }

    Expected<void> allocate() {
        auto region = steps->allocate(layout(nullptr) * sizeof(float));
        if (!region) return region.error();
        layout(&*region);
        const uint64_t half = hp.head_dim_k / 2;
        for (int local = 0; local < 2; ++local) {
            rope_cos[local].assign(size_t{max_batch} * half, 0);
            rope_sin[local].assign(size_t{max_batch} * half, 0);
        }
        router_scores.assign(size_t{max_batch} * hp.n_expert, 0);
        expert_order.assign(hp.n_expert, 0);
        if (hp.n_expert) zeros.assign(size_t{max_batch} * hp.n_embd, 0);

        const auto constant = [&](const std::vector<float>& v, Act& out) -> Expected<void> {
            if (v.empty()) return {};
            auto a = steps->constant(v);
            if (!a) return a.error();
            out = *a;
            return {};
        };
        if (auto r = constant(w.output_norm, output_norm); !r) return r;
        consts.resize(hp.n_layer);
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            const LayerWeights& L = w.layers[il];
            LayerConstants& C = consts[il];
            for (auto [v, a] : {std::pair{&L.attn_norm, &C.attn_norm},
                                {&L.ffn_norm, &C.ffn_norm},
                                {&L.q_norm, &C.q_norm},
                                {&L.k_norm, &C.k_norm},
                                {&L.post_attn_norm, &C.post_attn_norm},
                                {&L.post_ffw_norm, &C.post_ffw_norm},
                                {&L.q_bias, &C.q_bias},
                                {&L.k_bias, &C.k_bias},
                                {&L.v_bias, &C.v_bias}})
                if (auto r = constant(*v, *a); !r) return r;
        }
        k_cache.clear();
        v_cache.clear();
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            auto k = steps->allocate(uint64_t{context} * k_dim() * kv_element_bytes());
            if (!k) return k.error();
            auto v = steps->allocate(uint64_t{context} * v_dim() * kv_element_bytes());
            if (!v) return v.error();
            k_cache.push_back(*k);
            v_cache.push_back(*v);
        }
        return {};
    }

    // Every matrix the forward pass multiplies by, once each.
    std::vector<const WeightMatrix*> matrices() const {
        std::vector<const WeightMatrix*> all{&*w.output};
        if (embedding_matrix) all.push_back(&*embedding_matrix);
        for (const LayerWeights& L : w.layers) {
            for (const auto* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down, &L.router})
                if (*m) all.push_back(&**m);
            for (const auto* experts : {&L.gate_exps, &L.up_exps, &L.down_exps})
                for (const WeightMatrix& m : *experts) all.push_back(&m);
        }
        return all;
    }

    // Uploads every weight to the resident backend now, so the first token
    // does not pay for it and a weight that does not fit fails the load.
    Expected<void> upload_weights(const std::function<void(uint64_t, uint64_t)>& progress) {
        const auto all = matrices();
        uint64_t total = 0, done = 0;
        for (const WeightMatrix* m : all) total += m->bytes().size();
        const auto& backend = dispatcher.backends().front();
        for (const WeightMatrix* m : all) {
            if (auto h = m->prepared_on(backend); !h) return h.error();
            done += m->bytes().size();
            if (progress) progress(done, total);
        }
        return {};
    }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const Hparams& Model::hparams() const { return impl_->hp; }
const CapacityPlan& Model::capacity() const { return impl_->plan; }
const Residency& Model::residency() const { return impl_->residency; }
const CapacityPlan& Model::device_capacity() const { return impl_->device_plan; }
uint32_t Model::context() const { return impl_->context; }
uint64_t Model::vocab() const { return impl_->hp.vocab; }

Expected<std::unique_ptr<Model>> Model::load(const gguf::File& file, Dispatcher& dispatcher,
                                             KernelRegistry& registry,
                                             const ModelOptions& options) {
    auto impl = std::make_unique<Impl>(file, dispatcher);
    Impl& m = *impl;
    auto hp = read_hparams(file);
    if (!hp) return hp.error();
    m.hp = std::move(*hp);
    m.context = options.context ? options.context : m.hp.n_ctx_train;
    m.max_batch = std::max(1u, std::min(options.max_batch, m.context));
    if (options.kv_kind != FERROX_KIND_F32 && options.kv_kind != FERROX_KIND_F16)
        return make_error("KV cache kind {} is not supported (F32 or F16)",
                          kind_name(options.kv_kind));
    m.kv_kind = options.kv_kind;

    auto uses = weight_uses(file, m.hp);
    if (!uses) return uses.error();
    auto weights = bind_weights(file, m.hp);
    if (!weights) return weights.error();
    m.w = std::move(*weights);
    auto residency = probe_model(file, m.hp, *uses, dispatcher, m.kv_kind, options.allow_resident);
    if (!residency) return residency.error();
    m.residency = std::move(*residency);
    if (m.residency.resident) {
        if (file.find_tensor("output.weight") != nullptr) {
            auto embd = bind_matrix(file, "token_embd.weight", m.hp.vocab, m.hp.n_embd);
            if (!embd) return embd.error();
            m.embedding_matrix = std::move(*embd);
        }
        logger().info(
            "resident decoding on the {} backend: weights, KV cache and activations in its "
            "memory",
            dispatcher.backends().front()->name());
    } else {
        logger().debug("activations in host memory: {}", m.residency.reason);
    }

    CapacityInputs in;
    in.n_layer = m.hp.n_layer;
    in.context = m.context;
    in.n_head_kv = m.hp.n_head_kv;
    in.head_dim_k = m.hp.head_dim_k;
    in.head_dim_v = m.hp.head_dim_v;
    in.kv_element_bytes = static_cast<uint32_t>(m.kv_element_bytes());
    if (m.residency.resident) {
        // The device holds the weights, the KV cache and the activations.
        CapacityInputs device = in;
        for (const WeightMatrix* w : m.matrices()) device.weight_bytes += w->bytes().size();
        device.scratch_bytes = m.layout(nullptr) * sizeof(float) + m.constant_bytes();
        const Backend& backend = *dispatcher.backends().front();
        auto info = backend.device_info(0);
        if (!info) return info.error();
        device.available_bytes = info->memory_free;
        device.available_what =
            fmt::format("free memory of the {} backend's {}", backend.name(), info->name);
        auto device_plan = plan_capacity(device);
        if (!device_plan)
            return make_error("{}: {}", file.path().string(), device_plan.error().message());
        m.device_plan = *device_plan;
        in.kv_element_bytes = 0;  // no KV cache in host memory
        in.scratch_bytes = m.host_scratch_bytes();
    } else {
        in.scratch_bytes = m.scratch_bytes();
    }
    in.weight_bytes = file.mapped_bytes();  // every shard of a split model
    if (options.available_bytes) {
        in.available_bytes = options.available_bytes;
    } else if (auto avail = mem_available_bytes()) {
        in.available_bytes = *avail;
    } else {
        return make_error("cannot read MemAvailable from /proc/meminfo for the capacity plan");
    }
    auto plan = plan_capacity(in);
    if (!plan) return make_error("{}: {}", file.path().string(), plan.error().message());
    m.plan = *plan;

    if (auto r = enforce_registry(registry.seal(), options.registry_strict); !r) return r.error();

    if (m.residency.resident) {
        m.steps =
            make_resident_steps(dispatcher, m.embedding_matrix ? *m.embedding_matrix : *m.w.output);
        if (auto r = m.upload_weights(options.on_upload); !r) return r.error();
    } else {
        m.steps = make_host_steps(dispatcher, *m.w.token_embd, m.hp.n_embd, m.context);
    }
    if (auto r = m.allocate(); !r) return r.error();
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

Expected<void> Model::forward(std::span<const int32_t> tokens, uint32_t pos,
                              std::span<float> logits) {
    Impl& m = *impl_;
    const uint64_t n = tokens.size();
    if (n == 0) return make_error("forward: no tokens");
    if (pos + n > m.context)
        return make_error("forward: positions {}..{} exceed the context of {} (raise -c)", pos,
                          pos + n - 1, m.context);
    const bool all = logits.size() == n * m.hp.vocab;
    if (!logits.empty() && !all && logits.size() != m.hp.vocab)
        return make_error("forward: logits span holds {} floats; expected 0, {} or {}",
                          logits.size(), m.hp.vocab, n * m.hp.vocab);
    for (uint64_t start = 0; start < n; start += m.max_batch) {
        const uint64_t count = std::min<uint64_t>(m.max_batch, n - start);
        const bool last_chunk = start + count == n;
        std::span<float> out;
        if (all)
            out = logits.subspan(start * m.hp.vocab, count * m.hp.vocab);
        else if (last_chunk)
            out = logits;
        // A single-position "all" chunk has vocab floats: that is the last-position path too.
        if (auto r = m.chunk(tokens.subspan(start, count), static_cast<uint32_t>(pos + start), out);
            !r)
            return r;
    }
    return {};
}

}  // namespace ferrox::model
