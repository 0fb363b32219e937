// The resident-decoding kernels' math (plugins/cuda/resident_ops.cuh), walked
// in each kernel's own order on the CPU, against the core's host ops
// (ferrox::model::ops) and ferrox_quant: f16 rounding and GeGLU bit for bit,
// the rest by NMSE. Runs on every host; the GPU tests add the launches.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "attention_split.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/half.h"
#include "resident_ops_on_host.h"
#include "rope_case.h"

namespace {

namespace ops = ferrox::model::ops;
namespace host = ferrox::cuda::test;

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
    double error = 0;
    double signal = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
        error += d * d;
        signal += static_cast<double>(want[i]) * static_cast<double>(want[i]);
    }
    return signal > 0 ? error / signal : error;
}

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

bool same_bits(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) ||
           std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

uint32_t test_seed() {
    static const uint32_t seed = std::random_device{}();
    return seed;
}

// Exact-path math (same float operations, other summation order) stays far
// below this; a wrong index or formula lands near 1.
constexpr double kExactNmse = 1e-10;

}  // namespace

TEST_CASE("the kernels' f32 -> f16 rounding matches ferrox_quant bit for bit") {
    std::mt19937 rng(test_seed());
    INFO("seed " << test_seed());
    uint64_t mismatches = 0;
    auto check = [&](float x) {
        const uint16_t want = ferrox::quant::fp32_to_fp16(x);
        const uint16_t got = host::f32_to_f16_on_host(x);
        const bool want_nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu) != 0;
        const bool got_nan = (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0;
        // NaN payloads differ by design (quiet vs numpy's); both must be NaN.
        if (want_nan || got_nan ? want_nan != got_nan : want != got) {
            if (mismatches++ < 5) UNSCOPED_INFO("x bits " << std::bit_cast<uint32_t>(x));
        }
    };
    // Every f16 value, and the f32 values on and next to each rounding midpoint.
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        const float value = ferrox::quant::fp16_to_fp32(static_cast<uint16_t>(h));
        const uint32_t bits = std::bit_cast<uint32_t>(value);
        check(value);
        for (uint32_t delta : {0xfffu, 0x1000u, 0x1001u})
            if ((bits & 0x7f800000u) != 0x7f800000u) check(std::bit_cast<float>(bits + delta));
    }
    std::uniform_int_distribution<uint32_t> any;
    for (int i = 0; i < 1000000; ++i) check(std::bit_cast<float>(any(rng)));
    CHECK(mismatches == 0);
}

TEST_CASE("the kernels' GeGLU equals the core's gelu_tanh_f16 bit for bit") {
    uint64_t mismatches = 0;
    uint64_t nan_inputs = 0;
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        const float x = ferrox::quant::fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(x)) {
            // The kernel keeps a NaN a NaN; the core's table index wraps a NaN
            // onto a finite entry, so NaN inputs are not compared.
            CHECK(std::isnan(host::gelu_tanh_f16_on_host(x)));
            ++nan_inputs;
            continue;
        }
        if (!same_bits(host::gelu_tanh_f16_on_host(x), ops::gelu_tanh_f16(x))) {
            if (mismatches++ < 5) UNSCOPED_INFO("f16 input bits " << h);
        }
    }
    CHECK(mismatches == 0);
    CHECK(nan_inputs == 2046);

    // Inputs that are not f16 values round first, exactly as the core's lookup.
    std::mt19937 rng(test_seed() + 1);
    INFO("seed " << test_seed());
    const std::vector<float> gate = uniform(200000, -12.0f, 12.0f, rng);
    const std::vector<float> up = uniform(gate.size(), -2.0f, 2.0f, rng);
    std::vector<float> want = gate;
    ops::glu(want, up, ferrox::model::FfnActivation::GeluTanh);
    uint64_t glu_mismatches = 0;
    for (size_t i = 0; i < gate.size(); ++i)
        if (!same_bits(host::glu_on_host(FERROX_GLU_GEGLU, gate[i], up[i]), want[i]))
            ++glu_mismatches;
    CHECK(glu_mismatches == 0);
}

