// RoPE angle tables: a pure function from the hyper-parameters (and a file's
// per-pair frequency factors) and a run of positions to the cos/sin each
// position's heads are rotated by. The rope op only rotates; every scaling
// scheme lives here, on the host, once per position (not per head or layer).
//
// The numbers follow llama.cpp: its context turns the file's keys into
// (freq_scale, ext_factor, attn_factor) (rope_spec), its ggml rope kernel
// turns those into angles and magnitudes (rope_table). Schemes:
//   linear    angle = pos * freq_scale * base^(-2i/n_rot)
//   rope_freqs / LongRoPE: the same angle divided by a per-pair factor
//             (Llama 3.1+ `rope_freqs.weight`; Phi-3's short/long factors,
//             the long ones when the context exceeds the original one)
//   YaRN      per pair, a ramp between the interpolated and the original
//             angle (beta_fast/beta_slow bound it, ext_factor weighs it), and
//             a magnitude 1 + 0.1 ln(1/freq_scale) (log multiplier: the ratio
//             of two such terms; ramp off: the file's yarn_attn_factor)
//   partial   only the first n_rot dimensions of a head rotate, with
//             exponents over n_rot; the tables' pairs past n_rot / 2 are the
//             identity (see rope_entry_rotates in core/src/model/steps.h)
// A magnitude other than 1 (YaRN, LongRoPE's attention factor) multiplies cos
// and sin, so q and k are both scaled by it and q.k by its square -- as in
// llama.cpp, which is why the attention entry's scale stays the architecture's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

// Everything one kind of layer (global or sliding-window) needs to turn a
// position into angles; the arguments of llama.cpp's ggml_rope_ext.
struct RopeSpec {
    uint32_t n_rot = 0;  // rotated dimensions (even); pairs at or past n_rot / 2 stay as they are
    float base = 10000.0f;
    float freq_scale = 1.0f;                    // 1 / scaling factor (linear, YaRN, LongRoPE)
    std::vector<float> freq_factors;            // n_rot / 2 divisors of the angle, or empty
    float ext_factor = 0.0f;                    // YaRN's ramp weight; 0: no ramp, no magnitude term
    float attn_factor = 1.0f;                   // multiplies cos and sin
    float beta_fast = 32.0f, beta_slow = 1.0f;  // YaRN: the ramp's ends, in rotations
    uint32_t n_ctx_orig = 0;                    // YaRN: the context the model was trained for
};

// A file's per-pair divisors, n_rot / 2 each or empty: `rope_freqs.weight`
// (Llama 3.1+), LongRoPE's `rope_factors_short.weight` / `rope_factors_long.weight`.
struct RopeFactors {
    std::vector<float> freqs, short_factors, long_factors;
};

// The divisors a run over `context` positions uses, as llama.cpp chooses them:
// rope_freqs when present, else LongRoPE's long factors when the context
// exceeds the original one, else its short ones.
FERROX_API std::span<const float> rope_factors_for(const Hparams& hp, const RopeFactors& factors,
                                                   uint32_t context);

// The spec of global (`local` false) or sliding-window layers, with
// `freq_factors` from rope_factors_for.
FERROX_API RopeSpec rope_spec(const Hparams& hp, std::span<const float> freq_factors, bool local);

// YaRN's first and last corrected pair: llama.cpp's ggml_rope_yarn_corr_dims.
FERROX_API void yarn_corr_dims(const RopeSpec& spec, float dims[2]);

// cos/sin of positions pos0 .. pos0 + n - 1, `half` entries per position
// (half = head_dim / 2 >= n_rot / 2); the entries past n_rot / 2 are cos 1,
// sin 0, so a whole-head rope over adjacent pairs leaves those dimensions
// exactly alone (NeoX pairs of a rotated prefix need a rope that knows n_rot).
FERROX_API void rope_table(const RopeSpec& spec, uint32_t pos0, uint32_t n, uint32_t half,
                           std::span<float> cos, std::span<float> sin);
// The same for any positions (a batch's rows, each at its own sequence's position).
FERROX_API void rope_table(const RopeSpec& spec, std::span<const int32_t> positions, uint32_t half,
                           std::span<float> cos, std::span<float> sin);

}  // namespace ferrox::model
