// Which layers are recurrent (qwen35's Gated DeltaNet, lfm2's short
// convolutions, Mamba-2 blocks) and their shapes, bounded before they size a
// state; nemotron_h's FFN-only layers beside them.
#include <algorithm>
#include <cmath>

#include "hparams_readers.h"
#include "hparams_sanity.h"

namespace ferrox::model {
namespace {

// Which layers are recurrent as the file lists them (attention.recurrent_layers,
// what current converters write from the config's layer_types): one bool per
// block, NextN blocks included (llama.cpp reads block_count entries), which
// must be false there -- a NextN block is a full-attention block.
Expected<void> read_recurrent_layers(const gguf::File& file, const Keys& k, Hparams& hp) {
    const std::string key = k.key("attention.recurrent_layers");
    const auto* array = std::get_if<gguf::Array>(k.value("attention.recurrent_layers"));
    if (!array || array->element_type() != gguf::ValueType::Bool)
        return refuse(file, key, "is not an ARRAY of BOOL (one per block)");
    const uint64_t blocks = uint64_t{hp.n_layer} + hp.n_layer_nextn;
    if (array->size() != blocks)
        return refuse(file, key,
                      fmt::format("holds {} values for block_count {}", array->size(), blocks));
    hp.recurrent_layers.resize(hp.n_layer);
    for (uint32_t il = 0; il < blocks; ++il) {
        const bool recurrent = std::get<bool>(array->at(il));
        if (il < hp.n_layer) {
            hp.recurrent_layers[il] = recurrent;
        } else if (recurrent) {
            return refuse(file, key,
                          fmt::format("marks block {} recurrent, but it is a NextN block "
                                      "(nextn_predict_layers), which attends",
                                      il));
        }
    }
    return {};
}

}  // namespace

// Layer kinds from per-layer KV head counts, as llama.cpp reads them (lfm2,
// granitehybrid, nemotron_h): 0 marks a recurrent layer (a short
// convolution, a Mamba-2 block; nemotron_h's FFN-only layers are told apart
// by read_ffn_only_layers); the attention layers share one count (the cache
// has one shape for all layers).
Expected<void> read_kv_head_layers(const gguf::File& file, const Keys& k, Hparams& hp) {
    const std::string key = k.key("attention.head_count_kv");
    if (hp.n_layer == 0) return refuse(file, k.key("block_count"), "is 0");
    std::vector<uint32_t> per_layer;
    if (auto r = read_per_layer(file, k, "attention.head_count_kv", hp.n_layer, per_layer); !r)
        return r;
    hp.recurrent_layers.assign(hp.n_layer, false);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const uint32_t kv = per_layer[il];
        hp.recurrent_layers[il] = kv == 0;
        if (kv == 0) continue;
        if (hp.n_head_kv != 0 && kv != hp.n_head_kv)
            return refuse(file, key,
                          fmt::format("lists {} KV heads for layer {} and {} for an earlier "
                                      "attention layer; ferrox needs one count",
                                      kv, il, hp.n_head_kv));
        hp.n_head_kv = kv;
    }
    if (hp.n_head_kv == 0) return refuse(file, key, "is 0 for every layer: no layer attends");
    return {};
}

// Gated DeltaNet layers (qwen35): the ssm.* shape and which layers attend.
// Each size is bounded here, before it sizes a state, a scratch row or a
// tensor's expected shape (binding then names any tensor that disagrees).
Expected<void> read_delta_net(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.ssm_conv_kernel, k.u32("ssm.conv_kernel"));
    FERROX_READ(hp.ssm_inner, k.u32("ssm.inner_size"));
    FERROX_READ(hp.ssm_state, k.u32("ssm.state_size"));
    FERROX_READ(hp.ssm_v_heads, k.u32("ssm.time_step_rank"));
    FERROX_READ(hp.ssm_k_heads, k.u32("ssm.group_count"));
    // Released models: kernel 4, heads 16..64, head dim 128.
    constexpr uint32_t kMaxKernel = 64, kMaxHeads = 1024, kMaxHeadDim = 1024;
    const struct {
        const char* key;
        uint32_t v, max;
    } sizes[] = {{"ssm.conv_kernel", hp.ssm_conv_kernel, kMaxKernel},
                 {"ssm.state_size", hp.ssm_state, kMaxHeadDim},
                 {"ssm.time_step_rank", hp.ssm_v_heads, kMaxHeads},
                 {"ssm.group_count", hp.ssm_k_heads, kMaxHeads}};
    for (const auto& sz : sizes)
        if (sz.v == 0 || sz.v > sz.max)
            return refuse(file, k.key(sz.key), fmt::format("{} is not in 1..{}", sz.v, sz.max));
    if (hp.ssm_v_heads % hp.ssm_k_heads != 0)
        return refuse(file, k.key("ssm.group_count"),
                      fmt::format("{} key heads do not divide ssm.time_step_rank's {} value heads",
                                  hp.ssm_k_heads, hp.ssm_v_heads));
    // llama.cpp's delta rule takes square per-head states: value head dim =
    // key head dim = state_size.
    if (uint64_t{hp.ssm_v_heads} * hp.ssm_state != hp.ssm_inner)
        return refuse(file, k.key("ssm.inner_size"),
                      fmt::format("{} is not ssm.time_step_rank {} x ssm.state_size {}",
                                  hp.ssm_inner, hp.ssm_v_heads, hp.ssm_state));
    // Gated attention multiplies each head's output by a gate as wide as q's head.
    if (hp.head_dim_v != hp.head_dim_k)
        return refuse(file, k.key("attention.value_length"),
                      fmt::format("{} differs from attention.key_length {}: the gate on each "
                                  "head's output needs one head size",
                                  hp.head_dim_v, hp.head_dim_k));
    if (k.has("attention.recurrent_layers")) return read_recurrent_layers(file, k, hp);
    FERROX_READ(hp.full_attention_interval, k.u32_or("full_attention_interval", 4));
    if (hp.full_attention_interval == 0 || hp.full_attention_interval > hp.n_layer)
        return refuse(file, k.key("full_attention_interval"),
                      fmt::format("{} is not in 1..block_count ({})", hp.full_attention_interval,
                                  hp.n_layer));
    // llama.cpp's rule: every full_attention_interval-th layer attends.
    hp.recurrent_layers.resize(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il)
        hp.recurrent_layers[il] = (il + 1) % hp.full_attention_interval != 0;
    return {};
}