TEST_CASE("the kernels' SwiGLU matches the core's") {
    std::mt19937 rng(test_seed() + 2);
    INFO("seed " << test_seed());
    const std::vector<float> gate = uniform(100000, -20.0f, 20.0f, rng);
    const std::vector<float> up = uniform(gate.size(), -2.0f, 2.0f, rng);
    std::vector<float> want = gate;
    ops::glu(want, up, ferrox::model::FfnActivation::Silu);
    std::vector<float> got(gate.size());
    for (size_t i = 0; i < gate.size(); ++i)
        got[i] = host::glu_on_host(FERROX_GLU_SWIGLU, gate[i], up[i]);
    CHECK(nmse(got, want) < kExactNmse);
}

TEST_CASE("the rms_norm kernel's reduction matches the core's rms_norm") {
    std::mt19937 rng(test_seed() + 3);
    INFO("seed " << test_seed());
    for (const uint32_t dim : {1u, 33u, 128u, 2048u, 5000u}) {
        const uint64_t rows = 7;
        INFO("dim " << dim);
        const std::vector<float> x = uniform(rows * dim, -3.0f, 3.0f, rng);
        const std::vector<float> gamma = uniform(dim, 0.5f, 1.5f, rng);
        std::vector<float> want(x.size());
        for (uint64_t r = 0; r < rows; ++r)
            ops::rms_norm(std::span(x).subspan(r * dim, dim), gamma, 1e-6f,
                          std::span(want).subspan(r * dim, dim));
        std::vector<float> got(x.size(), std::nanf(""));
        host::rms_norm_on_host(x.data(), gamma.data(), rows, dim, 1e-6f, got.data());
        CHECK(nmse(got, want) < kExactNmse);
        // y may be x: the kernel reads a row whole before rewriting it.
        std::vector<float> in_place = x;
        host::rms_norm_on_host(in_place.data(), gamma.data(), rows, dim, 1e-6f, in_place.data());
        CHECK(nmse(in_place, want) < kExactNmse);
    }
}

TEST_CASE("the rope kernel's pairs match the core's rope_rotate in both styles") {
    std::mt19937 rng(test_seed() + 4);
    INFO("seed " << test_seed());
    const uint32_t n_pos = 5;
    const uint32_t n_heads = 3;
    for (const uint32_t head_dim : {64u, 128u}) {
        for (const bool neox : {false, true}) {
            INFO("head_dim " << head_dim << (neox ? " neox" : " normal"));
            const auto [x, cos, sin, want] =
                ferrox::test::rope_case(n_pos, n_heads, head_dim, neox, 100, 37, rng);
            std::vector<float> got = x;
            host::rope_on_host(got.data(), cos.data(), sin.data(), n_pos, n_heads, head_dim, neox);
            CHECK(nmse(got, want) < kExactNmse);
            CHECK(nmse(got, x) > 1e-3);  // it really rotated
        }
    }
}

