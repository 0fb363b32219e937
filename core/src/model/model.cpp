#include "ferrox/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>

#include "ferrox/log.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "weights.h"

namespace ferrox::model {

// Buffers sized once for `max_batch` positions: no allocation per token.
struct Scratch {
    std::vector<float> x, xn, router, expert_gate, expert_up, expert_down, scores;
    // The attention block's q, k, v, att, o and the FFN's gate, up, ffn are never
    // live at the same time, so the two blocks lay themselves out in one buffer.
    std::vector<float> blocks;
    std::span<float> q, k, v, att, o, gate, up, ffn;
    std::vector<float> rope_cos[2], rope_sin[2];  // [global, local][position][head_dim / 2]
    std::vector<uint32_t> expert_order;           // router ranking, n_expert
};

struct Model::Impl {
    const gguf::File& file;
    Dispatcher& dispatcher;
    Hparams hp;
    CapacityPlan plan;
    ModelWeights w;
    uint32_t context = 0, max_batch = 0;
    // Per layer: [context][n_kv * head_dim]. Left uninitialised: attention only
    // reads positions already written, and untouched pages cost no memory (a
    // 32K context is reserved, not resident).
    std::vector<std::unique_ptr<std::byte[]>> k_cache, v_cache;
    ferrox_kind kv_kind = FERROX_KIND_F32;
    std::vector<float> host_keys, host_values;  // f16 caches widened for the core's own loop
    Scratch s;

    Impl(const gguf::File& f, Dispatcher& d) : file(f), dispatcher(d) {}

    uint64_t q_dim() const { return uint64_t{hp.n_head} * hp.head_dim_k; }
    uint64_t k_dim() const { return uint64_t{hp.n_head_kv} * hp.head_dim_k; }
    uint64_t v_dim() const { return uint64_t{hp.n_head_kv} * hp.head_dim_v; }
    uint64_t o_dim() const { return uint64_t{hp.n_head} * hp.head_dim_v; }

    // y[n][rows] = x[n][cols] W^T: MATVEC for one position, GEMM for more.
    Expected<void> project(const WeightMatrix& m, std::string_view role, const float* x, uint32_t n,
                           float* y) {
        if (n == 1) return dispatcher.apply(m, role, {x, m.cols()}, {y, m.rows()});
        return dispatcher.apply_batch(m, role, {x, n * m.cols()}, n, {y, n * m.rows()});
    }

    Expected<void> embed(std::span<const int32_t> tokens, float* x) {
        const gguf::Tensor& t = *w.token_embd;
        const uint64_t row = *row_bytes(t.kind(), hp.n_embd);
        const float scale = std::sqrt(static_cast<float>(hp.n_embd));
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int32_t id = tokens[i];
            if (id < 0 || static_cast<uint64_t>(id) >= hp.vocab)
                return make_error("token id {} at batch index {} is outside the vocabulary (0..{})",
                                  id, i, hp.vocab - 1);
            float* dst = x + i * hp.n_embd;
            if (!quant::dequantize_row(t.kind(), t.data().data() + static_cast<uint64_t>(id) * row,
                                       dst, hp.n_embd))
                return make_error("token_embd.weight: cannot read {} rows", kind_name(t.kind()));
            if (hp.embed_scale)
                for (uint32_t j = 0; j < hp.n_embd; ++j) dst[j] *= scale;
        }
        return {};
    }

