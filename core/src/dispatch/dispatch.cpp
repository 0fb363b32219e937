#include "ferrox/dispatch.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

#include "ferrox/op.h"
#include "ferrox/quant_kind.h"

namespace ferrox {
namespace {

std::string upper(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return out;
}

// The name a hand-off is recorded under: what runs instead, on which backend.
std::string handoff_name(const Backend& next, ferrox_op op) {
    std::string what(op_name(op));
    std::transform(what.begin(), what.end(), what.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return fmt::format("{} {}", upper(next.name()), what);
}

// The value kind of a descriptor: its own member when it holds one (ABI
// 1.8), else the keys' kind.
ferrox_kind value_kind_of(const ferrox_attention_desc& desc) {
    return desc.struct_size >= offsetof(ferrox_attention_desc, value_kind) + sizeof desc.value_kind
               ? desc.value_kind
               : desc.kv_kind;
}

}  // namespace

Dispatcher::Dispatcher(std::vector<std::shared_ptr<Backend>> backends, KernelRegistry& registry)
    : backends_(std::move(backends)), registry_(registry) {}

KernelChoice Dispatcher::choice(const Backend& b, ferrox_op op, ferrox_kind kind,
                                ferrox_kind value_kind) const {
    return op == FERROX_OP_ATTENTION ? b.attention_kernel(kind, value_kind)
                                     : b.kernel_for(op, kind);
}

Plan Dispatcher::plan(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind) const {
    Plan plan;
    for (size_t i = 0; i < backends_.size(); ++i) {
        const Backend& b = *backends_[i];
        const KernelChoice choice = this->choice(b, op, kind, value_kind);
        // An ATTENTION kernel counts only with the 1.1 entry that runs it, a
        // DELTA_NET kernel only with the 1.9 one.
        const bool runnable = op == FERROX_OP_ATTENTION   ? b.has_attention()
                              : op == FERROX_OP_DELTA_NET ? b.has_delta_net()
                                                          : true;
        if (!choice.kernel.empty() && runnable) {
            plan.steps.push_back({i, Outcome::Hit, std::string(choice.kernel)});
            plan.runner = i;
            return plan;
        }
        // A 1.2 backend may attend only over its own (resident) KV cache; a
        // 1.0 table naming a kernel it has no entry for is a plain miss.
        if (!choice.kernel.empty() && op == FERROX_OP_ATTENTION && b.has_resident()) {
            plan.steps.push_back({i, Outcome::ByDesign, std::string(kResidentOnlyAttention)});
            continue;
        }
        // A backend's own fallbacks: GEMM as repeated MATVEC when it can matvec
        // this kind, MATVEC by some slower path of its own.
        const bool can_matvec =
            !b.kernel_for(FERROX_OP_MATVEC, kind).kernel.empty() || !b.matvec_fallback().empty();
        if (op == FERROX_OP_GEMM && can_matvec && !b.gemm_fallback().empty()) {
            plan.steps.push_back({i, Outcome::Miss, std::string(b.gemm_fallback())});
            plan.runner = i;
            return plan;
        }
        if (op == FERROX_OP_MATVEC && !b.matvec_fallback().empty()) {
            plan.steps.push_back({i, Outcome::Miss, std::string(b.matvec_fallback())});
            plan.runner = i;
            return plan;
        }
        // Handed on; the detail is filled in once we know who takes it.
        plan.steps.push_back({i, choice.by_design.empty() ? Outcome::Miss : Outcome::ByDesign,
                              std::string(choice.by_design)});
    }
    return plan;
}

void Dispatcher::record(Phase phase, ferrox_op op, ferrox_kind kind, std::string_view role,
                        const Plan& plan, std::source_location site, std::string_view last_resort) {
    for (size_t s = 0; s < plan.steps.size(); ++s) {
        const PlanStep& step = plan.steps[s];
        std::string detail = step.detail;
        if (detail.empty())
            detail = s + 1 < plan.steps.size()
                         ? handoff_name(*backends_[plan.steps[s + 1].backend], op)
                     : last_resort.empty() ? std::string("nothing: no backend can run it")
                                           : std::string(last_resort);
        const Backend& b = *backends_[step.backend];
        registry_.record(phase, {b.name(), op, std::string(role), kind}, step.outcome, detail,
                         b.is_accelerator(), site);
    }
}

void Dispatcher::probe(ferrox_kind kind, std::string_view role, bool batched,
                       std::source_location site) {
    probe(FERROX_OP_MATVEC, kind, role, site);
    if (batched) probe(FERROX_OP_GEMM, kind, role, site);
}

void Dispatcher::probe(ferrox_op op, ferrox_kind kind, std::string_view role,
                       std::source_location site) {
    record(Phase::Probe, op, kind, role, plan(op, kind), site);
}

std::string attention_refusal(const Backend& backend, AttentionNeeds needs) {
    const auto refusal = [&](std::string_view what, std::string_view version) {
        return fmt::format(
            "the {} plugin is ABI {}: its attention entries cannot be told {} (ABI {})",
            backend.name(), backend.abi_version_text(), what, version);
    };
    if (needs.softcap && !backend.takes_attention_softcap()) return refusal("a soft cap", "1.4");
    if (needs.sinks && !backend.takes_attention_sinks()) return refusal("attention sinks", "1.5");
    if (needs.lookahead && !backend.takes_attention_lookahead())
        return refusal("a lookahead (non-causal attention)", "1.7");
    return {};
}

// Why the backend that would run attention cannot be told what it needs, or "".
std::string Dispatcher::host_attention_reason(const Plan& p, AttentionNeeds needs) const {
    return p.runner ? attention_refusal(*backends_[*p.runner], needs) : std::string();
}

void Dispatcher::probe_attention(ferrox_kind key_kind, ferrox_kind value_kind,
                                 std::string_view role, AttentionNeeds needs,
                                 std::source_location site) {
    const Plan p = plan(FERROX_OP_ATTENTION, key_kind, value_kind);
    if (const std::string why = host_attention_reason(p, needs); !why.empty())
        return record_host_attention(Phase::Probe, key_kind, role, why, site);
    record(Phase::Probe, FERROX_OP_ATTENTION, key_kind, role, p, site, kHostAttention);
}

Expected<void> Dispatcher::attention(const ferrox_attention_desc& desc, std::string_view role,
                                     const std::function<void()>& host_fallback) {
    const Plan p = plan(FERROX_OP_ATTENTION, desc.kv_kind, value_kind_of(desc));
    if (const std::string why = host_attention_reason(p, AttentionNeeds::of(desc)); !why.empty()) {
        record_host_attention(Phase::Dispatch, desc.kv_kind, role, why);
        host_fallback();
        return {};
    }
    record(Phase::Dispatch, FERROX_OP_ATTENTION, desc.kv_kind, role, p,
           std::source_location::current(), kHostAttention);
    if (p.runner) return backends_[*p.runner]->attention(desc);
    host_fallback();
    return {};
}

void Dispatcher::probe_delta_net(std::string_view role, std::source_location site) {
    record(Phase::Probe, FERROX_OP_DELTA_NET, FERROX_KIND_F32, role,
           plan(FERROX_OP_DELTA_NET, FERROX_KIND_F32), site, kHostDeltaNet);
}

std::string Dispatcher::delta_net_runner() const {
    const Plan p = plan(FERROX_OP_DELTA_NET, FERROX_KIND_F32);
    if (!p.runner) return std::string(kHostDeltaNet);
    return p.steps.back().detail;
}

Expected<void> Dispatcher::delta_net(const ferrox_delta_net_desc& desc, std::string_view role,
                                     const std::function<void()>& host_fallback) {
    const Plan p = plan(FERROX_OP_DELTA_NET, FERROX_KIND_F32);
    record(Phase::Dispatch, FERROX_OP_DELTA_NET, FERROX_KIND_F32, role, p,
           std::source_location::current(), kHostDeltaNet);
    if (p.runner) return backends_[*p.runner]->delta_net(desc);
    host_fallback();
    return {};
}

void Dispatcher::record_host_attention(Phase phase, ferrox_kind kv_kind, std::string_view role,
                                       std::string_view why, std::source_location site) {
    if (backends_.empty()) return;
    const Backend& b = *backends_.front();
    registry_.record(phase, {b.name(), FERROX_OP_ATTENTION, std::string(role), kv_kind},
                     Outcome::ByDesign, fmt::format("{}: {}", kHostAttention, why),
                     b.is_accelerator(), site);
}

bool Dispatcher::resident_capable() const {
    return !backends_.empty() && backends_.front()->has_resident();
}

Plan Dispatcher::plan_resident(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind) const {
    Plan plan;
    if (!resident_capable()) return plan;
    const Backend& b = *backends_.front();
    const KernelChoice choice = this->choice(b, op, kind, value_kind);
    if (!choice.kernel.empty()) {
        plan.steps.push_back({0, Outcome::Hit, std::string(choice.kernel)});
        plan.runner = 0;
    } else if (op == FERROX_OP_GEMM && !b.kernel_for(FERROX_OP_MATVEC, kind).kernel.empty() &&
               !b.gemm_fallback().empty()) {
        plan.steps.push_back({0, Outcome::Miss, std::string(b.gemm_fallback())});
        plan.runner = 0;
    } else {
        plan.steps.push_back({0, Outcome::Miss, "nothing: no resident kernel"});
    }
    return plan;
}

void Dispatcher::probe_resident(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind,
                                std::string_view role, std::source_location site) {
    record(Phase::Probe, op, kind, role, plan_resident(op, kind, value_kind), site);
}

Expected<void> Dispatcher::resident_step(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind,
                                         std::string_view role) {
    const Plan p = plan_resident(op, kind, value_kind);
    record(Phase::Dispatch, op, kind, role, p, std::source_location::current());
    if (!p.runner && kind != value_kind)
        return make_error("{}: the resident backend has no {} kernel for K {} / V {}", role,
                          op_name(op), kind_name(kind), kind_name(value_kind));
    if (!p.runner)
        return make_error("{}: the resident backend has no {} kernel for {}", role, op_name(op),
                          kind_name(kind));
    return {};
}

Expected<void> Dispatcher::project_resident(const WeightMatrix& weight, std::string_view role,
                                            ferrox_tensor x, uint64_t n, ferrox_tensor y) {
    if (n == 0) return {};
    if (auto r = resident_step(projection_op(n), weight.kind(), role); !r)
        return make_error("{}: {}", weight.name(), r.error().message());
    const auto& backend = backends_.front();
    auto handle = weight.prepared_on(backend);
    if (!handle) return handle.error();
    return backend->project(*handle, x, n, y);
}

Expected<size_t> Dispatcher::runner_for(ferrox_op op, const WeightMatrix& weight,
                                        std::string_view role) {
    const Plan p = plan(op, weight.kind());
    record(Phase::Dispatch, op, weight.kind(), role, p, std::source_location::current());
    if (!p.runner)
        return make_error(
            "{}: no selected backend can run {} on {} weights (backends: {})", weight.name(),
            op_name(op), kind_name(weight.kind()), backends_.empty() ? std::string("none") : [&] {
                std::string names;
                for (const auto& b : backends_) names += (names.empty() ? "" : ", ") + b->name();
                return names;
            }());
    return *p.runner;
}

Expected<void> Dispatcher::apply(const WeightMatrix& weight, std::string_view role,
                                 std::span<const float> x, std::span<float> y) {
    if (x.size() != weight.cols() || y.size() != weight.rows())
        return make_error("{}: matvec shape mismatch: W is {}x{}, x has {}, y has {}",
                          weight.name(), weight.rows(), weight.cols(), x.size(), y.size());
    auto runner = runner_for(FERROX_OP_MATVEC, weight, role);
    if (!runner) return runner.error();
    const auto& backend = backends_[*runner];
    auto handle = weight.prepared_on(backend);
    if (!handle) return handle.error();
    return backend->matvec(*handle, x.data(), y.data());
}

Expected<void> Dispatcher::apply_many(std::span<const MatvecJob> jobs,
                                      std::string_view batch_role) {
    if (jobs.empty()) return {};
    std::vector<size_t> runners;
    runners.reserve(jobs.size());
    for (const MatvecJob& job : jobs) {
        const WeightMatrix& w = *job.weight;
        if (job.x.size() != w.cols() || job.y.size() != w.rows())
            return make_error("{}: matvec shape mismatch: W is {}x{}, x has {}, y has {}", w.name(),
                              w.rows(), w.cols(), job.x.size(), job.y.size());
        auto runner = runner_for(FERROX_OP_MATVEC, w, job.role);
        if (!runner) return runner.error();
        runners.push_back(*runner);
    }
    const bool one_backend =
        std::all_of(runners.begin(), runners.end(), [&](size_t r) { return r == runners[0]; });
    const auto& first = backends_[runners[0]];
    const RegistryKey key{first->name(), FERROX_OP_MATVEC, std::string(batch_role),
                          jobs[0].weight->kind()};
    if (one_backend && first->has_matvec_batch()) {
        std::vector<ferrox_matvec_item> items;
        items.reserve(jobs.size());
        for (const MatvecJob& job : jobs) {
            auto handle = job.weight->prepared_on(first);
            if (!handle) return handle.error();
            items.push_back({*handle, job.x.data(), job.y.data()});
        }
        registry_.record(Phase::Dispatch, key, Outcome::Hit, kBatchKernel, first->is_accelerator());
        return first->matvec_batch(items);
    }
    record_per_product(runners[0], jobs[0].weight->kind(), batch_role);
    for (size_t i = 0; i < jobs.size(); ++i) {
        const auto& backend = backends_[runners[i]];
        auto handle = jobs[i].weight->prepared_on(backend);
        if (!handle) return handle.error();
        if (auto r = backend->matvec(*handle, jobs[i].x.data(), jobs[i].y.data()); !r) return r;
    }
    return {};
}

void Dispatcher::record_per_product(size_t backend, ferrox_kind kind, std::string_view batch_role) {
    const Backend& b = *backends_[backend];
    registry_.record(Phase::Dispatch, {b.name(), FERROX_OP_MATVEC, std::string(batch_role), kind},
                     b.is_accelerator() ? Outcome::ByDesign : Outcome::Miss, kBatchFallback,
                     b.is_accelerator());
}

Expected<void> Dispatcher::apply_batch(const WeightMatrix& weight, std::string_view role,
                                       std::span<const float> x, uint64_t n, std::span<float> y) {
    if (n == 0) return {};
    if (x.size() != n * weight.cols() || y.size() != n * weight.rows())
        return make_error("{}: gemm shape mismatch: W is {}x{}, n={}, x has {}, y has {}",
                          weight.name(), weight.rows(), weight.cols(), n, x.size(), y.size());
    auto runner = runner_for(FERROX_OP_GEMM, weight, role);
    if (!runner) return runner.error();
    const auto& backend = backends_[*runner];
    auto handle = weight.prepared_on(backend);
    if (!handle) return handle.error();
    return backend->gemm(*handle, x.data(), n, y.data());
}

}  // namespace ferrox
