// The FFN's keys: one dense FFN, or experts with their gating, groups,
// shared experts and leading dense layers, each count bounded before it sizes anything.
#include <algorithm>
#include <cmath>

#include "hparams_readers.h"
#include "hparams_sanity.h"

namespace ferrox::model {
namespace {

// The gating function (expert_gating_func, llama.cpp's enum) and the
// weights' scale, for the rows that read them: absent or 0 means the row's
// gating -- or sigmoid for a file of one of the row's sigmoid_gating_shapes,
// as llama.cpp guesses for GLM-4.7-Flash -- 1 softmax, 2 sigmoid.
Expected<void> read_gating(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                           Hparams& hp) {
    uint32_t gating = 0;
    FERROX_READ(gating, k.u32_or("expert_gating_func", 0));
    if (gating > 2)
        return refuse(file, k.key("expert_gating_func"),
                      fmt::format("{} is not implemented for this architecture (1 softmax and 2 "
                                  "sigmoid are; 3 softmax over the top k, 4 sqrt-softplus are not)",
                                  gating));
    if (gating != 0) hp.moe_gating = gating == 1 ? MoeGating::Softmax : MoeGating::Sigmoid;
    for (const GatingShape& shape : spec.sigmoid_gating_shapes)
        if (gating == 0 && shape.n_layer == hp.n_layer && shape.vocab == hp.vocab)
            hp.moe_gating = MoeGating::Sigmoid;
    return {};
}

// The chosen experts' weights' scale (expert_weights_scale), for the rows
// that read it: absent or 0 means none.
Expected<void> read_weights_scale(const gguf::File& file, const Keys& k, Hparams& hp) {
    float scale = 0;
    FERROX_READ(scale, k.f32_or("expert_weights_scale", 0.0f));
    if (!std::isfinite(scale) || scale < 0)
        return refuse(file, k.key("expert_weights_scale"),
                      fmt::format("{} is not a scale (finite, >= 0, 0 for none)", scale));
    hp.expert_weights_scale = scale == 0.0f ? 1.0f : scale;  // llama.cpp: 0 and 1 leave them
    return {};
}

// Group-limited routing's counts, bounded so that routing always finds its
// experts: equal groups of at least two experts (a group scores by its two
// best), 1..groups used, and enough experts in the used groups for
// expert_used_count. 0 or 1 group: every expert eligible.
Expected<void> read_expert_groups(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.n_expert_groups, k.u32_or("expert_group_count", 0));
    FERROX_READ(hp.n_expert_groups_used, k.u32_or("expert_group_used_count", 0));
    const uint32_t groups = hp.n_expert_groups, used = hp.n_expert_groups_used;
    if (groups <= 1) {
        if (used > 1)
            return refuse(file, k.key("expert_group_used_count"),
                          fmt::format("{} is more than expert_group_count ({})", used, groups));
        return {};
    }
    if (hp.n_expert % groups != 0 || hp.n_expert / groups < 2)
        return refuse(file, k.key("expert_group_count"),
                      fmt::format("{} does not split expert_count {} into groups of 2 or more",
                                  groups, hp.n_expert));
    if (used == 0 || used > groups)
        return refuse(file, k.key("expert_group_used_count"),
                      fmt::format("{} is not in 1..expert_group_count ({})", used, groups));
    const uint32_t eligible = used * (hp.n_expert / groups);
    if (hp.n_expert_used > eligible)
        return refuse(file, k.key("expert_used_count"),
                      fmt::format("{} is more than the {} experts of the {} groups used "
                                  "(expert_group_used_count)",
                                  hp.n_expert_used, eligible, used));
    return {};
}

// Shared experts: always run beside the routed ones, each as wide as a
// routed expert (llama.cpp reads the count as required).
Expected<void> read_shared_experts(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.n_expert_shared, k.u32("expert_shared_count"));
    // Bounds the shared FFN's activations, sized from this before any tensor is bound.
    if (hp.n_expert_shared > hp.n_expert)
        return refuse(
            file, k.key("expert_shared_count"),
            fmt::format("{} is more than expert_count ({})", hp.n_expert_shared, hp.n_expert));
    hp.n_ff_shared = uint64_t{hp.n_ff_expert} * hp.n_expert_shared;
    return {};
}

// One shared expert with a gate of its own (qwen35moe): as wide as
// expert_shared_feed_forward_length or, where that is absent or 0,
// feed_forward_length (llama.cpp's fallback). Bounded here, before it sizes
// the shared FFN's activations; binding then checks it against
// ffn_*_shexp's shapes and names the tensor that disagrees.
Expected<void> read_gated_shared_expert(const gguf::File& file, const Keys& k, Hparams& hp) {
    uint32_t width = 0;
    FERROX_READ(width, k.u32_or("expert_shared_feed_forward_length", 0));
    const char* key = "expert_shared_feed_forward_length";
    if (width == 0) {
        key = "feed_forward_length";
        FERROX_READ(width, k.u32(key));
    }
    // Released models: 512 (Qwen3.5-35B-A3B) to a few thousand.
    constexpr uint32_t kMaxWidth = 1u << 20;
    if (width == 0 || width > kMaxWidth)
        return refuse(file, k.key(key),
                      fmt::format("{} is not a shared expert's width in 1..{}", width, kMaxWidth));
    hp.n_ff_shared = width;
    return {};
}

