// Resident decoding: may a model's whole forward pass live in the first
// backend's buffers? Only when that backend has a kernel for every op the
// pass issues; otherwise activations stay in host memory and the weight
// products are dispatched per call as before. The list of ops below is also
// what the probe records, so `ferrox inspect` shows the same decision.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/dispatch.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/model.h"

namespace ferrox::model {

// The roles non-weight ops are recorded under (weight products use their
// WeightUse role).
namespace roles {
inline constexpr std::string_view kEmbedding = "token_embd";
inline constexpr std::string_view kAttnNorm = "attn_norm";
inline constexpr std::string_view kFfnNorm = "ffn_norm";
inline constexpr std::string_view kOutputNorm = "output_norm";
inline constexpr std::string_view kQNorm = "attn_q_norm";
inline constexpr std::string_view kKNorm = "attn_k_norm";
inline constexpr std::string_view kPostAttnNorm = "post_attention_norm";
inline constexpr std::string_view kPostFfwNorm = "post_ffw_norm";
inline constexpr std::string_view kRope = "rope";
inline constexpr std::string_view kResidual = "residual";
inline constexpr std::string_view kQkvBias = "qkv_bias";
inline constexpr std::string_view kMoeCombine = "moe_combine";
inline constexpr std::string_view kGlu = "ffn_glu";
inline constexpr std::string_view kKvStore = "kv_store";
inline constexpr std::string_view kAttention = "attention";
}  // namespace roles

struct ResidentOp {
    ferrox_op op;
    ferrox_kind kind;
    std::string_view role;
};

// Whether the resident backend fuses the residual add with the next RMS norm
// (the optional add_rms_norm entry); ResidentSteps and the probe both ask.
bool fused_norm_available(const Dispatcher& dispatcher);

// Every (op, kind, role) a resident forward pass of this model issues, with
// the residual adds fused into the next norm or not.
std::vector<ResidentOp> resident_ops(const Hparams& hp, std::span<const WeightUse> uses,
                                     ferrox_kind kv_kind, ferrox_kind embedding_kind,
                                     bool fused_norm);

Residency choose_residency(std::span<const ResidentOp> ops, const Dispatcher& dispatcher,
                           bool allow_resident, uint32_t max_sequences = 1);

}  // namespace ferrox::model
