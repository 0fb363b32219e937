// HostSteps: activations and the KV cache in host memory. Weight products and
// attention go through the Dispatcher (whichever backend has the kernel);
// norms, RoPE, residual adds and activations are the core's own loops.
#include <cstring>
#include <vector>

#include "ferrox/model/ops.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "steps.h"

namespace ferrox::model {
namespace {

class HostSteps final : public Steps {
  public:
    HostSteps(Dispatcher& dispatcher, const gguf::Tensor& embedding, uint32_t n_embd,
              uint32_t max_context)
        : dispatcher_(dispatcher), embedding_(embedding), n_embd_(n_embd) {
        scores_.resize(max_context);
    }

    bool resident() const override { return false; }

    Expected<Act> allocate(uint64_t bytes) override {
        // Uninitialised: attention reads only positions already written, and
        // pages never touched cost no memory (a long context is reserved, not
        // resident).
        blocks_.push_back(std::make_unique_for_overwrite<std::byte[]>(bytes));
        return Act{blocks_.back().get()};
    }

    Expected<Act> constant(std::span<const float> values) override {
        // Host ops only read constants; the cast lets them share Act.
        return Act{reinterpret_cast<std::byte*>(const_cast<float*>(values.data()))};
    }

    Expected<void> upload(std::span<const float> src, Act dst) override {
        if (dst.f32() != src.data()) std::memcpy(dst.host, src.data(), src.size_bytes());
        return {};
    }

    Expected<void> download(Act src, std::span<float> dst) override {
        if (src.f32() != dst.data()) std::memcpy(dst.data(), src.host, dst.size_bytes());
        return {};
    }

    Expected<void> embed(std::span<const int32_t> ids, float scale, Act out) override {
        const uint64_t row = *row_bytes(embedding_.kind(), n_embd_);
        for (size_t i = 0; i < ids.size(); ++i) {
            float* dst = out.f32() + i * n_embd_;
            const std::byte* src = embedding_.data().data() + static_cast<uint64_t>(ids[i]) * row;
            if (!quant::dequantize_row(embedding_.kind(), src, dst, n_embd_))
                return make_error("token_embd.weight: cannot read {} rows",
                                  kind_name(embedding_.kind()));
            if (scale != 1.0f)
                for (uint32_t j = 0; j < n_embd_; ++j) dst[j] *= scale;
        }
        return {};
    }

    Expected<void> project(const WeightMatrix& w, std::string_view role, Act x, uint32_t n,
                           Act y) override {
        if (n == 1) return dispatcher_.apply(w, role, {x.f32(), w.cols()}, {y.f32(), w.rows()});
        return dispatcher_.apply_batch(w, role, {x.f32(), n * w.cols()}, n,
                                       {y.f32(), n * w.rows()});
    }

    Expected<void> project_many(std::span<const Projection> products,
                                std::string_view batch_role) override {
        jobs_.clear();
        for (const Projection& p : products)
            jobs_.push_back({p.w, p.role, {p.x.f32(), p.w->cols()}, {p.y.f32(), p.w->rows()}});
        return dispatcher_.apply_many(jobs_, batch_role);
    }

    Expected<void> rms_norm(std::string_view, Act x, Act gamma, uint64_t rows, uint32_t dim,
                            float eps, Act y) override {
        const std::span<const float> g{gamma.f32(), dim};
        for (uint64_t r = 0; r < rows; ++r)
            ops::rms_norm({x.f32() + r * dim, dim}, g, eps, {y.f32() + r * dim, dim});
        return {};
    }

    Expected<void> rope(Act x, Act cos, Act sin, uint32_t n_pos, uint32_t n_heads,
                        uint32_t head_dim, uint32_t n_rot, RopeStyle style) override {
        // Only the rotated prefix of each head, with the first n_rot / 2 angles
        // of the position's table; the other dimensions are left untouched.
        const uint32_t half = head_dim / 2;
        for (uint32_t p = 0; p < n_pos; ++p) {
            const std::span<const float> c{cos.f32() + size_t{p} * half, n_rot / 2};
            const std::span<const float> s{sin.f32() + size_t{p} * half, n_rot / 2};
            for (uint32_t h = 0; h < n_heads; ++h)
                ops::rope_rotate({x.f32() + (size_t{p} * n_heads + h) * head_dim, n_rot}, c, s,
                                 style);
        }
        return {};
    }

    Expected<void> add(std::string_view, Act dst, Act src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha) override {
        for (uint64_t r = 0; r < rows; ++r) {
            float* d = dst.f32() + r * dim;
            const float* s = src.f32() + r * src_stride;
            if (alpha == 1.0f)
                ops::add({d, dim}, {s, dim});
            else
                for (uint32_t i = 0; i < dim; ++i) d[i] += alpha * s[i];
        }
        return {};
    }