// An ungated shared expert where the file gives it a width (granitehybrid):
// expert_shared_feed_forward_length absent or 0 means none, as llama.cpp
// reads it. Bounded here, before it sizes the shared FFN's activations;
// binding checks it against ffn_*_shexp's shapes and names the tensor.
Expected<void> read_optional_shared_expert(const gguf::File& file, const Keys& k, Hparams& hp) {
    uint32_t width = 0;
    FERROX_READ(width, k.u32_or("expert_shared_feed_forward_length", 0));
    constexpr uint32_t kMaxWidth = 1u << 20;
    if (width > kMaxWidth)
        return refuse(file, k.key("expert_shared_feed_forward_length"),
                      fmt::format("{} is not a shared expert's width in 0..{}", width, kMaxWidth));
    hp.n_ff_shared = width;
    hp.n_expert_shared = width > 0 ? 1 : 0;
    return {};
}

// Llama 4's dense layers between the expert ones: layer il runs experts
// when (il + 1) % interleave_moe_layer_step == 0 (Scout 1, Maverick 2), the
// others a dense FFN feed_forward_length wide. llama.cpp runs no expert
// layer at step 0; a step past the layers leaves none either: both refused.
Expected<void> read_moe_interleave(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.moe_layer_step, k.u32("interleave_moe_layer_step"));
    if (hp.moe_layer_step == 0 || hp.moe_layer_step > hp.n_layer)
        return refuse(file, k.key("interleave_moe_layer_step"),
                      fmt::format("{} is not in 1..block_count ({}): no layer would run experts",
                                  hp.moe_layer_step, hp.n_layer));
    FERROX_READ(hp.n_ff, k.u32_or("feed_forward_length", 0));
    if (hp.moe_layer_step > 1 && hp.n_ff == 0)
        return refuse(file, k.key("feed_forward_length"),
                      "is 0 or absent, but the layers between the expert ones are dense");
    if (hp.moe_layer_step == 1) hp.n_ff = 0;  // no dense layer: nothing is that wide
    return {};
}

// The first layers' dense FFN (glm4moe), feed_forward_length wide.
Expected<void> read_leading_dense(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.n_layer_dense_lead, k.u32_or("leading_dense_block_count", 0));
    FERROX_READ(hp.n_ff, k.u32_or("feed_forward_length", 0));
    if (hp.n_layer_dense_lead > hp.n_layer)
        return refuse(
            file, k.key("leading_dense_block_count"),
            fmt::format("{} is more than the {} layers run", hp.n_layer_dense_lead, hp.n_layer));
    if (hp.n_layer_dense_lead > 0 && hp.n_ff == 0)
        return refuse(file, k.key("feed_forward_length"),
                      "is 0 or absent, but the leading dense layers need their width");
    if (hp.n_layer_dense_lead == 0) hp.n_ff = 0;  // no dense layer: nothing is that wide
    return {};
}

// A file without experts of a row with leading dense layers: all dense.
Expected<void> read_all_dense(const gguf::File& file, const Keys& k, Hparams& hp) {
    if (auto r = read_leading_dense(file, k, hp); !r) return r;
    if (hp.n_layer_dense_lead < hp.n_layer)
        return refuse(file, k.key("expert_count"),
                      fmt::format("is 0 or absent, but leading_dense_block_count {} leaves "
                                  "layers {}..{} to experts",
                                  hp.n_layer_dense_lead, hp.n_layer_dense_lead, hp.n_layer - 1));
    return {};
}

