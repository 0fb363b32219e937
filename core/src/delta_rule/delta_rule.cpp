// The math is llama.cpp's gated delta rule (ggml's gated_delta_net, as
// src/models/delta-net-base.cpp calls it), written per token and head.
#include "delta_rule.h"

#include <cmath>
#include <cstddef>

namespace ferrox::delta_rule {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// As ggml: the identity past 20, where log(1 + e^x) rounds to x.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Partial sums a dot product over a state row keeps apart: a fixed order
// (the same for every batch, so batch invariance holds), and one the
// compiler keeps in vector registers, where a single running sum would make
// every product wait for the one before.
constexpr uint32_t kLanes = 8;

// The two row loops below are most of a Gated DeltaNet step, and this code is
// built for the baseline ISA: on x86-64 GCC also compiles them for AVX2
// (8 lanes = one 256-bit register) and picks the clone at load time. AVX2
// without FMA: each lane's multiplies and adds stay separate roundings, so
// every clone gives the baseline's bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FERROX_ROW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FERROX_ROW_CLONES
#endif

float sum_lanes(const float (&part)[kLanes]) {
    float s = 0;
    for (float p : part) s += p;
    return s;
}

// One row of a head's state, row[i] for i < n: decays it in place and returns
// its dot product with k, in one pass over the row. (Indices are size_t and
// the lanes a fixed block: with 32-bit indices that may wrap, GCC does not
// vectorise the loop.)
FERROX_ROW_CLONES float decay_then_dot(float* __restrict row, float decay,
                                       const float* __restrict k, uint32_t n) {
    float part[kLanes] = {};
    const size_t whole = n - n % kLanes;
    for (size_t i = 0; i < whole; i += kLanes) {
        float* r = row + i;
        const float* kb = k + i;
        for (size_t l = 0; l < kLanes; ++l) {
            r[l] *= decay;
            part[l] += r[l] * kb[l];
        }
    }
    for (size_t i = whole; i < n; ++i) {
        row[i] *= decay;
        part[i - whole] += row[i] * k[i];
    }
    return sum_lanes(part);
}

// Adds delta x k to the row and returns its dot product with q, in one pass.
FERROX_ROW_CLONES float update_then_dot(float* __restrict row, float delta,
                                        const float* __restrict k, const float* __restrict q,
                                        uint32_t n) {
    float part[kLanes] = {};
    const size_t whole = n - n % kLanes;
    for (size_t i = 0; i < whole; i += kLanes) {
        float* r = row + i;
        const float* kb = k + i;
        const float* qb = q + i;
        for (size_t l = 0; l < kLanes; ++l) {
            r[l] += delta * kb[l];
            part[l] += r[l] * qb[l];
        }
    }
    for (size_t i = whole; i < n; ++i) {
        row[i] += delta * k[i];
        part[i - whole] += row[i] * q[i];
    }
    return sum_lanes(part);
}

}  // namespace

const char* invalid(const ferrox_delta_net_desc& d) {
    if (d.struct_size < sizeof(ferrox_delta_net_desc)) return "delta_net: descriptor too short";
    if (d.n_k_heads == 0 || d.n_v_heads == 0 || d.head_dim == 0)
        return "delta_net: zero heads or head size";
    if (d.n_v_heads % d.n_k_heads != 0)
        return "delta_net: value heads are not a multiple of key heads";
    const uint64_t S = d.head_dim;
    if (d.qkv_stride < (2 * uint64_t{d.n_k_heads} + d.n_v_heads) * S ||
        d.out_stride < uint64_t{d.n_v_heads} * S)
        return "delta_net: a row stride is shorter than the row";
    if (d.n_rows > 0 && (!d.qkv || !d.beta || !d.alpha || !d.out))
        return "delta_net: null row pointer";
    if (!d.dt_bias || !d.a || !d.state) return "delta_net: null head pointer";
    return nullptr;
}

// Head by head rather than token by token, so that the head's state (S x S
// floats) stays in cache across the tokens of a prompt chunk.
void run_head(const ferrox_delta_net_desc& d, uint32_t h) {
    const uint32_t S = d.head_dim, kh = d.n_k_heads, vh = d.n_v_heads;
    // qwen35's files tile the key heads (h mod kh); in qwen3next consecutive
    // value heads share one (h / (vh / kh)).
    const uint32_t key_head = d.grouped ? h / (vh / kh) : h % kh;
    const float scale = 1.0f / std::sqrt(static_cast<float>(S));
    float* M = d.state + uint64_t{h} * S * S;
    for (uint32_t r = 0; r < d.n_rows; ++r) {
        const float* qkv = d.qkv + r * d.qkv_stride;
        const float* qh = qkv + uint64_t{key_head} * S;
        const float* kk = qkv + (uint64_t{kh} + key_head) * S;
        const float* vv = qkv + 2 * uint64_t{kh} * S + uint64_t{h} * S;
        const uint64_t at = uint64_t{r} * vh + h;
        const float decay = std::exp(softplus(d.alpha[at] + d.dt_bias[h]) * d.a[h]);
        const float beta = sigmoid(d.beta[at]);
        float* o = d.out + r * d.out_stride + uint64_t{h} * S;
        for (uint32_t j = 0; j < S; ++j) {
            float* row = M + uint64_t{j} * S;
            const float delta = (vv[j] - decay_then_dot(row, decay, kk, S)) * beta;
            o[j] = update_then_dot(row, delta, kk, qh, S) * scale;
        }
    }
}

}  // namespace ferrox::delta_rule
