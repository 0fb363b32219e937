// ResidentSteps: a forward pass in the first backend's own buffers (ABI 1.2).
// Every op is recorded in the kernel registry under its role, as weight
// products are, so `run --json` shows where each one ran.
#include <vector>

#include "ferrox/quant_kind.h"
#include "residency.h"
#include "steps.h"

namespace ferrox::model {
namespace {

ferrox_glu_kind glu_kind(FfnActivation act) {
    return act == FfnActivation::Silu ? FERROX_GLU_SWIGLU : FERROX_GLU_GEGLU;
}

class ResidentSteps final : public Steps {
  public:
    ResidentSteps(Dispatcher& dispatcher, const WeightMatrix& embedding)
        : dispatcher_(dispatcher),
          backend_(dispatcher.resident_backend()),
          embedding_(embedding),
          fused_norm_(fused_norm_available(dispatcher)) {}

    ~ResidentSteps() override {
        for (ferrox_buffer* b : buffers_) backend_.buffer_free(b);
    }

    bool resident() const override { return true; }

    Expected<Act> allocate(uint64_t bytes) override {
        auto buffer = backend_.buffer_alloc(bytes);
        if (!buffer) return buffer.error();
        buffers_.push_back(*buffer);
        return Act{nullptr, {*buffer, 0}};
    }

    Expected<Act> constant(std::span<const float> values) override {
        auto a = allocate(values.size_bytes());
        if (!a) return a;
        if (auto r = upload(values, *a); !r) return r.error();
        return a;
    }

    Expected<void> upload(std::span<const float> src, Act dst) override {
        return backend_.upload(dst.dev.buffer, dst.dev.offset, src.data(), src.size_bytes());
    }

    Expected<void> download(Act src, std::span<float> dst) override {
        return backend_.download(src.dev.buffer, src.dev.offset, dst.data(), dst.size_bytes());
    }

    Expected<void> embed(std::span<const int32_t> ids, float scale, Act out) override {
        if (auto r = dispatcher_.resident_step(FERROX_OP_GET_ROWS, embedding_.kind(), "token_embd");
            !r)
            return r;
        auto handle = embedding_.prepared_on(dispatcher_.backends().front());
        if (!handle) return handle.error();
        return backend_.get_rows(*handle, ids.data(), ids.size(), scale, out.dev);
    }

    Expected<void> project(const WeightMatrix& w, std::string_view role, Act x, uint32_t n,
                           Act y) override {
        return dispatcher_.project_resident(w, role, x.dev, n, y.dev);
    }

    Expected<void> rms_norm(std::string_view role, Act x, Act gamma, uint64_t rows, uint32_t dim,
                            float eps, Act y) override {
        if (auto r = dispatcher_.resident_step(FERROX_OP_RMS_NORM, FERROX_KIND_F32, role); !r)
            return r;
        return backend_.rms_norm(x.dev, gamma.dev, rows, dim, eps, y.dev);
    }

    Expected<void> rope(Act x, Act cos, Act sin, uint32_t n_pos, uint32_t n_heads,
                        uint32_t head_dim, uint32_t n_rot, RopeStyle style) override {
        // probe_model keeps such a model off the resident path; this is the guard.
        if (!rope_entry_rotates(n_rot, head_dim, style))
            return make_error(
                "resident rope: NeoX rotation of {} of {} dims needs an n_rot the ABI's rope "
                "entry does not take",
                n_rot, head_dim);
        if (auto r = dispatcher_.resident_step(FERROX_OP_ROPE, FERROX_KIND_F32, "rope"); !r)
            return r;
        return backend_.rope(x.dev, cos.dev, sin.dev, n_pos, n_heads, head_dim,
                             style == RopeStyle::Neox);
    }

    Expected<void> add(std::string_view role, Act dst, Act src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha) override {
        if (auto r = dispatcher_.resident_step(FERROX_OP_ADD, FERROX_KIND_F32, role); !r) return r;
        return backend_.add(dst.dev, src.dev, rows, dim, src_stride, alpha);
    }

    Expected<void> add_rms_norm(std::string_view norm_role, Act dst, Act src, uint64_t src_stride,
                                float alpha, Act gamma, uint64_t rows, uint32_t dim, float eps,
                                Act y) override {
        if (!fused_norm_) {
            if (auto r = add(roles::kResidual, dst, src, rows, dim, src_stride, alpha); !r)
                return r;
            return rms_norm(norm_role, dst, gamma, rows, dim, eps, y);
        }
        if (auto r = dispatcher_.resident_step(FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, norm_role);
            !r)
            return r;
        return backend_.add_rms_norm(dst.dev, src.dev, src_stride, alpha, gamma.dev, rows, dim, eps,
                                     y.dev);
    }

    Expected<void> glu(FfnActivation act, Act gate, Act up, uint64_t count) override {
        const ferrox_op op = act == FfnActivation::Silu ? FERROX_OP_SWIGLU : FERROX_OP_GEGLU;
        if (auto r = dispatcher_.resident_step(op, FERROX_KIND_F32, "ffn_glu"); !r) return r;
        return backend_.glu(glu_kind(act), gate.dev, up.dev, count);
    }

    Expected<void> store_kv(Act rows, Act cache, ferrox_kind kind, uint64_t count) override {
        if (auto r = dispatcher_.resident_step(FERROX_OP_CONVERT, kind, "kv_store"); !r) return r;
        return backend_.convert(rows.dev, cache.dev, kind, count);
    }

    Expected<void> attention(ferrox_attention_desc desc, Act q, Act keys, Act values, Act out,
                             float softcap) override {
        // choose_residency keeps such a model on the host; never reached.
        if (softcap != 0.0f) return make_error("resident attention: {}", kSoftcapAttention);
        if (auto r = dispatcher_.resident_step(FERROX_OP_ATTENTION, desc.kv_kind, "attention"); !r)
            return r;
        return backend_.attention_resident(desc, q.dev, keys.dev, values.dev, out.dev);
    }

    bool attends_over_cells() const override { return backend_.has_attention_cells(); }

    Expected<void> upload_words(std::span<const uint32_t> src, Act dst) override {
        return backend_.upload(dst.dev.buffer, dst.dev.offset, src.data(), src.size_bytes());
    }

    Expected<void> attention_cells(const ferrox_attention_cells_desc& desc, Act q, Act keys,
                                   Act values, Act cell_index, Act spans, Act out) override {
        if (auto r = dispatcher_.resident_step(FERROX_OP_ATTENTION, desc.kv_kind, "attention"); !r)
            return r;
        return backend_.attention_cells(desc, q.dev, keys.dev, values.dev, cell_index.dev,
                                        spans.dev, out.dev);
    }

  private:
    Dispatcher& dispatcher_;
    Backend& backend_;
    const WeightMatrix& embedding_;
    const bool fused_norm_;  // the backend fuses the residual add with the next norm
    std::vector<ferrox_buffer*> buffers_;
};

}  // namespace

std::unique_ptr<Steps> make_resident_steps(Dispatcher& dispatcher,
                                           const WeightMatrix& embedding_matrix) {
    return std::make_unique<ResidentSteps>(dispatcher, embedding_matrix);
}

}  // namespace ferrox::model
