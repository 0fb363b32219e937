#include "ferrox/model/ops.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "ferrox/quant/half.h"

namespace ferrox::model::ops {

void rms_norm(std::span<const float> x, std::span<const float> w, float eps, std::span<float> y) {
    double sum = 0;
    for (float v : x) sum += static_cast<double>(v) * static_cast<double>(v);
    const float scale = static_cast<float>(
        1.0 / std::sqrt(sum / static_cast<double>(x.size()) + static_cast<double>(eps)));
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
}

void layer_norm(std::span<const float> x, std::span<const float> w, std::span<const float> b,
                float eps, std::span<float> y) {
    const auto n = static_cast<double>(x.size());
    double sum = 0;
    for (const float v : x) sum += static_cast<double>(v);
    const float mean = static_cast<float>(sum) / static_cast<float>(x.size());
    double sq = 0;
    for (const float v : x) sq += static_cast<double>(v - mean) * static_cast<double>(v - mean);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sq / n) + eps);
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * scale * w[i] + b[i];
}

void rope_angles(uint32_t pos, float base, float freq_scale, std::span<float> cos,
                 std::span<float> sin) {
    const size_t half = cos.size();
    const auto d = static_cast<double>(2 * half);
    for (size_t i = 0; i < half; ++i) {
        const double theta = static_cast<double>(pos) * static_cast<double>(freq_scale) *
                             std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / d);
        cos[i] = static_cast<float>(std::cos(theta));
        sin[i] = static_cast<float>(std::sin(theta));
    }
}

void rope_rotate(std::span<float> head, std::span<const float> cos, std::span<const float> sin,
                 RopeStyle style) {
    const size_t half = head.size() / 2;
    for (size_t i = 0; i < half; ++i) {
        // Normal rotates adjacent pairs; Neox pairs element i with i + d/2.
        const size_t a = style == RopeStyle::Normal ? 2 * i : i;
        const size_t b = style == RopeStyle::Normal ? 2 * i + 1 : i + half;
        const float x0 = head[a], x1 = head[b];
        head[a] = x0 * cos[i] - x1 * sin[i];
        head[b] = x0 * sin[i] + x1 * cos[i];
    }
}

void rope(std::span<float> head, uint32_t pos, float base, float freq_scale, RopeStyle style) {
    std::vector<float> cos(head.size() / 2), sin(head.size() / 2);
    rope_angles(pos, base, freq_scale, cos, sin);
    rope_rotate(head, cos, sin, style);
}

namespace {

// exp(v - max) in place, and their sum.
double exp_shifted(std::span<float> x, float max) {
    double sum = 0;
    for (float& v : x) {
        v = std::exp(v - max);
        sum += static_cast<double>(v);
    }
    return sum;
}

}  // namespace

void softmax(std::span<float> x) {
    if (x.empty()) return;
    const float max = *std::max_element(x.begin(), x.end());
    const float inv = static_cast<float>(1.0 / exp_shifted(x, max));
    for (float& v : x) v *= inv;
}

void softmax_with_sink(std::span<float> x, float sink) {
    if (x.empty()) return;
    const float max = std::max(*std::max_element(x.begin(), x.end()), sink);
    const double sum = exp_shifted(x, max) + static_cast<double>(std::exp(sink - max));
    const float inv = static_cast<float>(1.0 / sum);
    for (float& v : x) v *= inv;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

namespace {

// GELU of every f16 value, rounded to f16: the table llama.cpp's CPU backend
// looks GeGLU up in. Reading it gives its arithmetic (the parity tests compare
// against it) at a tenth of the cost of tanhf.
const std::array<float, 65536>& gelu_f16_table() {
    static const auto table = [] {
        auto t = std::make_unique<std::array<float, 65536>>();
        constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
        for (uint32_t bits = 0; bits < 65536; ++bits) {
            const float x = quant::fp16_to_fp32(static_cast<uint16_t>(bits));
            const float g =
                0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
            (*t)[bits] = quant::fp16_to_fp32(quant::fp32_to_fp16(g));
        }
        return t;
    }();
    return *table;
}

// f32 -> f16 bits, nearest even, for |x| < 65504: the normal range by integer
// rounding, the rest (f16 subnormals) by the exact general routine.
uint16_t to_f16_bits(float x) {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude < 0x38800000u) return quant::fp32_to_fp16(x);  // below 2^-14
    const uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | ((rounded >> 13) - (112u << 10)));
}

}  // namespace

