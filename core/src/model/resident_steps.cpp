// ResidentSteps: a forward pass in the first backend's own buffers (ABI 1.2).
// Every op is recorded in the kernel registry under its role, as weight
// products are, so `run --json` shows where each one ran.
//
// The same class, tracing, runs nothing: each op it would issue goes into a
// PassTrace instead. The probe runs the decoder over it, so what it predicts
// is what these steps issue, by construction (one mapping from a Steps call
// to its op, kind and role: this file's).
#include <algorithm>
#include <vector>

#include "ferrox/model/architecture.h"
#include "ferrox/model/resident_ops.h"
#include "ferrox/quant_kind.h"
#include "residency.h"
#include "steps.h"

namespace ferrox::model {
namespace {

// The glu entry's variant for an activation, and the op that names its kernel.
struct GluEntry {
    ferrox_glu_kind kind;
    ferrox_op op;
};
GluEntry glu_entry(FfnActivation act) {
    switch (act) {
        case FfnActivation::Silu:
            return {FERROX_GLU_SWIGLU, FERROX_OP_SWIGLU};
        case FfnActivation::GeluTanh:
            return {FERROX_GLU_GEGLU, FERROX_OP_GEGLU};
        case FfnActivation::SwigluOai:
            return {FERROX_GLU_SWIGLU_OAI, FERROX_OP_SWIGLU_OAI};
    }
    return {FERROX_GLU_SWIGLU, FERROX_OP_SWIGLU};  // unreachable: every activation is listed
}

class ResidentSteps final : public Steps {
  public:
    // `trace`: record into it and run nothing (the dispatcher is only asked
    // what the backend offers, and it need not be resident-capable).
    // `fused_norm`: whether the backend fuses the residual add with the next
    // norm (fused_norm_available), which decides the ops add_rms_norm issues.
    ResidentSteps(Dispatcher& dispatcher, const WeightMatrix& embedding, PassTrace* trace,
                  bool fused_norm)
        : dispatcher_(dispatcher),
          backend_(dispatcher.resident_capable() ? &dispatcher.resident_backend() : nullptr),
          embedding_(embedding),
          fused_norm_(fused_norm),
          over_cells_(backend_ && backend_->has_attention_cells()),
          trace_(trace) {}

    ~ResidentSteps() override {
        for (ferrox_buffer* b : buffers_) backend_->buffer_free(b);
    }

    bool resident() const override { return true; }

    Expected<Act> allocate(uint64_t bytes) override {
        if (trace_) return Act{};
        auto buffer = backend_->buffer_alloc(bytes);
        if (!buffer) return buffer.error();
        buffers_.push_back(*buffer);
        return Act{nullptr, {*buffer, 0}};
    }

    Expected<Act> constant(std::span<const float> values) override {
        if (trace_) return Act{};
        auto a = allocate(values.size_bytes());
        if (!a) return a;
        if (auto r = upload(values, *a); !r) return r.error();
        return a;
    }

    Expected<void> upload(std::span<const float> src, Act dst) override {
        if (trace_) return {};
        return backend_->upload(dst.dev.buffer, dst.dev.offset, src.data(), src.size_bytes());
    }

    Expected<void> download(Act src, std::span<float> dst) override {
        if (trace_) {  // defined values for what the host reads back (MoE router scores)
            std::fill(dst.begin(), dst.end(), 0.0f);
            return {};
        }
        return backend_->download(src.dev.buffer, src.dev.offset, dst.data(), dst.size_bytes());
    }

    Expected<void> embed(std::span<const int32_t> ids, float scale, Act out) override {
        if (auto r = step(FERROX_OP_GET_ROWS, embedding_.kind(), roles::kEmbedding); !r || trace_)
            return r;
        auto handle = embedding_.prepared_on(dispatcher_.backends().front());
        if (!handle) return handle.error();
        return backend_->get_rows(*handle, ids.data(), ids.size(), scale, out.dev);
    }

    Expected<void> project(const WeightMatrix& w, std::string_view role, Act x, uint32_t n,
                           Act y) override {
        if (trace_) return step(projection_op(n), w.kind(), role);
        return dispatcher_.project_resident(w, role, x.dev, n, y.dev);
    }

    Expected<void> rms_norm(std::string_view role, Act x, Act gamma, uint64_t rows, uint32_t dim,
                            float eps, Act y) override {
        if (auto r = step(FERROX_OP_RMS_NORM, FERROX_KIND_F32, role); !r || trace_) return r;
        return backend_->rms_norm(x.dev, gamma.dev, rows, dim, eps, y.dev);
    }

