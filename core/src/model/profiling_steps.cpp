// ProfilingSteps: any Steps, with every op timed into a StepProfile. A
// decorator rather than timers inside HostSteps and ResidentSteps, so both
// executors are profiled by the same code and neither carries the clock.
#include <algorithm>
#include <chrono>

#include "ferrox/model/step_profile.h"
#include "ferrox/quant_kind.h"
#include "steps.h"

namespace ferrox::model {

void StepProfile::add(std::string_view op, std::string_view role, ferrox_kind kind,
                      uint64_t nanoseconds, uint64_t bytes) {
    StepTiming& row = rows_[{std::string(op), std::string(role), kind}];
    if (row.calls == 0) {
        row.op = op;
        row.role = role;
        row.kind = kind;
    }
    ++row.calls;
    row.nanoseconds += nanoseconds;
    row.bytes += bytes;
}

std::vector<StepTiming> StepProfile::rows() const {
    std::vector<StepTiming> out;
    out.reserve(rows_.size());
    for (const auto& [key, row] : rows_) out.push_back(row);
    std::stable_sort(out.begin(), out.end(), [](const StepTiming& a, const StepTiming& b) {
        return a.nanoseconds > b.nanoseconds;
    });
    return out;
}

uint64_t StepProfile::total_nanoseconds() const {
    uint64_t total = 0;
    for (const auto& [key, row] : rows_) total += row.nanoseconds;
    return total;
}

namespace {

class ProfilingSteps final : public Steps {
  public:
    ProfilingSteps(std::unique_ptr<Steps> inner, StepProfile& profile)
        : inner_(std::move(inner)), profile_(profile) {
        profile_.launch_times = inner_->resident();
    }

    bool resident() const override { return inner_->resident(); }
    Expected<Act> allocate(uint64_t bytes) override { return inner_->allocate(bytes); }
    Expected<Act> constant(std::span<const float> values) override {
        return inner_->constant(values);
    }

    Expected<void> upload(std::span<const float> src, Act dst) override {
        ScopedStepTimer t(&profile_, "upload", "upload");
        return inner_->upload(src, dst);
    }
    Expected<void> download(Act src, std::span<float> dst) override {
        ScopedStepTimer t(&profile_, "download", "download");
        return inner_->download(src, dst);
    }
    Expected<void> embed(std::span<const int32_t> ids, float scale, Act out) override {
        ScopedStepTimer t(&profile_, "embed", "token_embd");
        return inner_->embed(ids, scale, out);
    }
    Expected<void> project(const WeightMatrix& w, std::string_view role, Act x, uint32_t n,
                           Act y) override {
        ScopedStepTimer t(&profile_, n == 1 ? "matvec" : "gemm", role, w.kind(),
                          w.rows() * w.row_bytes());
        return inner_->project(w, role, x, n, y);
    }
    Expected<void> project_many(std::span<const Projection> products,
                                std::string_view batch_role) override {
        uint64_t bytes = 0;
        for (const Projection& p : products) bytes += p.w->rows() * p.w->row_bytes();
        ScopedStepTimer t(&profile_, "matvec_batch", batch_role,
                          products.empty() ? FERROX_KIND_F32 : products[0].w->kind(), bytes);
        return inner_->project_many(products, batch_role);
    }
    Expected<void> rms_norm(std::string_view role, Act x, Act gamma, uint64_t rows, uint32_t dim,
                            float eps, Act y) override {
        ScopedStepTimer t(&profile_, "rms_norm", role);
        return inner_->rms_norm(role, x, gamma, rows, dim, eps, y);
    }
    Expected<void> rope(Act x, Act cos, Act sin, uint32_t n_pos, uint32_t n_heads,
                        uint32_t head_dim, uint32_t n_rot, RopeStyle style) override {
        ScopedStepTimer t(&profile_, "rope", "rope");
        return inner_->rope(x, cos, sin, n_pos, n_heads, head_dim, n_rot, style);
    }
    Expected<void> add(std::string_view role, Act dst, Act src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha) override {
        ScopedStepTimer t(&profile_, "add", role);
        return inner_->add(role, dst, src, rows, dim, src_stride, alpha);
    }
    Expected<void> add_rms_norm(std::string_view norm_role, Act dst, Act src, uint64_t src_stride,
                                float alpha, Act gamma, uint64_t rows, uint32_t dim, float eps,
                                Act y) override {
        ScopedStepTimer t(&profile_, "add_rms_norm", norm_role);
        return inner_->add_rms_norm(norm_role, dst, src, src_stride, alpha, gamma, rows, dim, eps,
                                    y);
    }
    Expected<void> glu(FfnActivation act, Act gate, Act up, uint64_t count) override {
        ScopedStepTimer t(&profile_, "glu", "glu");
        return inner_->glu(act, gate, up, count);
    }
    Expected<void> store_kv(Act rows, Act cache, ferrox_kind kind, uint64_t count) override {
        ScopedStepTimer t(&profile_, "store_kv", "store_kv", kind);
        return inner_->store_kv(rows, cache, kind, count);
    }
    Expected<void> attention(ferrox_attention_desc desc, Act q, Act keys, Act values, Act out,
                             const Act* sinks) override {
        // The cache rows it reads, counted as bytes like a weight's.
        const uint64_t rows = uint64_t{desc.pos0} + desc.n_query;
        const KindTraits* k = kind_traits(desc.kv_kind);
        const KindTraits* v = kind_traits(desc.value_kind);
        const uint64_t bytes = rows * desc.n_head_kv *
                               (desc.head_dim_k * k->block_bytes / k->block_elements +
                                desc.head_dim_v * v->block_bytes / v->block_elements);
        ScopedStepTimer t(&profile_, "attention", "attention", desc.kv_kind, bytes);
        return inner_->attention(desc, q, keys, values, out, sinks);
    }

    // Under the name of what runs it: a plugin's kernel or the core's loop.
    Expected<void> delta_net(const ferrox_delta_net_desc& desc) override {
        const std::string runner = inner_->delta_net_runner();
        ScopedStepTimer t(&profile_, "delta_net", runner);
        return inner_->delta_net(desc);
    }
    std::string delta_net_runner() const override { return inner_->delta_net_runner(); }

  private:
    std::unique_ptr<Steps> inner_;
    StepProfile& profile_;
};

}  // namespace

std::unique_ptr<Steps> make_profiling_steps(std::unique_ptr<Steps> inner, StepProfile& profile) {
    return std::make_unique<ProfilingSteps>(std::move(inner), profile);
}

}  // namespace ferrox::model