namespace {

struct AttentionCase {
    uint32_t n_query, pos0, window, n_head, n_head_kv, head_dim;
    float softcap = 0.0f;  // ABI 1.4; scores then scaled by 4 so the cap bites
    bool sinks = false;    // ABI 1.5: random sink logits, one far above the scores
};

// Runs the kernels' attention walk (single pass, or `splits` chunks and the
// merge) on random q/K/V against the core's attend; returns the NMSE.
// `drop_cap`: the walk runs uncapped against the capped reference (a fault).
double attention_nmse(const AttentionCase& c, ferrox_kind kind, uint32_t splits, std::mt19937& rng,
                      bool drop_cap = false, bool drop_sinks = false) {
    const uint32_t positions = c.pos0 + c.n_query;
    const uint64_t kv_row = uint64_t{c.n_head_kv} * c.head_dim;
    const std::vector<float> q =
        uniform(uint64_t{c.n_query} * c.n_head * c.head_dim, -1.0f, 1.0f, rng);
    std::vector<float> keys = uniform(positions * kv_row, -1.0f, 1.0f, rng);
    std::vector<float> values = uniform(positions * kv_row, -1.0f, 1.0f, rng);
    std::vector<uint16_t> keys16(keys.size());
    std::vector<uint16_t> values16(values.size());
    if (kind == FERROX_KIND_F16) {
        // The reference reads the cache widened from the same f16 bits.
        for (size_t i = 0; i < keys.size(); ++i) {
            keys16[i] = ferrox::quant::fp32_to_fp16(keys[i]);
            values16[i] = ferrox::quant::fp32_to_fp16(values[i]);
            keys[i] = ferrox::quant::fp16_to_fp32(keys16[i]);
            values[i] = ferrox::quant::fp16_to_fp32(values16[i]);
        }
    }
    const float scale =
        (c.softcap != 0.0f ? 4.0f : 1.0f) / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> sinks = uniform(c.n_head, -2.0f, 2.0f, rng);
    sinks[0] = 6.0f;  // above every score: that head's output shrinks
    const float* sink_logits = c.sinks ? sinks.data() : nullptr;
    const ops::AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, c.head_dim,
                                    scale,    c.softcap,   sink_logits};
    const uint64_t out_row = uint64_t{c.n_head} * c.head_dim;
    std::vector<float> want(c.n_query * out_row);
    std::vector<float> scores(positions);
    for (uint32_t i = 0; i < c.n_query; ++i) {
        const uint32_t last = c.pos0 + i;
        const uint32_t first = c.window > 0 && last + 1 > c.window ? last + 1 - c.window : 0;
        ops::attend(shape,
                    std::span(q).subspan(i * uint64_t{c.n_head} * c.head_dim,
                                         uint64_t{c.n_head} * c.head_dim),
                    keys.data(), values.data(), first, last, scores,
                    std::span(want).subspan(i * out_row, out_row));
    }
    std::vector<float> got(want.size(), std::nanf(""));
    const void* k = kind == FERROX_KIND_F16 ? static_cast<const void*>(keys16.data())
                                            : static_cast<const void*>(keys.data());
    const void* v = kind == FERROX_KIND_F16 ? static_cast<const void*>(values16.data())
                                            : static_cast<const void*>(values.data());
    host::attention_on_host(c.n_query, c.pos0, c.window, c.n_head, c.n_head_kv, c.head_dim,
                            c.head_dim, scale, kind, q.data(), k, v, got.data(), splits,
                            drop_cap ? 0.0f : c.softcap, drop_sinks ? nullptr : sink_logits);
    return nmse(got, want);
}

}  // namespace

TEST_CASE("the attention kernel's online softmax matches the core's attend") {
    const AttentionCase cases[] = {
        {1, 700, 0, 4, 4, 64},    // decode, long context
        {37, 0, 0, 8, 2, 128},    // prefill from the start, GQA 8:2
        {37, 100, 0, 8, 2, 64},   // prefill after a prompt
        {37, 100, 8, 4, 2, 128},  // sliding window
        {1, 700, 8, 8, 2, 256},   // decode in a window, widest head
        {3, 5, 0, 2, 1, 256},     // fewer positions than warps
    };
    std::mt19937 rng(test_seed() + 5);
    INFO("seed " << test_seed());
    for (const AttentionCase& c : cases) {
        for (const ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16}) {
            INFO("n_query " << c.n_query << " pos0 " << c.pos0 << " window " << c.window
                            << " heads " << c.n_head << ":" << c.n_head_kv << " dim " << c.head_dim
                            << (kind == FERROX_KIND_F16 ? " f16" : " f32"));
            CHECK(attention_nmse(c, kind, 1, rng) < kExactNmse);
        }
    }
}