float gelu_tanh_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return gelu_f16_table()[to_f16_bits(x)];
}

float swiglu_oai(float gate, float up) {
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    const float g = std::min(gate, kLimit);
    const float u = std::clamp(up, -kLimit, kLimit);
    return g / (1.0f + std::exp(kAlpha * -g)) * (u + 1.0f);
}

void glu(std::span<float> gate, std::span<const float> up, FfnActivation act) {
    if (act == FfnActivation::Silu) {
        for (size_t i = 0; i < gate.size(); ++i) gate[i] = silu(gate[i]) * up[i];
        return;
    }
    if (act == FfnActivation::SwigluOai) {
        for (size_t i = 0; i < gate.size(); ++i) gate[i] = swiglu_oai(gate[i], up[i]);
        return;
    }
    const auto& table = gelu_f16_table();
    for (size_t i = 0; i < gate.size(); ++i) {
        const float x = gate[i];
        const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[to_f16_bits(x)];
        gate[i] = g * up[i];
    }
}

void keep_top_groups(std::span<float> scores, uint32_t groups, uint32_t used,
                     std::span<float> group_scores, std::span<uint32_t> group_order) {
    const size_t per = scores.size() / groups;
    for (uint32_t g = 0; g < groups; ++g) {
        float best = -std::numeric_limits<float>::infinity(), second = best;
        for (const float v : scores.subspan(g * per, per)) {
            second = std::max(second, std::min(best, v));
            best = std::max(best, v);
        }
        group_scores[g] = best + second;
    }
    std::iota(group_order.begin(), group_order.end(), 0u);
    std::partial_sort(group_order.begin(), group_order.begin() + used, group_order.end(),
                      [&](uint32_t x, uint32_t y) { return group_scores[x] > group_scores[y]; });
    // A group is kept when it is among the first `used` of the order.
    for (uint32_t j = used; j < groups; ++j)
        std::fill_n(scores.begin() + group_order[j] * per, per,
                    -std::numeric_limits<float>::infinity());
}

void add(std::span<float> x, std::span<const float> y) {
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

void attend(const AttentionShape& shape, std::span<const float> q, const float* keys,
            const float* values, uint32_t first, uint32_t last, std::span<float> scores,
            std::span<float> out) {
    const uint32_t group = shape.n_head / shape.n_head_kv;
    const size_t k_row = size_t{shape.n_head_kv} * shape.head_dim_k;
    const size_t v_row = size_t{shape.n_head_kv} * shape.head_dim_v;
    const std::span<float> window = scores.subspan(first, last - first + 1);
    for (uint32_t h = 0; h < shape.n_head; ++h) {
        const uint32_t kvh = h / group;
        const float* qh = q.data() + size_t{h} * shape.head_dim_k;
        for (uint32_t p = first; p <= last; ++p) {
            const float* kp = keys + p * k_row + size_t{kvh} * shape.head_dim_k;
            float dot = 0;
            for (uint32_t i = 0; i < shape.head_dim_k; ++i) dot += qh[i] * kp[i];
            scores[p] = dot * shape.scale;
        }
        if (shape.softcap != 0.0f) {  // as llama.cpp: x (1 / cap), tanh, x cap
            const float inv = 1.0f / shape.softcap;
            for (uint32_t p = first; p <= last; ++p)
                scores[p] = std::tanh(scores[p] * inv) * shape.softcap;
        }
        if (shape.sinks)
            softmax_with_sink(window, shape.sinks[h]);
        else
            softmax(window);
        float* oh = out.data() + size_t{h} * shape.head_dim_v;
        std::fill(oh, oh + shape.head_dim_v, 0.0f);
        for (uint32_t p = first; p <= last; ++p) {
            const float* vp = values + p * v_row + size_t{kvh} * shape.head_dim_v;
            const float w = scores[p];
            for (uint32_t i = 0; i < shape.head_dim_v; ++i) oh[i] += w * vp[i];
        }
    }
}

}  // namespace ferrox::model::ops
