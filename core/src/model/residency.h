// Resident decoding: may a model's whole forward pass live in the first
// backend's buffers? Only when that backend has a kernel for every op the
// pass issues; otherwise activations stay in host memory and the weight
// products are dispatched per call as before. The ops are found by running
// the decoder itself over tracing steps (trace_pass), and they are what the
// probe records, so `ferrox inspect` shows the decision a load makes.
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
// tensor's name, as "attn_q").
namespace roles {
inline constexpr std::string_view kEmbedding = "token_embd";
inline constexpr std::string_view kAttnNorm = "attn_norm";
inline constexpr std::string_view kFfnNorm = "ffn_norm";
inline constexpr std::string_view kOutputNorm = "output_norm";
inline constexpr std::string_view kQNorm = "attn_q_norm";
inline constexpr std::string_view kKNorm = "attn_k_norm";
inline constexpr std::string_view kQANorm = "attn_q_a_norm";
inline constexpr std::string_view kKvANorm = "attn_kv_a_norm";
inline constexpr std::string_view kVNorm = "attn_v_norm";
inline constexpr std::string_view kLayerOutputScale = "layer_output_scale";
inline constexpr std::string_view kPostAttnNorm = "post_attention_norm";
inline constexpr std::string_view kPostFfwNorm = "post_ffw_norm";
inline constexpr std::string_view kPostFfwNorm1 = "post_ffw_norm_1";
inline constexpr std::string_view kPreFfwNorm2 = "pre_ffw_norm_2";
inline constexpr std::string_view kPostFfwNorm2 = "post_ffw_norm_2";
inline constexpr std::string_view kRouterInput = "ffn_gate_inp_scale";
inline constexpr std::string_view kRope = "rope";
inline constexpr std::string_view kResidual = "residual";
inline constexpr std::string_view kQkvBias = "qkv_bias";
inline constexpr std::string_view kOutputBias = "attn_output_bias";
inline constexpr std::string_view kExpertBias = "expert_bias";
inline constexpr std::string_view kFfnBias = "ffn_bias";  // BERT's ffn_up / ffn_down biases
inline constexpr std::string_view kMoeCombine = "moe_combine";
// A token's expert products in one project_many (each also under its own role).
inline constexpr std::string_view kExpertsBatch = "ffn_exps_batch";
inline constexpr std::string_view kGlu = "ffn_glu";
inline constexpr std::string_view kKvStore = "kv_store";
inline constexpr std::string_view kAttention = "attention";
inline constexpr std::string_view kDeltaNet = "delta_net";
inline constexpr std::string_view kPerLayerInput = "per_layer_input";
inline constexpr std::string_view kPerLayerProjNorm = "per_layer_proj_norm";
inline constexpr std::string_view kPerLayerPostNorm = "per_layer_post_norm";
}  // namespace roles

struct ResidentOp {
    ferrox_op op;
    ferrox_kind kind;  // for ATTENTION the keys' kind
    std::string_view role;
    ferrox_kind value_kind;  // for ATTENTION the values' kind; else `kind`
    bool operator==(const ResidentOp&) const = default;
};

// What one forward pass issues, as tracing steps saw the decoder issue it.
struct PassTrace {
    // Every (op, kind, role) once, in the order first issued: a one-token
    // step (MATVEC) and then a two-token one (GEMM), so both shapes appear.
    std::vector<ResidentOp> ops;
    // The first call the ABI's resident entries cannot express, and why
    // ("": none); such a model decodes in host memory.
    std::string refusal;
    // What the pass's attention asks of a plugin (soft caps, sinks).
    AttentionNeeds attention_needs;
    // Whether it runs the gated delta rule (on host memory, ABI 1.10).
    bool delta_net = false;
};

// Whether the resident backend fuses the residual add with the next RMS norm
// (the optional add_rms_norm entry); ResidentSteps and the probe both ask.
bool fused_norm_available(const Dispatcher& dispatcher);

// Runs the decoder over tracing steps (nothing computed, nothing allocated)
// for a two-step pass of one sequence, as resident steps on the dispatcher's
// first backend would issue it. Binds the file's weights (views, no copies of
// matrices). Defined with the context in context.cpp.
Expected<PassTrace> trace_pass(const gguf::File& file, const Hparams& hp, Dispatcher& dispatcher,
                               KvKinds kv_kinds);

Residency choose_residency(std::span<const ResidentOp> ops, const Dispatcher& dispatcher,
                           bool allow_resident, uint32_t max_sequences = 1);

}  // namespace ferrox::model
