// Weight dispatch: which backend runs a weight product, decided from the
// backends' capability tables alone, and recorded in the kernel registry.
// probe() and apply() call the same plan(), so the report written before any
// weight moves is the decision made when it does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend.h"
#include "ferrox/expected.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/weight_matrix.h"

namespace ferrox {

struct PlanStep {
    size_t backend = 0;  // index into the dispatcher's backends
    Outcome outcome = Outcome::Hit;
    std::string detail;  // kernel, fallback or reason
};

struct Plan {
    std::vector<PlanStep> steps;  // every backend consulted, in order
    // The backend that runs the op (the last step's), or none: nothing can run it.
    std::optional<size_t> runner;
};

// What an attention call asks of a plugin beyond a plain softmax: fields
// that a plugin built before them would never read, silently dropping them.
struct AttentionNeeds {
    bool softcap = false;    // soft-capped scores (gemma2): ABI 1.4
    bool sinks = false;      // attention sinks (gpt-oss): ABI 1.5
    bool lookahead = false;  // non-causal attention (embedding encoders): ABI 1.7
    static AttentionNeeds of(const ferrox_attention_desc& desc) {
        return {desc.softcap != 0.0f, desc.sinks != nullptr, desc.lookahead != 0};
    }
};

// Why `backend` cannot be handed such attention (its plugin predates a field
// the call needs), or "" when it can.
FERROX_API std::string attention_refusal(const Backend& backend, AttentionNeeds needs);

// The op a weight product of `n` rows is: one row is a MATVEC.
constexpr ferrox_op projection_op(uint64_t n) { return n == 1 ? FERROX_OP_MATVEC : FERROX_OP_GEMM; }

// One product of Dispatcher::apply_many: y[rows] = W x.
struct MatvecJob {
    const WeightMatrix* weight = nullptr;
    std::string_view role;
    std::span<const float> x;
    std::span<float> y;
};

class FERROX_API Dispatcher {
  public:
    // `backends` in priority order (backends.order, ready ones only).
    Dispatcher(std::vector<std::shared_ptr<Backend>> backends, KernelRegistry& registry);

    const std::vector<std::shared_ptr<Backend>>& backends() const { return backends_; }

    Plan plan(ferrox_op op, ferrox_kind kind) const { return plan(op, kind, kind); }
    // For ATTENTION, `kind` is the keys' and `value_kind` the values' (ABI
    // 1.8: Backend::attention_kernel); other ops ignore value_kind.
    Plan plan(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind) const;

    // Records, without running anything, what MATVEC and GEMM on `weight` will
    // use; only MATVEC when the weight is never multiplied by a batch.
    void probe(ferrox_kind kind, std::string_view role, bool batched = true,
               std::source_location site = std::source_location::current());
    // One weight product's op (MATVEC or GEMM) alone.
    void probe(ferrox_op op, ferrox_kind kind, std::string_view role,
               std::source_location site = std::source_location::current());
    // The same for attention over keys of `key_kind` and values of
    // `value_kind` (kKvCacheKinds); recorded under the keys' kind, the kernel
    // or the reason naming the pair. `needs`: what the pass's attention asks
    // of the plugin (attention_refusal).
    void probe_attention(ferrox_kind key_kind, ferrox_kind value_kind, std::string_view role,
                         AttentionNeeds needs = {},
                         std::source_location site = std::source_location::current());

    // y[rows] = W x
    Expected<void> apply(const WeightMatrix& weight, std::string_view role,
                         std::span<const float> x, std::span<float> y);
    // Independent matvecs, each recorded under its role as apply() records
    // it, and each y to apply()'s bits. When one backend runs them all and
    // has the matvec_batch entry (ABI 1.10), in one call (one wake-up of its
    // threads), recorded under `batch_role` as a hit; otherwise one matvec
    // each, recorded there as the fallback (by design on an accelerator,
    // whose products queue without a wake-up).
    Expected<void> apply_many(std::span<const MatvecJob> jobs, std::string_view batch_role);
    // The fallback's record alone, for steps that issue the products
    // themselves (resident decoding: one project each, queued in order).
    void record_per_product(size_t backend, ferrox_kind kind, std::string_view batch_role);
    static constexpr std::string_view kBatchKernel = "matvec_batch: one dispatch";
    static constexpr std::string_view kBatchFallback = "one matvec per product";
    // y[n][rows] = x[n][cols] W^T
    Expected<void> apply_batch(const WeightMatrix& weight, std::string_view role,
                               std::span<const float> x, uint64_t n, std::span<float> y);