    Expected<void> attention_block(uint32_t il, uint32_t n, uint32_t pos0) {
        const LayerWeights& L = w.layers[il];
        const uint32_t d = hp.n_embd;
        for (uint32_t i = 0; i < n; ++i)
            ops::rms_norm({&s.x[size_t{i} * d], d}, L.attn_norm, hp.rms_eps,
                          {&s.xn[size_t{i} * d], d});
        if (auto r = project(*L.q, "attn_q", s.xn.data(), n, s.q.data()); !r) return r;
        if (auto r = project(*L.k, "attn_k", s.xn.data(), n, s.k.data()); !r) return r;
        if (auto r = project(*L.v, "attn_v", s.xn.data(), n, s.v.data()); !r) return r;

        const bool local = hp.is_local_layer(il);
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t pos = pos0 + i;
            float* q = &s.q[i * q_dim()];
            float* k = &s.k[i * k_dim()];
            float* v = &s.v[i * v_dim()];
            if (hp.qkv_bias) {
                ops::add({q, q_dim()}, L.q_bias);
                ops::add({k, k_dim()}, L.k_bias);
                ops::add({v, v_dim()}, L.v_bias);
            }
            const uint32_t hd = hp.head_dim_k;
            const size_t angles = size_t{i} * (hd / 2);
            const std::span<const float> cos{&s.rope_cos[local][angles], hd / 2};
            const std::span<const float> sin{&s.rope_sin[local][angles], hd / 2};
            for (uint32_t h = 0; h < hp.n_head; ++h) {
                std::span<float> head{q + size_t{h} * hd, hd};
                if (hp.qk_norm) ops::rms_norm(head, L.q_norm, hp.rms_eps, head);
                ops::rope_rotate(head, cos, sin, hp.rope);
            }
            for (uint32_t h = 0; h < hp.n_head_kv; ++h) {
                std::span<float> head{k + size_t{h} * hd, hd};
                if (hp.qk_norm) ops::rms_norm(head, L.k_norm, hp.rms_eps, head);
                ops::rope_rotate(head, cos, sin, hp.rope);
            }
            store_kv(k_cache[il].get(), pos * k_dim(), {k, k_dim()});
            store_kv(v_cache[il].get(), pos * v_dim(), {v, v_dim()});
        }
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
        desc.q = s.q.data();
        desc.keys = k_cache[il].get();
        desc.values = v_cache[il].get();
        desc.out = s.att.data();
        auto attended = dispatcher.attention(desc, "attention", [&] { host_attention(desc); });
        if (!attended) return attended;
        if (auto r = project(*L.o, "attn_output", s.att.data(), n, s.o.data()); !r) return r;
        for (uint32_t i = 0; i < n; ++i) {
            std::span<float> o{&s.o[size_t{i} * d], d};
            if (hp.post_norms) ops::rms_norm(o, L.post_attn_norm, hp.rms_eps, o);
            ops::add({&s.x[size_t{i} * d], d}, o);
        }
        return {};
    }

    // cos/sin per position of this chunk, once for global and once for local
    // (sliding-window) layers: every head and layer of a kind shares them.
    void rope_tables(uint32_t n, uint32_t pos0) {
        const uint32_t half = hp.head_dim_k / 2;
        for (int local = 0; local < 2; ++local) {
            if (local && hp.sliding_window == 0) break;
            const float base = local ? hp.rope_base_local : hp.rope_base;
            const float freq_scale = local ? 1.0f : hp.rope_freq_scale;
            for (uint32_t i = 0; i < n; ++i)
                ops::rope_angles(pos0 + i, base, freq_scale,
                                 {&s.rope_cos[local][size_t{i} * half], half},
                                 {&s.rope_sin[local][size_t{i} * half], half});
        }
    }

    // F32 and F16 are one-element blocks: the kind table's block size is the element's.
    size_t kv_element_bytes() const { return kind_traits(kv_kind)->block_bytes; }

    // Writes one K or V row (`row.size()` values at element `offset`) in the cache's kind.
    void store_kv(std::byte* cache, uint64_t offset, std::span<const float> row) const {
        if (kv_kind == FERROX_KIND_F32) {
            std::memcpy(cache + offset * sizeof(float), row.data(), row.size_bytes());
            return;
        }
        auto* half = reinterpret_cast<uint16_t*>(cache) + offset;
        for (size_t i = 0; i < row.size(); ++i) half[i] = quant::fp32_to_fp16(row[i]);
    }

    // The first `count` elements of a cache as floats: in place for f32,
    // widened into `scratch` for f16.
    const float* widened(const void* cache, uint64_t count, std::vector<float>& scratch) const {
        if (kv_kind == FERROX_KIND_F32) return static_cast<const float*>(cache);
        scratch.resize(count);
        const auto* half = static_cast<const uint16_t*>(cache);
        for (uint64_t i = 0; i < count; ++i) scratch[i] = quant::fp16_to_fp32(half[i]);
        return scratch.data();
    }

    // The core's own loop, for backends without an attention entry.
    void host_attention(const ferrox_attention_desc& desc) {
        const ops::AttentionShape shape{desc.n_head, desc.n_head_kv, desc.head_dim_k,
                                        desc.head_dim_v, desc.scale};
        const uint64_t rows = uint64_t{desc.pos0} + desc.n_query;
        const float* keys = widened(desc.keys, rows * k_dim(), host_keys);
        const float* values = widened(desc.values, rows * v_dim(), host_values);
        for (uint32_t i = 0; i < desc.n_query; ++i) {
            const uint32_t pos = desc.pos0 + i;
            const uint32_t first = desc.window && pos + 1 > desc.window ? pos + 1 - desc.window : 0;
            ops::attend(shape, {desc.q + i * q_dim(), q_dim()}, keys, values, first, pos, s.scores,
                        {desc.out + i * o_dim(), o_dim()});
        }
    }

    Expected<void> dense_ffn(const LayerWeights& L, uint32_t n) {
        if (auto r = project(*L.gate, "ffn_gate", s.xn.data(), n, s.gate.data()); !r) return r;
        if (auto r = project(*L.up, "ffn_up", s.xn.data(), n, s.up.data()); !r) return r;
        ops::glu({s.gate.data(), size_t{n} * hp.n_ff}, s.up, hp.activation);
        return project(*L.down, "ffn_down", s.gate.data(), n, s.ffn.data());
    }

    // Router softmax, top-k, optional renormalisation; each chosen expert's FFN
    // weighted into the output. The router weight scales the activation before
    // the (linear) down projection.
    Expected<void> moe_ffn(const LayerWeights& L, uint32_t n) {
        const uint32_t d = hp.n_embd, f = hp.n_ff_expert;
        std::fill_n(s.ffn.begin(), size_t{n} * d, 0.0f);
        std::vector<uint32_t>& order = s.expert_order;
        for (uint32_t i = 0; i < n; ++i) {
            const std::span<const float> xi{&s.xn[size_t{i} * d], d};
            std::span<float> probs{s.router.data(), hp.n_expert};
            if (auto r = dispatcher.apply(*L.router, "moe_router", xi, probs); !r) return r;
            ops::softmax(probs);
            std::iota(order.begin(), order.end(), 0u);
            std::partial_sort(order.begin(), order.begin() + hp.n_expert_used, order.end(),
                              [&](uint32_t a, uint32_t b) { return probs[a] > probs[b]; });
            float total = 0;
            for (uint32_t j = 0; j < hp.n_expert_used; ++j) total += probs[order[j]];
            for (uint32_t j = 0; j < hp.n_expert_used; ++j) {
                const uint32_t e = order[j];
                const float weight = hp.expert_weights_norm ? probs[e] / total : probs[e];
                std::span<float> g{s.expert_gate.data(), f}, u{s.expert_up.data(), f};
                if (auto r = dispatcher.apply(L.gate_exps[e], "ffn_gate_exps", xi, g); !r) return r;
                if (auto r = dispatcher.apply(L.up_exps[e], "ffn_up_exps", xi, u); !r) return r;
                ops::glu(g, u, hp.activation);
                for (float& a : g) a *= weight;
                std::span<float> out{s.expert_down.data(), d};
                if (auto r = dispatcher.apply(L.down_exps[e], "ffn_down_exps", g, out); !r)
                    return r;
                ops::add({&s.ffn[size_t{i} * d], d}, out);
            }
        }
        return {};
    }

    Expected<void> ffn_block(uint32_t il, uint32_t n) {
        const LayerWeights& L = w.layers[il];
        const uint32_t d = hp.n_embd;
        for (uint32_t i = 0; i < n; ++i)
            ops::rms_norm({&s.x[size_t{i} * d], d}, L.ffn_norm, hp.rms_eps,
                          {&s.xn[size_t{i} * d], d});
        auto r = hp.n_expert == 0 ? dense_ffn(L, n) : moe_ffn(L, n);
        if (!r) return r;
        for (uint32_t i = 0; i < n; ++i) {
            std::span<float> y{&s.ffn[size_t{i} * d], d};
            if (hp.post_norms) ops::rms_norm(y, L.post_ffw_norm, hp.rms_eps, y);
            ops::add({&s.x[size_t{i} * d], d}, y);
        }
        return {};
    }

    // One chunk of at most max_batch positions. `logits`: empty, vocab (last
    // position) or n * vocab (each position).
    Expected<void> chunk(std::span<const int32_t> tokens, uint32_t pos0, std::span<float> logits) {
        const auto n = static_cast<uint32_t>(tokens.size());
        const uint32_t d = hp.n_embd;
        if (auto r = embed(tokens, s.x.data()); !r) return r;
        rope_tables(n, pos0);
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            if (auto r = attention_block(il, n, pos0); !r) return r;
            if (auto r = ffn_block(il, n); !r) return r;
        }
        if (logits.empty()) return {};
        if (logits.size() == hp.vocab) {
            std::span<float> last{&s.xn[0], d};
            ops::rms_norm({&s.x[size_t{n - 1} * d], d}, w.output_norm, hp.rms_eps, last);
            return dispatcher.apply(*w.output, "output", last, logits);
        }
        for (uint32_t i = 0; i < n; ++i)
            ops::rms_norm({&s.x[size_t{i} * d], d}, w.output_norm, hp.rms_eps,
                          {&s.xn[size_t{i} * d], d});
        return project(*w.output, "output", s.xn.data(), n, logits.data());
    }

    void allocate_scratch() {
        const size_t b = max_batch;
        const size_t ff = std::max<size_t>(hp.n_ff, 1);
        s.x.assign(b * hp.n_embd, 0);
        s.xn.assign(b * hp.n_embd, 0);
        s.blocks.assign(b * block_floats(), 0);
        std::span<float> rest = s.blocks;
        const auto carve = [&rest](size_t floats) {
            std::span<float> part = rest.first(floats);
            rest = rest.subspan(floats);
            return part;
        };
        s.q = carve(b * q_dim());
        s.k = carve(b * k_dim());
        s.v = carve(b * v_dim());
        s.att = carve(b * o_dim());
        s.o = carve(b * hp.n_embd);
        rest = s.blocks;  // the FFN block starts over
        s.gate = carve(b * ff);
        s.up = carve(b * ff);
        s.ffn = carve(b * hp.n_embd);
        s.router.assign(hp.n_expert, 0);
        s.expert_order.assign(hp.n_expert, 0);
        s.expert_gate.assign(hp.n_ff_expert, 0);
        s.expert_up.assign(hp.n_ff_expert, 0);
        s.expert_down.assign(hp.n_embd, 0);
        s.scores.assign(context, 0);
        for (int local = 0; local < 2; ++local) {
            s.rope_cos[local].assign(b * (hp.head_dim_k / 2), 0);
            s.rope_sin[local].assign(b * (hp.head_dim_k / 2), 0);
        }
        k_cache.clear();
        v_cache.clear();
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            k_cache.push_back(std::make_unique_for_overwrite<std::byte[]>(context * k_dim() *
                                                                          kv_element_bytes()));
            v_cache.push_back(std::make_unique_for_overwrite<std::byte[]>(context * v_dim() *
                                                                          kv_element_bytes()));
        }
    }

    // Per position: the larger of the attention block's and the FFN's buffers.
    uint64_t block_floats() const {
        const uint64_t attention = q_dim() + k_dim() + v_dim() + o_dim() + hp.n_embd;
        const uint64_t ffn = 2 * std::max<uint64_t>(hp.n_ff, 1) + hp.n_embd;
        return std::max(attention, ffn);
    }

    uint64_t scratch_bytes() const {
        const uint64_t b = max_batch;
        const uint64_t floats =
            b * (2 * uint64_t{hp.n_embd} + block_floats() + 2 * uint64_t{hp.head_dim_k}) +
            hp.n_expert + 2 * uint64_t{hp.n_ff_expert} + hp.n_embd + context;
        return floats * sizeof(float);
    }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const Hparams& Model::hparams() const { return impl_->hp; }