    Expected<void> rope(Act x, Act cos, Act sin, uint32_t n_pos, uint32_t n_heads,
                        uint32_t head_dim, uint32_t n_rot, RopeStyle style) override {
        // The trace tells the probe, which keeps such a model on the host.
        if (!rope_entry_rotates(n_rot, head_dim, style))
            if (auto r = refuse(fmt::format("the ABI's rope entry cannot rotate {} of {} dims in "
                                            "NeoX pairs (it takes no n_rot)",
                                            n_rot, head_dim));
                !r)
                return r;
        if (auto r = step(FERROX_OP_ROPE, FERROX_KIND_F32, roles::kRope); !r || trace_) return r;
        return backend_->rope(x.dev, cos.dev, sin.dev, n_pos, n_heads, head_dim,
                              style == RopeStyle::Neox);
    }

    Expected<void> add(std::string_view role, Act dst, Act src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha) override {
        if (auto r = step(FERROX_OP_ADD, FERROX_KIND_F32, role); !r || trace_) return r;
        return backend_->add(dst.dev, src.dev, rows, dim, src_stride, alpha);
    }

    Expected<void> add_rms_norm(std::string_view norm_role, Act dst, Act src, uint64_t src_stride,
                                float alpha, Act gamma, uint64_t rows, uint32_t dim, float eps,
                                Act y) override {
        if (!fused_norm_) {
            if (auto r = add(roles::kResidual, dst, src, rows, dim, src_stride, alpha); !r)
                return r;
            return rms_norm(norm_role, dst, gamma, rows, dim, eps, y);
        }
        if (auto r = step(FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, norm_role); !r || trace_)
            return r;
        return backend_->add_rms_norm(dst.dev, src.dev, src_stride, alpha, gamma.dev, rows, dim,
                                      eps, y.dev);
    }

    Expected<void> glu(FfnActivation act, Act gate, Act up, uint64_t count) override {
        const GluEntry entry = glu_entry(act);
        if (auto r = step(entry.op, FERROX_KIND_F32, roles::kGlu); !r || trace_) return r;
        return backend_->glu(entry.kind, gate.dev, up.dev, count);
    }

    Expected<void> store_kv(Act rows, Act cache, ferrox_kind kind, uint64_t count) override {
        if (auto r = step(FERROX_OP_CONVERT, kind, roles::kKvStore); !r || trace_) return r;
        return backend_->convert(rows.dev, cache.dev, kind, count);
    }

    Expected<void> attention(ferrox_attention_desc desc, Act q, Act keys, Act values, Act out,
                             const Act* sinks) override {
        // The 1.2 entry takes no sink tensor: sinks reach a resident
        // backend through attention_cells only.
        if (sinks)
            if (auto r = refuse("attention sinks reach a resident backend only through its "
                                "attention_cells entry (ABI 1.5)");
                !r)
                return r;
        // Nor can it be told a lookahead: its rows see positions up to their own.
        if (desc.lookahead != 0)
            if (auto r = refuse("non-causal attention reaches a resident backend only through "
                                "its attention_cells entry (ABI 1.3)");
                !r)
                return r;
        if (auto r = attention_step(desc.kv_kind, desc.value_kind,
                                    {desc.softcap != 0.0f, sinks != nullptr});
            !r || trace_)
            return r;
        return backend_->attention_resident(desc, q.dev, keys.dev, values.dev, out.dev);
    }

    bool attends_over_cells() const override { return over_cells_; }

    Expected<void> upload_words(std::span<const uint32_t> src, Act dst) override {
        if (trace_) return {};
        return backend_->upload(dst.dev.buffer, dst.dev.offset, src.data(), src.size_bytes());
    }

    Expected<void> attention_cells(ferrox_attention_cells_desc desc, Act q, Act keys, Act values,
                                   Act cell_index, Act spans, Act out, const Act* sinks) override {
        if (auto r = attention_step(desc.kv_kind, desc.value_kind,
                                    {desc.softcap != 0.0f, sinks != nullptr});
            !r || trace_)
            return r;
        if (sinks) desc.sinks = sinks->dev;
        return backend_->attention_cells(desc, q.dev, keys.dev, values.dev, cell_index.dev,
                                         spans.dev, out.dev);
    }

    // Host memory whatever the steps: dispatched like HostSteps' (ABI 1.9).
    Expected<void> delta_net(const ferrox_delta_net_desc& desc) override {
        if (trace_) {
            trace_->delta_net = true;
            return {};
        }
        return dispatch_delta_net(dispatcher_, desc);
    }
    std::string delta_net_runner() const override { return dispatcher_.delta_net_runner(); }