TEST_CASE("the split (flash-decoding) attention and its merge match the core's attend") {
    // Decode takes the split on a GPU with SMs to spare (132: an H200; 16: a
    // small part); a long context and a sliding window of 512, GQA 8:2 and 4:1.
    std::mt19937 rng(test_seed() + 6);
    INFO("seed " << test_seed());
    for (const uint32_t sm_count : {132u, 16u}) {
        for (const uint32_t pos0 : {700u, 5000u}) {
            for (const uint32_t window : {0u, 512u}) {
                for (const ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16}) {
                    const AttentionCase c{1, pos0, window, 8, 2, 128};
                    const uint32_t splits = ferrox::cuda::attention_splits(
                        c.n_query, c.pos0, c.window, c.n_head, sm_count);
                    INFO(sm_count << " SMs, pos0 " << pos0 << " window " << window << ", " << splits
                                  << " splits" << (kind == FERROX_KIND_F16 ? " f16" : " f32"));
                    REQUIRE(splits > 1);  // these decodes must take the split path
                    CHECK(attention_nmse(c, kind, splits, rng) < kExactNmse);
                    const AttentionCase gqa4{1, pos0, window, 4, 1, 64};
                    const uint32_t splits4 = ferrox::cuda::attention_splits(
                        gqa4.n_query, gqa4.pos0, gqa4.window, gqa4.n_head, sm_count);
                    REQUIRE(splits4 > 1);
                    CHECK(attention_nmse(gqa4, kind, splits4, rng) < kExactNmse);
                }
            }
        }
    }
    // A few rows whose short spans leave late chunks empty (max -inf, sum 0)
    // must merge to the same answer; and the largest split count.
    for (const ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16}) {
        CHECK(attention_nmse({20, 0, 0, 2, 1, 64}, kind, 8, rng) < kExactNmse);
        CHECK(attention_nmse({3, 4000, 0, 2, 2, 128}, kind, ferrox::cuda::kMaxAttentionSplits,
                             rng) < kExactNmse);
    }
}

TEST_CASE("soft-capped scores (ABI 1.4) match the core's capped attend, split or not") {
    std::mt19937 rng(test_seed() + 9);
    INFO("seed " << test_seed());
    for (const float cap : {0.5f, 50.0f})
        for (const ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16}) {
            INFO("cap " << cap << (kind == FERROX_KIND_F16 ? " f16" : " f32"));
            CHECK(attention_nmse({37, 100, 8, 4, 2, 128, cap}, kind, 1, rng) < kExactNmse);
            CHECK(attention_nmse({1, 700, 0, 8, 2, 128, cap}, kind, 4, rng) < kExactNmse);
        }
    // A walk that drops the cap (a kernel that ignores the field) is caught.
    CHECK(attention_nmse({5, 40, 0, 2, 1, 64, 0.5f}, FERROX_KIND_F32, 1, rng, true) > 1e-4);
}

TEST_CASE("attention sinks (ABI 1.5) match the core's attend with sinks, split or not") {
    std::mt19937 rng(test_seed() + 10);
    INFO("seed " << test_seed());
    for (const ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16}) {
        INFO((kind == FERROX_KIND_F16 ? "f16" : "f32"));
        CHECK(attention_nmse({37, 100, 8, 4, 2, 64, 0.0f, true}, kind, 1, rng) < kExactNmse);
        CHECK(attention_nmse({1, 700, 0, 8, 2, 128, 0.0f, true}, kind, 4, rng) < kExactNmse);
        CHECK(attention_nmse({3, 4000, 0, 2, 2, 128, 0.0f, true}, kind,
                             ferrox::cuda::kMaxAttentionSplits, rng) < kExactNmse);
    }
    // A walk that ignores the sinks is caught, split or not.
    CHECK(attention_nmse({5, 40, 0, 2, 1, 64, 0.0f, true}, FERROX_KIND_F32, 1, rng, false, true) >
          1e-4);
    CHECK(attention_nmse({1, 700, 0, 8, 2, 128, 0.0f, true}, FERROX_KIND_F32, 4, rng, false, true) >
          1e-4);
}

