// ferrox's own K-quant quantizers (the gguf package has none to match).
// Plain and clear rather than clever: per sub-block, try a handful of
// candidate scales, keep the least-squares best, then quantize the sub-block
// scales against the f16 super-scales and re-derive the codes from the
// scales actually stored, so encoder and decoder agree exactly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "block_codec.h"

namespace ferrox::quant::detail {
namespace {

constexpr double kNoFit = std::numeric_limits<double>::infinity();

int round_clamped(float value, int lo, int hi) {
    if (!(value >= static_cast<float>(lo))) return lo;  // also NaN
    if (value >= static_cast<float>(hi)) return hi;
    return static_cast<int>(std::lround(value));
}

// x ~ scale * q - min with q in [0, q_max], scale >= 0, min >= 0 (the formats
// store a non-negative min that is subtracted).
struct AffineFit {
    float scale = 0.0f;
    float min = 0.0f;
};

// Least-squares x ~ scale * code + offset for fixed codes, with offset <= 0
// (the formats subtract a non-negative min). Returns the squared error.
double fit_codes(const float* x, const int* codes, int n, double& scale, double& offset) {
    double sum_q = 0, sum_qq = 0, sum_x = 0, sum_xq = 0;
    for (int i = 0; i < n; ++i) {
        const auto xi = static_cast<double>(x[i]);
        sum_q += codes[i];
        sum_qq += static_cast<double>(codes[i]) * codes[i];
        sum_x += xi;
        sum_xq += xi * codes[i];
    }
    const double det = n * sum_qq - sum_q * sum_q;
    if (det <= 0) return kNoFit;
    scale = (n * sum_xq - sum_q * sum_x) / det;
    offset = (sum_x - scale * sum_q) / n;
    if (offset > 0) {  // a positive offset is not representable: pin it at 0
        offset = 0;
        scale = sum_xq / sum_qq;
    }
    if (scale <= 0) return kNoFit;
    double error = 0;
    for (int i = 0; i < n; ++i) {
        const double diff = scale * codes[i] + offset - static_cast<double>(x[i]);
        error += diff * diff;
    }
    return error;
}

AffineFit fit_affine(const float* x, int n, int q_max) {
    const auto lo = static_cast<double>(std::min(0.0f, *std::min_element(x, x + n)));
    const auto hi = static_cast<double>(*std::max_element(x, x + n));
    AffineFit best{static_cast<float>((hi - lo) / q_max), static_cast<float>(-lo)};
    if (!(hi > lo)) return best;
    double best_error = kNoFit;
    // Start from ranges stretched a little either way; for each, alternate
    // rounding to codes and a least-squares refit a few times (Lloyd style).
    for (int step = -10; step <= 10; ++step) {
        double scale = (hi - lo) / (q_max + 0.1 * step);
        double offset = lo;
        for (int round = 0; round < 4; ++round) {
            int codes[32];
            for (int i = 0; i < n; ++i) {
                const double position = (static_cast<double>(x[i]) - offset) / scale;
                codes[i] = round_clamped(static_cast<float>(position), 0, q_max);
            }
            double new_scale = 0, new_offset = 0;
            const double error = fit_codes(x, codes, n, new_scale, new_offset);
            if (!std::isfinite(error)) break;
            if (error < best_error) {
                best_error = error;
                best = {static_cast<float>(new_scale), static_cast<float>(-new_offset)};
            }
            scale = new_scale;
            offset = new_offset;
        }
    }
    return best;
}

// x ~ scale * q with q in [q_lo, q_hi], scale >= 0: the same candidate search.
float fit_symmetric(const float* x, int n, int q_lo, int q_hi) {
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    if (amax == 0.0f) return 0.0f;
    float best_scale = amax / static_cast<float>(q_hi);
    double best_gain = -1;
    for (int step = -10; step <= 10; ++step) {
        const double inverse = (q_hi + 0.1 * step) / static_cast<double>(amax);
        double sum_qq = 0, sum_xq = 0;
        for (int i = 0; i < n; ++i) {
            const auto xi = static_cast<double>(x[i]);
            const int q = round_clamped(static_cast<float>(xi * inverse), q_lo, q_hi);
            sum_qq += static_cast<double>(q) * q;
            sum_xq += xi * q;
        }
        // Error = sum x^2 - sum_xq^2 / sum_qq at the optimal scale.
        if (sum_qq > 0 && sum_xq > 0 && sum_xq * sum_xq / sum_qq > best_gain) {
            best_gain = sum_xq * sum_xq / sum_qq;
            best_scale = static_cast<float>(sum_xq / sum_qq);
        }
    }
    return best_scale;
}

// The f16 super-scale for sub-block values up to `largest`, given `levels`
// integer steps; returns the value as stored (decoded f16).
float stored_super_scale(float largest, int levels, uint8_t* field) {
    write_f16(field, largest / static_cast<float>(levels));
    return read_f16(field);
}

int quantize_against(float value, float unit, int max_code) {
    return unit > 0.0f ? round_clamped(value / unit, 0, max_code) : 0;
}

// Q4_K/Q5_K share everything but the code width (4 or 5 bits).
struct AffineSuperBlock {
    float d = 0.0f, dmin = 0.0f;  // as stored
    int scales[8] = {}, mins[8] = {};
    int codes[kSuper] = {};
};

AffineSuperBlock quantize_affine_super(const float* in, uint8_t* d_field, uint8_t* dmin_field,
                                       int q_max) {
    AffineSuperBlock out;
    AffineFit fits[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        fits[j] = fit_affine(in + 32 * j, 32, q_max);
        max_scale = std::max(max_scale, fits[j].scale);
        max_min = std::max(max_min, fits[j].min);
    }
    out.d = stored_super_scale(max_scale, 63, d_field);
    out.dmin = stored_super_scale(max_min, 63, dmin_field);
    for (int j = 0; j < 8; ++j) {
        // The rounded 6-bit scale and min are good; one step either way is
        // sometimes better once the codes are re-derived, so try all nine.
        const int scale_guess = quantize_against(fits[j].scale, out.d, 63);
        const int min_guess = quantize_against(fits[j].min, out.dmin, 63);
        double best_error = kNoFit;
        for (int scale = std::max(0, scale_guess - 1); scale <= std::min(63, scale_guess + 1);
             ++scale) {
            for (int min = std::max(0, min_guess - 1); min <= std::min(63, min_guess + 1); ++min) {
                const float unit = out.d * static_cast<float>(scale);
                const float offset = out.dmin * static_cast<float>(min);
                int codes[32];
                double error = 0;
                for (int i = 0; i < 32; ++i) {
                    const float x = in[32 * j + i];
                    codes[i] = quantize_against(x + offset, unit, q_max);
                    const double diff =
                        static_cast<double>(unit * static_cast<float>(codes[i]) - offset - x);
                    error += diff * diff;
                }
                if (error < best_error) {
                    best_error = error;
                    out.scales[j] = scale;
                    out.mins[j] = min;
                    std::copy(codes, codes + 32, out.codes + 32 * j);
                }
            }
        }
    }
    return out;
}

// Inverse of the 12-byte 6-bit scale/min packing read by k_scale_min.
void pack_scales_mins(const int* scales, const int* mins, uint8_t* packed) {
    for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
        packed[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
        packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((mins[j + 4] & 0x0f) << 4));
    }
}

// Low nibble of element e goes to byte 32*(sub/2) + e%32, high half for odd sub-blocks.
void pack_k_nibbles(const int* codes, uint8_t* qs) {
    std::fill(qs, qs + 128, uint8_t{0});
    for (int e = 0; e < kSuper; ++e) {
        const int sub = e / 32;
        qs[32 * (sub / 2) + e % 32] |= static_cast<uint8_t>((codes[e] & 0x0f) << (4 * (sub % 2)));
    }
}

}  // namespace