    // Attention on host memory: the first backend whose table names an
    // ATTENTION kernel runs it; when none does, `host_fallback` runs (the
    // core's own loop, recorded as a miss to kHostAttention). With a soft cap
    // that backend's plugin must be ABI 1.4, else the core's loop runs it,
    // recorded by design (attention_refusal). Sinks likewise need 1.5.
    Expected<void> attention(const ferrox_attention_desc& desc, std::string_view role,
                             const std::function<void()>& host_fallback);

    // Attention the backends' entries cannot express: the core's own loop runs
    // it, recorded against the first backend as by design, with `why`.
    void record_host_attention(Phase phase, ferrox_kind kv_kind, std::string_view role,
                               std::string_view why,
                               std::source_location site = std::source_location::current());

    static constexpr std::string_view kHostAttention = "core host attention (1 thread)";
    static constexpr std::string_view kResidentOnlyAttention =
        "attends only over its own KV cache (ABI 1.2 resident decoding)";

    // The gated delta rule on host memory (ABI 1.10): the first backend whose
    // table names a DELTA_NET kernel and has the entry runs it (the CPU
    // plugin, over its threads); when none does, `host_fallback` runs (the
    // core's loop, recorded as a miss to kHostDeltaNet). Either runs the
    // same per-head loop (core/src/delta_rule), so the bits agree.
    Expected<void> delta_net(const ferrox_delta_net_desc& desc, std::string_view role,
                             const std::function<void()>& host_fallback);
    void probe_delta_net(std::string_view role,
                         std::source_location site = std::source_location::current());
    // What delta_net() runs: the kernel's name, or kHostDeltaNet.
    std::string delta_net_runner() const;
    static constexpr std::string_view kHostDeltaNet = "core host delta rule (1 thread)";

    // Resident decoding (ABI 1.2): a forward pass whose activations and KV
    // cache live in the first backend's buffers. Only that backend is asked:
    // a missing kernel there is not handed on but keeps the model on host memory.
    bool resident_capable() const;
    Backend& resident_backend() const { return *backends_.front(); }
    Plan plan_resident(ferrox_op op, ferrox_kind kind) const {
        return plan_resident(op, kind, kind);
    }
    // value_kind as plan()'s.
    Plan plan_resident(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind) const;
    void probe_resident(ferrox_op op, ferrox_kind kind, std::string_view role,
                        std::source_location site = std::source_location::current()) {
        probe_resident(op, kind, kind, role, site);
    }
    void probe_resident(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind,
                        std::string_view role,
                        std::source_location site = std::source_location::current());
    // Records a resident op at dispatch; an error when the backend lacks it.
    Expected<void> resident_step(ferrox_op op, ferrox_kind kind, std::string_view role) {
        return resident_step(op, kind, kind, role);
    }
    Expected<void> resident_step(ferrox_op op, ferrox_kind kind, ferrox_kind value_kind,
                                 std::string_view role);
    // Y[n][rows] = X[n][cols] W^T on resident tensors (MATVEC for n == 1).
    Expected<void> project_resident(const WeightMatrix& weight, std::string_view role,
                                    ferrox_tensor x, uint64_t n, ferrox_tensor y);

  private:
    void record(Phase phase, ferrox_op op, ferrox_kind kind, std::string_view role,
                const Plan& plan, std::source_location site, std::string_view last_resort = {});
    Expected<size_t> runner_for(ferrox_op op, const WeightMatrix& weight, std::string_view role);
    std::string host_attention_reason(const Plan& plan, AttentionNeeds needs) const;
    KernelChoice choice(const Backend& b, ferrox_op op, ferrox_kind kind,
                        ferrox_kind value_kind) const;

    std::vector<std::shared_ptr<Backend>> backends_;
    KernelRegistry& registry_;
};

}  // namespace ferrox