// The experts' counts and widths (mixture-of-experts rows, or a llama file
// with expert_count > 0).
Expected<void> read_experts(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                            Hparams& hp) {
    // A row with leading dense layers runs a file without experts dense,
    // when every layer is a leading one (llama.cpp needs experts past them).
    FERROX_READ(hp.n_expert,
                spec.leading_dense_layers ? k.u32_or("expert_count", 0) : k.u32("expert_count"));
    if (hp.n_expert == 0 && spec.leading_dense_layers) return read_all_dense(file, k, hp);
    // Sizes per-row router scores before any tensor is bound; llama.cpp's
    // own ceiling (LLAMA_MAX_EXPERTS).
    constexpr uint32_t kMaxExperts = 1024;
    if (hp.n_expert > kMaxExperts)
        return refuse(file, k.key("expert_count"),
                      fmt::format("{} is more than {} experts", hp.n_expert, kMaxExperts));
    FERROX_READ(hp.n_expert_used, k.u32("expert_used_count"));
    // Mixtral's llama files: each expert is feed_forward_length wide, as
    // llama.cpp's llama graph reads it.
    const bool own_width = spec.moe || spec.dense_beside_experts;
    FERROX_READ(hp.n_ff_expert,
                own_width ? k.u32("expert_feed_forward_length") : k.u32("feed_forward_length"));
    if (hp.n_ff_expert == 0)
        return refuse(file, k.key(own_width ? "expert_feed_forward_length" : "feed_forward_length"),
                      "is 0: experts without width");
    // A softmax over the chosen k already sums to 1 (llama.cpp reads no
    // key for it then); the rows that read the gating key renormalise only
    // where the file says (llama.cpp's default false), the other softmax
    // rows always (their llama.cpp graphs do; gemma4's whatever the key).
    if (spec.expert_weights_always_normed)
        hp.expert_weights_norm = true;
    else if (spec.moe_gating != MoeGating::SoftmaxWeight && !spec.expert_weight_on_input)
        FERROX_READ(hp.expert_weights_norm,
                    k.bool_or("expert_weights_norm", expert_weights_norm_default(spec)));
    if (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)
        return refuse(
            file, k.key("expert_used_count"),
            fmt::format("{} is not in 1..expert_count ({})", hp.n_expert_used, hp.n_expert));
    if (!spec.dense_beside_experts) hp.n_ff = 0;  // else the dense branch's width, read before
    hp.moe_gating = spec.moe_gating;
    hp.expert_selection_bias = spec.expert_selection_bias == TensorUse::Required;
    if (spec.expert_selection_bias == TensorUse::Optional)  // V3's files have it, V2's not
        for (const gguf::Tensor& t : file.tensors())
            hp.expert_selection_bias |=
                t.name().starts_with("blk.") && t.name().ends_with(".exp_probs_b.bias");
    if (spec.gating_key)
        if (auto r = read_gating(file, k, spec, hp); !r) return r;
    if (spec.gating_key || spec.expert_weights_scale_key)
        if (auto r = read_weights_scale(file, k, hp); !r) return r;
    if (spec.expert_groups)
        if (auto r = read_expert_groups(file, k, hp); !r) return r;
    if (spec.shared_experts)
        if (auto r = read_shared_experts(file, k, hp); !r) return r;
    if (spec.shared_expert_gate)
        if (auto r = read_gated_shared_expert(file, k, hp); !r) return r;
    if (spec.optional_shared_expert)
        if (auto r = read_optional_shared_expert(file, k, hp); !r) return r;
    if (spec.shared_expert_of_expert_width) {
        hp.n_expert_shared = 1;
        hp.n_ff_shared = hp.n_ff_expert;
    }
    // llama.cpp knows Llama 4 Maverick, which has no q/k L2 norm, by its 128 experts.
    if (spec.rope_layer_qk_l2_norm) hp.qk_l2_norm = hp.n_expert != 128;
    if (spec.moe_layer_step_key) return read_moe_interleave(file, k, hp);
    if (spec.leading_dense_layers) return read_leading_dense(file, k, hp);
    return {};
}

}  // namespace

// The FFN: experts, or one dense FFN (and no experts).
Expected<void> read_ffn(const gguf::File& file, const Keys& k, const ArchSpec& spec, Hparams& hp) {
    uint32_t optional_experts = 0;
    if (spec.moe_with_expert_count) FERROX_READ(optional_experts, k.u32_or("expert_count", 0));
    if (spec.one_block_layers) {  // nemotron_h: a width on the FFN-only layers alone
        if (auto r = read_ffn_only_layers(file, k, hp); !r) return r;
        if (!spec.moe)
            return refuse_if_set(file, k, "expert_count", "a mixture of experts", spec.name);
        // nemotron_h_moe: those layers run experts. Not run: Nemotron 3
        // Super's latent projections and the MTP block (both refused by key).
        for (const auto& [key, part] : {std::pair{"moe_latent_size", "experts in a latent space"},
                                        std::pair{"nextn_predict_layers", "an MTP block"}})
            if (auto r = refuse_if_set(file, k, key, part, spec.name); !r) return r;
        return read_experts(file, k, spec, hp);
    }
    if (spec.moe || optional_experts > 0) return read_experts(file, k, spec, hp);
    if (spec.per_layer_geometry_keys) {
        // gemma4's E2B doubles the width of its shared-KV layers' FFN.
        if (auto r = read_per_layer(file, k, "feed_forward_length", hp.n_layer, hp.n_ff_layers); !r)
            return r;
        hp.n_ff = *std::max_element(hp.n_ff_layers.begin(), hp.n_ff_layers.end());
        // gemma4 26B-A4B: experts beside each layer's dense FFN.
        if (spec.dense_beside_experts && k.has("expert_count"))
            FERROX_READ(optional_experts, k.u32("expert_count"));
        if (optional_experts > 0) return read_experts(file, k, spec, hp);
        return refuse_if_set(file, k, "expert_count", "a mixture of experts", spec.name);
    }
    FERROX_READ(hp.n_ff, k.u32("feed_forward_length"));
    return refuse_if_set(file, k, "expert_count", "a mixture of experts", spec.name);
}

}  // namespace ferrox::model