void quantize_q4_k(const float* in, uint8_t* block) {
    const AffineSuperBlock q = quantize_affine_super(in, block, block + 2, 15);
    pack_scales_mins(q.scales, q.mins, block + 4);
    pack_k_nibbles(q.codes, block + 16);
}

void quantize_q5_k(const float* in, uint8_t* block) {
    const AffineSuperBlock q = quantize_affine_super(in, block, block + 2, 31);
    pack_scales_mins(q.scales, q.mins, block + 4);
    uint8_t* qh = block + 16;
    std::fill(qh, qh + 32, uint8_t{0});
    for (int e = 0; e < kSuper; ++e)
        qh[e % 32] |= static_cast<uint8_t>(((q.codes[e] >> 4) & 1) << (e / 32));
    pack_k_nibbles(q.codes, block + 48);
}

void quantize_q6_k(const float* in, uint8_t* block) {
    float sub_scales[16];
    float max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
        sub_scales[j] = fit_symmetric(in + 16 * j, 16, -32, 31);
        max_scale = std::max(max_scale, sub_scales[j]);
    }
    const float d = stored_super_scale(max_scale, 127, block + 208);
    uint8_t* ql = block;
    uint8_t* qh = block + 128;
    std::fill(ql, ql + 192, uint8_t{0});
    for (int j = 0; j < 16; ++j) {
        const int scale = quantize_against(sub_scales[j], d, 127);
        block[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(scale));
        const float unit = d * static_cast<float>(scale);
        for (int e = 16 * j; e < 16 * j + 16; ++e) {
            const int q = unit > 0.0f ? round_clamped(in[e] / unit, -32, 31) : 0;
            const auto code = static_cast<uint8_t>(q + 32);  // stored unsigned, 0..63
            ql[64 * (e / 128) + e % 64] |=
                static_cast<uint8_t>((code & 0x0f) << (4 * ((e % 128) / 64)));
            qh[32 * (e / 128) + e % 32] |=
                static_cast<uint8_t>((code >> 4) << (2 * ((e % 128) / 32)));
        }
    }
}

// Q8_K: float32 d = amax / 127, codes round(x / d), bsums = sums of 16 codes.
void quantize_q8_k(const float* in, uint8_t* block) {
    float amax = 0.0f;
    for (int e = 0; e < kSuper; ++e) amax = std::max(amax, std::fabs(in[e]));
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    write_f32(block, amax > 0.0f ? 1.0f / inverse : 0.0f);
    for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int e = 16 * j; e < 16 * j + 16; ++e) {
            const int q = round_clamped(in[e] * inverse, -127, 127);
            block[4 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
            sum += q;
        }
        write_u16(block + 260 + 2 * j, static_cast<uint16_t>(static_cast<int16_t>(sum)));
    }
}

}  // namespace ferrox::quant::detail