TEST_CASE("the kernels' gpt-oss SwiGLU equals the core's bit for bit, clamps included") {
    std::mt19937 rng(test_seed() + 11);
    INFO("seed " << test_seed());
    // Wide enough that both clamps (gate above 7, up outside +-7) are reached often.
    const std::vector<float> gate = uniform(100000, -20.0f, 20.0f, rng);
    const std::vector<float> up = uniform(gate.size(), -12.0f, 12.0f, rng);
    size_t differ = 0;
    for (size_t i = 0; i < gate.size(); ++i)
        differ += !same_bits(host::glu_on_host(FERROX_GLU_SWIGLU_OAI, gate[i], up[i]),
                             ops::swiglu_oai(gate[i], up[i]));
    CHECK(differ == 0);
    // The clamps themselves: past 7 the gate and up stop growing.
    CHECK(same_bits(ops::swiglu_oai(9.0f, 1.0f), ops::swiglu_oai(7.0f, 1.0f)));
    CHECK(same_bits(ops::swiglu_oai(1.0f, -9.0f), ops::swiglu_oai(1.0f, -7.0f)));
    CHECK_FALSE(same_bits(ops::swiglu_oai(-9.0f, 1.0f), ops::swiglu_oai(-7.0f, 1.0f)));
}

TEST_CASE("the split heuristic: decode on idle SMs splits, prefill and short spans do not") {
    using ferrox::cuda::attention_split_scratch_floats;
    using ferrox::cuda::attention_splits;
    using ferrox::cuda::kAttentionMinChunk;
    using ferrox::cuda::kMaxAttentionSplits;
    // H200 (132 SMs), 32 heads: ceil(264 / 32) = 9 chunks.
    CHECK(attention_splits(1, 5000, 0, 32, 132) == 9);
    // 8 heads: 33 chunks; 4 heads: 66, capped at kMaxAttentionSplits.
    CHECK(attention_splits(1, 20000, 0, 8, 132) == 33);
    CHECK(attention_splits(1, 20000, 0, 4, 132) == kMaxAttentionSplits);
    // Chunks keep kAttentionMinChunk positions: 700 positions, at most 10.
    CHECK(attention_splits(1, 699, 0, 8, 132) == 700 / kAttentionMinChunk);
    // Short spans, a short window, and enough blocks to fill the SMs stay single-pass.
    CHECK(attention_splits(1, 200, 0, 8, 132) == 1);
    CHECK(attention_splits(1, 5000, 128, 8, 132) == 1);
    CHECK(attention_splits(37, 5000, 0, 8, 132) == 1);
    CHECK(attention_splits(1, 5000, 0, 132, 132) == 1);
    // The scratch bound noted in attention_split.h: parts < 3 * SMs.
    for (uint32_t heads = 1; heads < 132; ++heads) {
        const uint32_t splits = attention_splits(1, 100000, 0, heads, 132);
        INFO(heads << " heads, " << splits << " splits");
        CHECK(uint64_t{heads} * splits < 3 * 132);
        CHECK(attention_split_scratch_floats(1, heads, 512, splits) < 3 * 132 * 514);
    }
}