// Short-convolution layers (lfm2): the window, bounded before it sizes a
// state; the channels are the embedding's.
Expected<void> read_shortconv(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.ssm_conv_kernel, k.u32("shortconv.l_cache"));
    // Released models: 3. llama.cpp needs a window of at least one past input.
    constexpr uint32_t kMaxKernel = 64;
    if (hp.ssm_conv_kernel < 2 || hp.ssm_conv_kernel > kMaxKernel)
        return refuse(file, k.key("shortconv.l_cache"),
                      fmt::format("{} is not in 2..{}", hp.ssm_conv_kernel, kMaxKernel));
    hp.ssm_inner = hp.n_embd;
    return {};
}

// Mamba-2 layers (mamba2, granitehybrid, nemotron_h): the ssm.* shape, each size
// bounded and checked against the others before it sizes a state, a
// scratch row or a tensor's expected shape.
Expected<void> read_mamba2(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.ssm_conv_kernel, k.u32("ssm.conv_kernel"));
    FERROX_READ(hp.ssm_inner, k.u32("ssm.inner_size"));
    FERROX_READ(hp.ssm_state, k.u32("ssm.state_size"));
    FERROX_READ(hp.ssm_v_heads, k.u32("ssm.time_step_rank"));
    FERROX_READ(hp.ssm_k_heads, k.u32("ssm.group_count"));
    // Released models: kernel 4, state 128, 24..128 heads of 64, 1..8 groups.
    constexpr uint32_t kMaxKernel = 64, kMaxState = 1024, kMaxHeads = 4096;
    constexpr uint32_t kMaxInner = 1u << 20;
    const struct {
        const char* key;
        uint32_t v, min, max;
    } sizes[] = {{"ssm.conv_kernel", hp.ssm_conv_kernel, 2, kMaxKernel},
                 {"ssm.inner_size", hp.ssm_inner, 1, kMaxInner},
                 {"ssm.state_size", hp.ssm_state, 1, kMaxState},
                 {"ssm.time_step_rank", hp.ssm_v_heads, 1, kMaxHeads},
                 {"ssm.group_count", hp.ssm_k_heads, 1, kMaxHeads}};
    for (const auto& sz : sizes)
        if (sz.v < sz.min || sz.v > sz.max)
            return refuse(file, k.key(sz.key),
                          fmt::format("{} is not in {}..{}", sz.v, sz.min, sz.max));
    // Each head takes inner_size / heads channels of x and z; the heads share
    // B and C by groups (head h reads group h / (heads / groups), as llama.cpp).
    if (hp.ssm_inner % hp.ssm_v_heads != 0)
        return refuse(file, k.key("ssm.inner_size"),
                      fmt::format("{} is not a multiple of ssm.time_step_rank {} (the heads)",
                                  hp.ssm_inner, hp.ssm_v_heads));
    if (hp.ssm_v_heads % hp.ssm_k_heads != 0)
        return refuse(file, k.key("ssm.group_count"),
                      fmt::format("{} groups do not divide ssm.time_step_rank's {} heads",
                                  hp.ssm_k_heads, hp.ssm_v_heads));
    return {};
}

// nemotron_h's FFN-only layers: feed_forward_length one per layer (or one
// for all), a width where a layer is an FFN alone and 0 elsewhere. As
// llama.cpp decides, a layer with 0 KV heads (read_kv_head_layers marked it
// recurrent) and a width is an FFN layer, with neither a Mamba-2 block; a
// layer listing both KV heads and a width is no kind and is refused.
Expected<void> read_ffn_only_layers(const gguf::File& file, const Keys& k, Hparams& hp) {
    if (auto r = read_per_layer(file, k, "feed_forward_length", hp.n_layer, hp.n_ff_layers); !r)
        return r;
    // Bounds the FFN's activations, sized from this before any tensor is bound.
    constexpr uint32_t kMaxWidth = 1u << 20;
    hp.ffn_only_layers.assign(hp.n_layer, false);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const uint32_t ff = hp.n_ff_layers[il];
        if (ff == 0) continue;
        if (ff > kMaxWidth)
            return refuse(
                file, k.key("feed_forward_length"),
                fmt::format("{} (layer {}) is not an FFN width in 1..{}", ff, il, kMaxWidth));
        if (!hp.is_recurrent(il))
            return refuse(file, k.key("feed_forward_length"),
                          fmt::format("{} for layer {}, which attention.head_count_kv gives {} KV "
                                      "heads: a layer is attention (KV heads, width 0), an FFN "
                                      "(0 KV heads, a width) or a Mamba-2 block (both 0), not "
                                      "attention and an FFN",
                                      ff, il, hp.n_head_kv));
        hp.recurrent_layers[il] = false;
        hp.ffn_only_layers[il] = true;
    }
    hp.n_ff = *std::max_element(hp.n_ff_layers.begin(), hp.n_ff_layers.end());
    return {};
}

}  // namespace ferrox::model