  private:
    // The op about to run: recorded in the registry (an error when the
    // backend lacks it), or into the trace.
    Expected<void> step(ferrox_op op, ferrox_kind kind, std::string_view role) {
        return step(op, kind, kind, role);
    }
    Expected<void> step(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind,
                        std::string_view role) {
        if (!trace_) return dispatcher_.resident_step(op, kind, value_kind, role);
        const ResidentOp issued{op, kind, role, value_kind};
        if (std::find(trace_->ops.begin(), trace_->ops.end(), issued) == trace_->ops.end())
            trace_->ops.push_back(issued);
        return {};
    }

    // Either attention entry: a soft cap needs an ABI 1.4 plugin, sinks 1.5.
    Expected<void> attention_step(ferrox_kind key_kind, ferrox_kind value_kind,
                                  AttentionNeeds needs) {
        if (needs.softcap || needs.sinks) {
            if (trace_) {
                trace_->attention_needs.softcap |= needs.softcap;
                trace_->attention_needs.sinks |= needs.sinks;
            }
            const std::string why =
                backend_ ? attention_refusal(*backend_, needs) : std::string("no resident backend");
            if (!why.empty())
                if (auto r = refuse(why); !r) return r;
        }
        return step(FERROX_OP_ATTENTION, key_kind, value_kind, roles::kAttention);
    }

    // A call the ABI's resident entries cannot express: noted by a trace (the
    // first reason wins), an error when running (the probe kept it from here).
    Expected<void> refuse(std::string why) {
        if (!trace_) return make_error("resident steps: {}", why);
        if (trace_->refusal.empty()) trace_->refusal = std::move(why);
        return {};
    }

    Dispatcher& dispatcher_;
    Backend* backend_;  // null only when tracing for a backend that keeps no activations
    const WeightMatrix& embedding_;
    const bool fused_norm_;  // the backend fuses the residual add with the next norm
    const bool over_cells_;  // ABI 1.3 attention over cell lists
    PassTrace* trace_;
    std::vector<ferrox_buffer*> buffers_;
};

}  // namespace

std::unique_ptr<Steps> make_resident_steps(Dispatcher& dispatcher,
                                           const WeightMatrix& embedding_matrix) {
    return std::make_unique<ResidentSteps>(dispatcher, embedding_matrix, nullptr,
                                           fused_norm_available(dispatcher));
}

std::unique_ptr<Steps> make_tracing_steps(Dispatcher& dispatcher,
                                          const WeightMatrix& embedding_matrix, PassTrace& trace) {
    return std::make_unique<ResidentSteps>(dispatcher, embedding_matrix, &trace,
                                           fused_norm_available(dispatcher));
}

std::vector<ResidentElementOp> resident_element_ops() {
    // Tracing steps on no backend: each call below records the op the same
    // call records in a running pass (this file's step() calls), nothing runs.
    KernelRegistry registry;
    Dispatcher no_backend({}, registry);
    auto embedding = WeightMatrix::owned("token_embd", FERROX_KIND_F32, 1, 1,
                                         std::vector<std::byte>(sizeof(float)));
    if (!embedding) return {};
    PassTrace trace;
    ResidentSteps apart(no_backend, *embedding, &trace, false);
    ResidentSteps fused(no_backend, *embedding, &trace, true);
    const Act none{};
    // Each entry a decoder block calls, with every variant a pass can take:
    // norms fused or apart (as the backend offers), every FFN activation
    // of the architecture rows, every KV cache kind.
    (void)apart.rms_norm(roles::kAttnNorm, none, none, 1, 1, 0.0f, none);
    (void)fused.add_rms_norm(roles::kFfnNorm, none, none, 0, 1.0f, none, 1, 1, 0.0f, none);
    (void)apart.rope(none, none, none, 1, 1, 2, 2, RopeStyle::Normal);
    (void)apart.add_rms_norm(roles::kFfnNorm, none, none, 0, 1.0f, none, 1, 1, 0.0f, none);
    for (const ArchSpec& arch : architectures()) (void)apart.glu(arch.activation, none, none, 1);
    for (ferrox_kind kv : kKvCacheKinds) (void)apart.store_kv(none, none, kv, 1);
    for (ferrox_kind kv : kKvCacheKinds) {
        ferrox_attention_desc desc{};
        desc.kv_kind = desc.value_kind = kv;
        (void)apart.attention(desc, none, none, none, none, nullptr);
    }
    std::vector<ResidentElementOp> ops;
    for (const ResidentOp& op : trace.ops) {
        const ResidentElementOp element{op.op, op.kind};
        if (std::find(ops.begin(), ops.end(), element) == ops.end()) ops.push_back(element);
    }
    return ops;
}

}  // namespace ferrox::model
