#include "ferrox/model/rope_tables.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ferrox/model/architecture.h"

namespace ferrox::model {
namespace {

// YaRN's magnitude for a scaling factor s: 0.1 * m * ln(s) + 1 (1 when s <= 1).
double yarn_mscale(double factor, double m) {
    return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

// The pair whose wavelength turns `rotations` times over the original
// context: n_rot * ln(n_ctx_orig / (rotations * 2 pi)) / (2 ln base).
double yarn_corr_dim(const RopeSpec& spec, double rotations) {
    return spec.n_rot * std::log(spec.n_ctx_orig / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(static_cast<double>(spec.base)));
}

}  // namespace

std::span<const float> rope_factors_for(const Hparams& hp, const RopeFactors& factors,
                                        uint32_t context) {
    if (!factors.freqs.empty()) return factors.freqs;
    return context > hp.rope_n_ctx_orig ? std::span<const float>(factors.long_factors)
                                        : std::span<const float>(factors.short_factors);
}

RopeSpec rope_spec(const Hparams& hp, std::span<const float> freq_factors, bool local) {
    RopeSpec spec;
    spec.n_rot = local && hp.n_rot_swa ? hp.n_rot_swa : hp.n_rot;
    spec.n_ctx_orig = hp.rope_n_ctx_orig;
    spec.beta_fast = hp.rope_yarn_beta_fast;
    spec.beta_slow = hp.rope_yarn_beta_slow;
    // Sliding-window layers: their own base, no per-pair factors (llama.cpp
    // passes none); unscaled (gemma3: YaRN's ramp and magnitude still apply,
    // and with freq_scale 1 they leave the angles alone), scaled as the
    // global layers (gemma2), or plain (olmo2: below).
    spec.base = local ? hp.rope_base_local : hp.rope_base;
    spec.freq_scale =
        local && hp.arch->local_rope != LocalRope::AsGlobal ? 1.0f : hp.rope_freq_scale;
    if (!local) spec.freq_factors.assign(freq_factors.begin(), freq_factors.end());

    // llama.cpp's context: the ramp weight is the file's yarn_ext_factor, else
    // 1 for YaRN and 0 otherwise. With the ramp on, the magnitude is set so
    // that, after the kernel's own 1 + 0.1 ln(1/freq_scale), the net factor is
    // mscale(factor, 1) / mscale(factor, log_mul) -- 1 + 0.1 ln(factor) without
    // a log multiplier; with it off, the file's yarn_attn_factor is used as
    // is. The file's rope.scaling.attn_factor multiplies whatever results.
    // DeepSeek's YaRN (yarn_qk_mscale) takes the numerator's mscale equal to
    // the log multiplier, so the ratio is 1: the pairs keep magnitude 1 and
    // its q.k scale carries mscale^2 (read_hparams).
    spec.ext_factor = hp.rope_yarn_ext_factor >= 0.0f
                          ? hp.rope_yarn_ext_factor
                          : (hp.rope_scaling == RopeScaling::Yarn ? 1.0f : 0.0f);
    double attn = hp.rope_yarn_attn_factor;
    if (spec.ext_factor != 0.0f) {
        const double factor = 1.0 / static_cast<double>(hp.rope_freq_scale);
        const double m = hp.arch->yarn_qk_mscale ? static_cast<double>(hp.rope_yarn_log_mul) : 1.0;
        attn = hp.rope_yarn_log_mul != 0.0f
                   ? yarn_mscale(factor, m) / yarn_mscale(factor, hp.rope_yarn_log_mul)
                   : yarn_mscale(factor, 1.0);
        attn /= 1.0 + 0.1 * std::log(factor);
    }
    spec.attn_factor = static_cast<float>(attn * static_cast<double>(hp.rope_attn_factor));
    if (local && hp.arch->local_rope == LocalRope::Plain) {  // llama.cpp passes ext 0, attn 1
        spec.ext_factor = 0.0f;
        spec.attn_factor = 1.0f;
    }
    return spec;
}

void yarn_corr_dims(const RopeSpec& spec, float dims[2]) {
    const double start = std::floor(yarn_corr_dim(spec, spec.beta_fast));
    const double end = std::ceil(yarn_corr_dim(spec, spec.beta_slow));
    dims[0] = static_cast<float>(std::max(0.0, start));
    dims[1] = static_cast<float>(std::min(static_cast<double>(spec.n_rot) - 1.0, end));
}

void rope_table(const RopeSpec& spec, uint32_t pos0, uint32_t n, uint32_t half,
                std::span<float> cos, std::span<float> sin) {
    std::vector<int32_t> positions(n);
    for (uint32_t p = 0; p < n; ++p) positions[p] = static_cast<int32_t>(pos0 + p);
    rope_table(spec, positions, half, cos, sin);
}

void rope_table(const RopeSpec& spec, std::span<const int32_t> positions, uint32_t half,
                std::span<float> cos, std::span<float> sin) {
    const auto n = static_cast<uint32_t>(positions.size());
    const uint32_t pairs = spec.n_rot / 2;
    float corr_f[2] = {0, 0};
    if (spec.ext_factor != 0.0f) yarn_corr_dims(spec, corr_f);
    const double corr[2] = {corr_f[0], corr_f[1]};
    const double freq_scale = spec.freq_scale;
    // The kernel's YaRN magnitude; 1 + 0.1 ln(1) = 1 when nothing is scaled.
    double mscale = spec.attn_factor;
    if (spec.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / freq_scale);
    for (uint32_t i = 0; i < pairs; ++i) {
        // base^(-2i/n_rot), divided by the pair's factor (rope_freqs, LongRoPE).
        double inv_freq = std::pow(static_cast<double>(spec.base),
                                   -2.0 * static_cast<double>(i) / static_cast<double>(spec.n_rot));
        if (!spec.freq_factors.empty()) inv_freq /= static_cast<double>(spec.freq_factors[i]);
        // YaRN: pairs below corr[0] keep their original (extrapolated) angle,
        // pairs above corr[1] are interpolated, a linear ramp in between.
        double mix = 0.0;
        if (spec.ext_factor != 0.0f) {
            const double y =
                (static_cast<double>(i) - corr[0]) / std::max(0.001, corr[1] - corr[0]);
            mix = (1.0 - std::clamp(y, 0.0, 1.0)) * static_cast<double>(spec.ext_factor);
        }
        // Exactly freq_scale without a ramp: the products then round as they always have.
        const double scale = freq_scale * (1.0 - mix) + mix;
        for (uint32_t p = 0; p < n; ++p) {
            const double theta = static_cast<double>(positions[p]) * scale * inv_freq;
            cos[size_t{p} * half + i] = static_cast<float>(std::cos(theta) * mscale);
            sin[size_t{p} * half + i] = static_cast<float>(std::sin(theta) * mscale);
        }
    }
    for (uint32_t p = 0; p < n; ++p)
        for (uint32_t i = pairs; i < half; ++i) {
            cos[size_t{p} * half + i] = 1.0f;
            sin[size_t{p} * half + i] = 0.0f;
        }
}

}  // namespace ferrox::model
