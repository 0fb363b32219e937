// Host-side decoder ops: norms, RoPE, attention, activations, softmax.
// Plain loops over spans the compiler can vectorise; every weight product
// goes through the Dispatcher instead, never through here.
#pragma once

#include <cstdint>
#include <span>

#include "ferrox/api.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model::ops {

// y = x / sqrt(mean(x^2) + eps) * w; y may alias x.
FERROX_API void rms_norm(std::span<const float> x, std::span<const float> w, float eps,
                         std::span<float> y);

// LayerNorm with a bias (BERT's): y = (x - mean) / sqrt(var + eps) * w + b,
// the mean and variance as ggml_norm forms them (double sums rounded to
// float); y may alias x.
FERROX_API void layer_norm(std::span<const float> x, std::span<const float> w,
                           std::span<const float> b, float eps, std::span<float> y);

// Rotates one head vector (its full length) in place for position `pos`:
// angle_i = pos * freq_scale * base^(-2i/d).
FERROX_API void rope(std::span<float> head, uint32_t pos, float base, float freq_scale,
                     RopeStyle style);

// The same in two steps, so every head of a position shares one set of
// angles: cos/sin hold d/2 values each.
FERROX_API void rope_angles(uint32_t pos, float base, float freq_scale, std::span<float> cos,
                            std::span<float> sin);
FERROX_API void rope_rotate(std::span<float> head, std::span<const float> cos,
                            std::span<const float> sin, RopeStyle style);

// In-place softmax, max-subtracted.
FERROX_API void softmax(std::span<float> x);
// The same with one more logit, `sink`, in the denominator only (attention
// sinks): the max includes it, its term exp(sink - max) joins the sum, as
// llama.cpp's soft_max with sinks.
FERROX_API void softmax_with_sink(std::span<float> x, float sink);

FERROX_API float silu(float x);
FERROX_API float gelu_tanh(float x);

// gelu_tanh of x rounded to f16, looked up and rounded to f16 again, as
// llama.cpp's CPU backend computes GeGLU; 0 below -10 and x above 10.
FERROX_API float gelu_tanh_f16(float x);

// gpt-oss's GLU: g = min(gate, 7), u = clamp(up, -7, 7), g sigmoid(1.702 g) (u + 1),
// in llama.cpp's order of operations.
FERROX_API float swiglu_oai(float gate, float up);

// gate[i] = act(gate[i]) * up[i]; GELU through gelu_tanh_f16.
FERROX_API void glu(std::span<float> gate, std::span<const float> up, FfnActivation act);

// Group-limited routing (DeepSeek V2/V3's, as llama.cpp's build_moe_ffn):
// `scores` holds `groups` equal groups of consecutive experts; each group
// scores the sum of its two best, the `used` best groups keep theirs and
// every other expert's becomes -inf. `group_scores` and `group_order` hold
// `groups` values each; groups of at least 2, used in 1..groups.
FERROX_API void keep_top_groups(std::span<float> scores, uint32_t groups, uint32_t used,
                                std::span<float> group_scores, std::span<uint32_t> group_order);

// x += y
FERROX_API void add(std::span<float> x, std::span<const float> y);

struct AttentionShape {
    uint32_t n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
    float scale = 1.0f;
    // Soft-capped scores (gemma2): cap x tanh(score / cap) before the
    // softmax, score = scale x q . k; 0: not capped.
    float softcap = 0.0f;
    // Attention sinks (gpt-oss): n_head logits, one more term in each head's
    // softmax with no value; null: none.
    const float* sinks = nullptr;
};

// One query row attends to cached positions [first, last] (inclusive; the
// caller applies the causal and sliding-window limits). `keys`/`values` are
// the layer's cache, row p at p * n_head_kv * head_dim. Query head h reads
// kv head h / (n_head / n_head_kv) (GQA). `scores` needs last + 1 floats.
FERROX_API void attend(const AttentionShape& shape, std::span<const float> q, const float* keys,
                       const float* values, uint32_t first, uint32_t last, std::span<float> scores,
                       std::span<float> out);

}  // namespace ferrox::model::ops