TEST_CASE("attention_cells walks a sequence's scrambled cells as 1.2 walks its rows in place") {
    // Two sequences whose cells interleave at random in one cache (as decode
    // steps of several sequences take cells), all rows in one call; each
    // sequence's rows must come out bit-identical to the 1.2 walk over its
    // own rows laid out in position order, single pass and split.
    std::mt19937 rng(test_seed() + 7);
    INFO("seed " << test_seed());
    const uint32_t n_head = 8, n_head_kv = 2, dim = 64, rows = 3;
    const uint64_t kv_row = uint64_t{n_head_kv} * dim, q_row = uint64_t{n_head} * dim;
    for (const uint32_t length : {20u, 700u}) {
        for (const uint32_t window : {0u, 8u}) {
            const uint32_t lengths[2] = {length, length / 2 + 3};
            const uint32_t n_cells = lengths[0] + lengths[1] + 4;  // 4 cells nobody holds
            std::vector<float> keys = uniform(n_cells * kv_row, -1.0f, 1.0f, rng);
            std::vector<float> values = uniform(n_cells * kv_row, -1.0f, 1.0f, rng);
            std::vector<uint32_t> order(n_cells);
            for (uint32_t c = 0; c < n_cells; ++c) order[c] = c;
            std::shuffle(order.begin(), order.end(), rng);
            std::vector<uint32_t> cell_index, spans;
            uint32_t max_span = 0;
            for (uint32_t s = 0; s < 2; ++s) {
                const auto base = static_cast<uint32_t>(cell_index.size());
                for (uint32_t p = 0; p < lengths[s]; ++p)
                    cell_index.push_back(order[(s ? lengths[0] : 0) + p]);
                for (uint32_t r = 0; r < rows; ++r) {
                    const uint32_t last = lengths[s] - rows + r;
                    const uint32_t first = window && last + 1 > window ? last + 1 - window : 0;
                    spans.push_back(base + first);
                    spans.push_back(base + last + 1);
                    max_span = std::max(max_span, last + 1 - first);
                }
            }
            const std::vector<float> q = uniform(2 * rows * q_row, -1.0f, 1.0f, rng);
            const float scale = 0.125f;
            for (const uint32_t splits : {1u, 4u}) {
                INFO("length " << length << " window " << window << " splits " << splits);
                std::vector<float> got(2 * rows * q_row, std::nanf(""));
                host::attention_cells_on_host(
                    2 * rows, n_head, n_head_kv, dim, dim, scale, FERROX_KIND_F32, q.data(),
                    keys.data(), values.data(), n_cells, cell_index.data(),
                    static_cast<uint32_t>(cell_index.size()), spans.data(), got.data(), splits);
                for (uint32_t s = 0; s < 2; ++s) {
                    std::vector<float> k, v;
                    for (uint32_t p = 0; p < lengths[s]; ++p) {
                        const uint32_t cell = order[(s ? lengths[0] : 0) + p];
                        k.insert(k.end(), keys.begin() + cell * kv_row,
                                 keys.begin() + (cell + 1) * kv_row);
                        v.insert(v.end(), values.begin() + cell * kv_row,
                                 values.begin() + (cell + 1) * kv_row);
                    }
                    std::vector<float> want(rows * q_row);
                    host::attention_on_host(rows, lengths[s] - rows, window, n_head, n_head_kv, dim,
                                            dim, scale, FERROX_KIND_F32,
                                            q.data() + s * rows * q_row, k.data(), v.data(),
                                            want.data(), splits);
                    CHECK(std::memcmp(got.data() + s * rows * q_row, want.data(),
                                      want.size() * sizeof(float)) == 0);
                }
                // The splits the backend picks from max_span, as attention_resident's.
                CHECK(ferrox::cuda::attention_splits_for_span(1, n_head, max_span, 132) ==
                      ferrox::cuda::attention_splits(1, length - 1, window, n_head, 132));
            }
        }
    }
}

TEST_CASE("attention_cells skips a cell past the cache and clamps a span past the list") {
    std::mt19937 rng(test_seed() + 8);
    const uint32_t dim = 32;
    const std::vector<float> keys = uniform(4 * dim, -1.0f, 1.0f, rng);
    const std::vector<float> values = uniform(4 * dim, -1.0f, 1.0f, rng);
    const std::vector<float> q = uniform(dim, -1.0f, 1.0f, rng);
    std::vector<float> clean(dim), bad(dim);
    const std::vector<uint32_t> index{1, 3, 2}, spans{0, 3};
    host::attention_cells_on_host(1, 1, 1, dim, dim, 0.2f, FERROX_KIND_F32, q.data(), keys.data(),
                                  values.data(), 4, index.data(), 3, spans.data(), clean.data());
    const std::vector<uint32_t> wild{1, 3, 2, 99}, long_spans{0, 9};
    host::attention_cells_on_host(1, 1, 1, dim, dim, 0.2f, FERROX_KIND_F32, q.data(), keys.data(),
                                  values.data(), 4, wild.data(), 4, long_spans.data(), bad.data());
    CHECK(std::memcmp(clean.data(), bad.data(), dim * sizeof(float)) == 0);
}