    Expected<void> add_rms_norm(std::string_view norm_role, Act dst, Act src, uint64_t src_stride,
                                float alpha, Act gamma, uint64_t rows, uint32_t dim, float eps,
                                Act y) override {
        if (auto r = add({}, dst, src, rows, dim, src_stride, alpha); !r) return r;
        return rms_norm(norm_role, dst, gamma, rows, dim, eps, y);
    }

    Expected<void> glu(FfnActivation act, Act gate, Act up, uint64_t count) override {
        ops::glu({gate.f32(), count}, {up.f32(), count}, act);
        return {};
    }

    Expected<void> store_kv(Act rows, Act cache, ferrox_kind kind, uint64_t count) override {
        if (kind == FERROX_KIND_F32) {
            std::memcpy(cache.host, rows.host, count * sizeof(float));
            return {};
        }
        if (kind == FERROX_KIND_F16) {
            auto* half = reinterpret_cast<uint16_t*>(cache.host);
            for (uint64_t i = 0; i < count; ++i) half[i] = quant::fp32_to_fp16(rows.f32()[i]);
            return {};
        }
        // Q8_0 / Q4_0: the reference block quantizer (gguf's, bit for bit),
        // each block on its own, so a row's bytes never depend on the batch.
        if (!quant::quantize_row(kind, rows.f32(), cache.host, count))
            return make_error("store_kv: no quantizer for a {} KV cache of {} elements",
                              kind_name(kind), count);
        return {};
    }

    Expected<void> attention(ferrox_attention_desc desc, Act q, Act keys, Act values, Act out,
                             const Act* sinks) override {
        desc.sinks = sinks ? sinks->f32() : nullptr;
        desc.q = q.f32();
        desc.keys = keys.host;
        desc.values = values.host;
        desc.out = out.f32();
        return dispatcher_.attention(desc, "attention", [&] { fallback_attention(desc); });
    }

    Expected<void> delta_net(const ferrox_delta_net_desc& desc) override {
        return dispatch_delta_net(dispatcher_, desc);
    }
    std::string delta_net_runner() const override { return dispatcher_.delta_net_runner(); }

  private:
    // The first `count` elements of a cache of `kind` as floats: in place
    // for f32, widened into `scratch` otherwise.
    static const float* widened(ferrox_kind kind, const void* cache, uint64_t count,
                                std::vector<float>& scratch) {
        if (kind == FERROX_KIND_F32) return static_cast<const float*>(cache);
        scratch.resize(count);
        // f16 widened, q8_0 / q4_0 dequantized: the reference readers.
        (void)quant::dequantize_row(kind, cache, scratch.data(), count);
        return scratch.data();
    }

    // The core's own loop, for backends without an attention entry.
    void fallback_attention(const ferrox_attention_desc& desc) {
        const ops::AttentionShape shape{desc.n_head,     desc.n_head_kv, desc.head_dim_k,
                                        desc.head_dim_v, desc.scale,     desc.softcap,
                                        desc.sinks};
        const uint64_t q_dim = uint64_t{desc.n_head} * desc.head_dim_k;
        const uint64_t o_dim = uint64_t{desc.n_head} * desc.head_dim_v;
        const uint64_t rows = uint64_t{desc.pos0} + desc.n_query;
        // The core always fills value_kind (its descriptors are its own size).
        const float* keys =
            widened(desc.kv_kind, desc.keys, rows * desc.n_head_kv * desc.head_dim_k, keys_);
        const float* values =
            widened(desc.value_kind, desc.values, rows * desc.n_head_kv * desc.head_dim_v, values_);
        const uint32_t end = desc.pos0 + desc.n_query - 1;  // the last key row
        for (uint32_t i = 0; i < desc.n_query; ++i) {
            const uint32_t pos = desc.pos0 + i;
            const uint32_t first = desc.window && pos + 1 > desc.window ? pos + 1 - desc.window : 0;
            const uint32_t last = end - pos > desc.lookahead ? pos + desc.lookahead : end;
            ops::attend(shape, {desc.q + i * q_dim, q_dim}, keys, values, first, last, scores_,
                        {desc.out + i * o_dim, o_dim});
        }
    }

    Dispatcher& dispatcher_;
    const gguf::Tensor& embedding_;
    uint32_t n_embd_;
    std::vector<std::unique_ptr<std::byte[]>> blocks_;
    std::vector<float> scores_, keys_, values_;  // fallback attention's scratch
    std::vector<MatvecJob> jobs_;                // project_many's, reused
};

}  // namespace

std::unique_ptr<Steps> make_host_steps(Dispatcher& dispatcher, const gguf::Tensor& embedding,
                                       uint32_t n_embd, uint32_t max_context) {
    return std::make_unique<HostSteps>(dispatcher, embedding, n_embd, max_context);
}

}  // namespace ferrox::model