const CapacityPlan& Model::capacity() const { return impl_->plan; }
uint32_t Model::context() const { return impl_->context; }
uint64_t Model::vocab() const { return impl_->hp.vocab; }

Expected<std::unique_ptr<Model>> Model::load(const gguf::File& file, Dispatcher& dispatcher,
                                             KernelRegistry& registry,
                                             const ModelOptions& options) {
    auto impl = std::make_unique<Impl>(file, dispatcher);
    auto hp = read_hparams(file);
    if (!hp) return hp.error();
    impl->hp = std::move(*hp);
    impl->context = options.context ? options.context : impl->hp.n_ctx_train;
    impl->max_batch = std::max(1u, std::min(options.max_batch, impl->context));
    if (options.kv_kind != FERROX_KIND_F32 && options.kv_kind != FERROX_KIND_F16)
        return make_error("KV cache kind {} is not supported (F32 or F16)",
                          kind_name(options.kv_kind));
    impl->kv_kind = options.kv_kind;

    CapacityInputs in;
    in.weight_bytes = file.mapping()->bytes().size();
    in.n_layer = impl->hp.n_layer;
    in.context = impl->context;
    in.n_head_kv = impl->hp.n_head_kv;
    in.head_dim_k = impl->hp.head_dim_k;
    in.head_dim_v = impl->hp.head_dim_v;
    in.kv_element_bytes = static_cast<uint32_t>(impl->kv_element_bytes());
    in.scratch_bytes = impl->scratch_bytes();
    if (options.available_bytes) {
        in.available_bytes = options.available_bytes;
    } else if (auto avail = mem_available_bytes()) {
        in.available_bytes = *avail;
    } else {
        return make_error("cannot read MemAvailable from /proc/meminfo for the capacity plan");
    }
    auto plan = plan_capacity(in);
    if (!plan) return make_error("{}: {}", file.path().string(), plan.error().message());
    impl->plan = *plan;

    auto uses = weight_uses(file, impl->hp);
    if (!uses) return uses.error();
    probe_weights(*uses, dispatcher, impl->kv_kind);
    if (auto r = enforce_registry(registry.seal(), options.registry_strict); !r) return r.error();

    auto weights = bind_weights(file, impl->hp);
    if (!weights) return weights.error();
    impl->w = std::move(*weights);
    impl->allocate_scratch();
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
