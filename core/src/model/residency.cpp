#include "residency.h"

#include "ferrox/log.h"
#include "ferrox/op.h"
#include "ferrox/quant_kind.h"
#include "steps.h"

namespace ferrox::model {

std::vector<ResidentOp> resident_ops(const Hparams& hp, std::span<const WeightUse> uses,
                                     ferrox_kind kv_kind, ferrox_kind embedding_kind,
                                     bool fused_norm) {
    std::vector<ResidentOp> ops{{FERROX_OP_GET_ROWS, embedding_kind, roles::kEmbedding}};
    for (const WeightUse& u : uses) {
        ops.push_back({FERROX_OP_MATVEC, u.kind, u.role});
        if (!u.per_position) ops.push_back({FERROX_OP_GEMM, u.kind, u.role});
    }
    auto norm = [&](std::string_view role) {
        ops.push_back({FERROX_OP_RMS_NORM, FERROX_KIND_F32, role});
    };
    if (hp.pre_norms) norm(roles::kAttnNorm);  // layer 0's, or every layer's without the fusion
    norm(roles::kOutputNorm);
    if (hp.pre_norms) {
        if (fused_norm) {
            // The residual adds fused with the next norm: the attention block's
            // with ffn_norm, each FFN's but the last with the next attn_norm.
            ops.push_back({FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, roles::kFfnNorm});
            if (hp.n_layer > 1)
                ops.push_back({FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, roles::kAttnNorm});
        } else {
            norm(roles::kFfnNorm);
        }
    }
    if (hp.qk_norm != QkNorm::None) {
        norm(roles::kQNorm);
        norm(roles::kKNorm);
    }
    if (hp.post_norms) {
        norm(roles::kPostAttnNorm);
        norm(roles::kPostFfwNorm);
    }
    bool rotates = false;
    for (uint32_t il = 0; il < hp.n_layer; ++il) rotates = rotates || hp.has_rope(il);
    if (rotates) ops.push_back({FERROX_OP_ROPE, FERROX_KIND_F32, roles::kRope});
    ops.push_back({FERROX_OP_ADD, FERROX_KIND_F32, roles::kResidual});
    if (hp.qkv_bias) ops.push_back({FERROX_OP_ADD, FERROX_KIND_F32, roles::kQkvBias});
    if (hp.n_expert) ops.push_back({FERROX_OP_ADD, FERROX_KIND_F32, roles::kMoeCombine});
    ops.push_back({hp.activation == FfnActivation::Silu ? FERROX_OP_SWIGLU : FERROX_OP_GEGLU,
                   FERROX_KIND_F32, roles::kGlu});
    ops.push_back({FERROX_OP_CONVERT, kv_kind, roles::kKvStore});
    ops.push_back({FERROX_OP_ATTENTION, kv_kind, roles::kAttention});
    return ops;
}

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
        if (!dispatcher.plan_resident(op.op, op.kind).runner)
            return {false, fmt::format("the {} backend has no {} kernel for {} ({})", first.name(),
                                       op_name(op.op), kind_name(op.kind), op.role)};
    if (max_sequences > 1 && !first.has_attention_cells())
        return {false, fmt::format("the {} backend's plugin is ABI {}: its resident attention "
                                   "reads one sequence's cells in place, and {} sequences need "
                                   "ABI 1.3's attention_cells",
                                   first.name(), first.abi_version_text(), max_sequences)};
    return {true, {}};
}

Expected<Residency> probe_model(const gguf::File& file, const Hparams& hp,
                                std::span<const WeightUse> uses, Dispatcher& dispatcher,
                                ferrox_kind kv_kind, bool allow_resident, uint32_t max_sequences) {
    const gguf::Tensor* embedding = file.find_tensor("token_embd.weight");
    if (!embedding)
        return make_error("{}: tensor 'token_embd.weight' is missing", file.path().string());
    const auto ops =
        resident_ops(hp, uses, kv_kind, embedding->kind(), fused_norm_available(dispatcher));
    Residency residency = choose_residency(ops, dispatcher, allow_resident, max_sequences);
    if (residency.resident && hp.attn_softcap != 0.0f)
        residency = {false, std::string(kSoftcapAttention)};
    if (residency.resident && !rope_entry_rotates(hp.n_rot, hp.head_dim_k, hp.rope))
        residency = {false, fmt::format("the ABI's rope entry cannot rotate {} of {} dims in NeoX "
                                        "pairs (it takes no n_rot)",
                                        hp.n_rot, hp.head_dim_k)};
    if (residency.resident)
        for (const ResidentOp& op : ops) dispatcher.probe_resident(op.op, op.kind, op.role);
    else
        probe_weights(uses, dispatcher, kv_kind,
                      hp.attn_softcap != 0.0f ? kSoftcapAttention : std::string_view{});
    return residency;
}

}  // namespace ferrox::model
