#include "residency.h"

#include "ferrox/log.h"
#include "ferrox/op.h"
#include "ferrox/quant_kind.h"
#include "steps.h"

namespace ferrox::model {

bool fused_norm_available(const Dispatcher& dispatcher) {
    return dispatcher.resident_capable() && dispatcher.resident_backend().has_add_rms_norm() &&
           dispatcher.plan_resident(FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32).runner.has_value();
}

Residency choose_residency(std::span<const ResidentOp> ops, const Dispatcher& dispatcher,
                           bool allow_resident, uint32_t max_sequences) {
    if (dispatcher.backends().empty()) return {false, "no backend is selected"};
    const Backend& first = *dispatcher.backends().front();
    if (!allow_resident) return {false, "resident decoding is switched off"};
    if (!first.has_resident())
        return {false, fmt::format("the {} backend keeps no activations of its own (ABI 1.2 "
                                   "resident entries absent)",
                                   first.name())};
    for (const ResidentOp& op : ops)
        if (!dispatcher.plan_resident(op.op, op.kind, op.value_kind).runner)
            return {false,
                    fmt::format("the {} backend has no {} kernel for {} ({})", first.name(),
                                op_name(op.op), kv_kinds_name({op.kind, op.value_kind}), op.role)};
    if (max_sequences > 1 && !first.has_attention_cells())
        return {false, fmt::format("the {} backend's plugin is ABI {}: its resident attention "
                                   "reads one sequence's cells in place, and {} sequences need "
                                   "ABI 1.3's attention_cells",
                                   first.name(), first.abi_version_text(), max_sequences)};
    return {true, {}};
}

Expected<Residency> probe_model(const gguf::File& file, const Hparams& hp, Dispatcher& dispatcher,
                                KvKinds kv_kinds, bool allow_resident, uint32_t max_sequences) {
    auto trace = trace_pass(file, hp, dispatcher, kv_kinds);
    if (!trace) return trace.error();
    Residency residency = choose_residency(trace->ops, dispatcher, allow_resident, max_sequences);
    if (residency.resident && !trace->refusal.empty()) residency = {false, trace->refusal};
    // The delta rule runs on host memory either way (ABI 1.10's host entry).
    if (trace->delta_net) dispatcher.probe_delta_net(roles::kDeltaNet);
    if (residency.resident) {
        for (const ResidentOp& op : trace->ops)
            dispatcher.probe_resident(op.op, op.kind, op.value_kind, op.role);
        return residency;
    }
    // In host memory the weight products and attention are dispatched; the
    // core runs the rest itself.
    for (const ResidentOp& op : trace->ops)
        if (op.op == FERROX_OP_MATVEC || op.op == FERROX_OP_GEMM)
            dispatcher.probe(op.op, op.kind, op.role);
    dispatcher.probe_attention(kv_kinds.key, kv_kinds.value, roles::kAttention,
                               trace->attention_needs);
    return residency;
}

}  // namespace ferrox::model
