// The CPU plugin's MATVEC and GEMM, loaded from its real file, against the
// core's scalar reference (dequantize, then a double-precision dot), on every
// ISA path this machine can run (forced with the plugin's `isa` option).
//
// Kinds on the int8 path quantize the activations exactly as llama.cpp's x86
// CPU backend does for that kind (Q8_0, Q8_1 or Q8_K, its vec_dot_type), so
// they are held to a tight bound against a reference fed activations rounded
// by an independent model of those rules written here, and to a loose one
// against the float activations (the error that quantizing adds, by design).
#include <sched.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "cpu_rig.h"
#include "ferrox/cpu_features.h"
#include "ferrox/dispatch.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

// Quantized random weights. Kinds without a quantizer get random blocks whose
// f16 scale fields (always the first two bytes for these kinds) are sane.
std::vector<std::byte> random_weights(ferrox_kind kind, uint64_t rows, uint64_t cols,
                                      std::mt19937_64& rng) {
    const uint64_t per_row = *row_bytes(kind, cols);
    std::vector<std::byte> out(rows * per_row);
    const auto values = gaussian(rows * cols, rng);
    bool quantized = true;
    for (uint64_t r = 0; r < rows && quantized; ++r)
        quantized =
            quant::quantize_row(kind, values.data() + r * cols, out.data() + r * per_row, cols);
    if (quantized) return out;
    const KindTraits& t = *kind_traits(static_cast<uint32_t>(kind));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (auto& b : out) b = static_cast<std::byte>(byte(rng));
    for (uint64_t off = 0; off < out.size(); off += t.block_bytes) {
        std::byte* block = out.data() + off;
        const uint16_t h = quant::fp32_to_fp16(scale(rng));
        switch (kind) {
            case FERROX_KIND_Q2_K:  // d, dmin at the end of the block
                std::memcpy(block + 80, &h, 2);
                std::memcpy(block + 82, &h, 2);
                break;
            case FERROX_KIND_Q3_K:
                std::memcpy(block + 108, &h, 2);
                break;
            case FERROX_KIND_MXFP4:  // an E8M0 exponent near 2^0
                block[0] = static_cast<std::byte>(120 + byte(rng) % 10);
                break;
            case FERROX_KIND_NVFP4:  // four UE4M3 scales, 2^-5 .. 2^-1 (halved)
                for (int s = 0; s < 4; ++s)
                    block[s] = static_cast<std::byte>(0x10 + byte(rng) % 40);
                break;
            case FERROX_KIND_TQ1_0:  // the f16 d after 52 bytes of trits
                std::memcpy(block + 52, &h, 2);
                break;
            case FERROX_KIND_TQ2_0:  // the f16 d after 64 bytes of 2-bit codes
                std::memcpy(block + 64, &h, 2);
                break;
            case FERROX_KIND_IQ1_M:  // f16 d spread over the top nibbles of 4 u16 scales
                for (int i = 0; i < 4; ++i) {
                    auto& hi = block[48 + 2 * i + 1];
                    hi = static_cast<std::byte>((static_cast<unsigned>(hi) & 0x0f) |
                                                (((h >> (4 * i)) & 0xf) << 4));
                }
                break;
            default:  // the f16 scale is the block's first field
                std::memcpy(block, &h, 2);
                if (kind == FERROX_KIND_Q4_1 || kind == FERROX_KIND_Q5_1)
                    std::memcpy(block + 2, &h, 2);  // the min
                break;
        }
    }
    return out;
}

// How llama.cpp's CPU backend quantizes activations for a weight kind
// (ggml-cpu.c, type_traits_cpu[].vec_dot_type); Float: the plugin keeps f32.
enum class Acts { Float, Q8_0, Q8_1, Q8_K };

Acts acts_of(ferrox_kind kind) {
    switch (kind) {
        case FERROX_KIND_F32:
        case FERROX_KIND_F16:
        case FERROX_KIND_BF16:
        case FERROX_KIND_IQ2_XXS:
        case FERROX_KIND_IQ2_XS:
        case FERROX_KIND_IQ2_S:
        case FERROX_KIND_IQ3_XXS:
        case FERROX_KIND_IQ3_S:
        case FERROX_KIND_IQ1_S:
        case FERROX_KIND_IQ1_M:
            return Acts::Float;  // the plugin's f32 path, not ggml's choice
        case FERROX_KIND_Q4_1:
        case FERROX_KIND_Q5_1:
        case FERROX_KIND_Q8_1:
            return Acts::Q8_1;
        case FERROX_KIND_Q2_K:
        case FERROX_KIND_Q3_K:
        case FERROX_KIND_Q4_K:
        case FERROX_KIND_Q5_K:
        case FERROX_KIND_Q6_K:
        case FERROX_KIND_Q8_K:
        case FERROX_KIND_IQ4_XS:
        case FERROX_KIND_TQ1_0:
        case FERROX_KIND_TQ2_0:
            return Acts::Q8_K;
        default:
            return Acts::Q8_0;
    }
}

float f16_rounded(float v) { return quant::fp16_to_fp32(quant::fp32_to_fp16(v)); }

// A model of ggml's activation rounding, written from its definition: per
// block, codes, the scale they are multiplied by, and (Q8_1) the stored
// f16(d * sum of codes).
struct ModelActs {
    uint64_t block = 32;
    std::vector<int8_t> q;
    std::vector<float> scale, q8_1_sum;
};

ModelActs model_quantize(Acts acts, const float* x, uint64_t cols) {
    ModelActs m;
    m.block = acts == Acts::Q8_K ? 256 : 32;
    m.q.resize(cols);
    for (uint64_t b = 0; b < cols / m.block; ++b) {
        const float* in = x + b * m.block;
        int8_t* q = m.q.data() + b * m.block;
        if (acts == Acts::Q8_K) {  // quantize_row_q8_K_ref
            float amax = 0, max = 0;
            for (uint64_t i = 0; i < 256; ++i)
                if (std::fabs(in[i]) > amax) {
                    amax = std::fabs(in[i]);
                    max = in[i];
                }
            if (amax == 0) {
                m.scale.push_back(0.0f);
                continue;
            }
            const float iscale = -127.0f / max;
            for (uint64_t i = 0; i < 256; ++i)
                q[i] = static_cast<int8_t>(std::min(127.0f, std::nearbyint(iscale * in[i])));
            m.scale.push_back(1.0f / iscale);
            continue;
        }
        // ggml's AVX quantize_row_q8_0 / q8_1: 127/amax, round half to even.
        float amax = 0;
        for (uint64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(in[i]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (uint64_t i = 0; i < 32; ++i) {
            q[i] = static_cast<int8_t>(std::nearbyint(in[i] * id));
            sum += q[i];
        }
        m.scale.push_back(f16_rounded(d));
        m.q8_1_sum.push_back(f16_rounded(d * static_cast<float>(sum)));
    }
    return m;
}

// The per-32-block min of Q4_1 / Q5_1 (an f16 after the scale), else 0.
float block_min(ferrox_kind kind, const std::byte* block) {
    if (kind != FERROX_KIND_Q4_1 && kind != FERROX_KIND_Q5_1) return 0.0f;
    uint16_t h;
    std::memcpy(&h, block + 2, 2);
    return quant::fp16_to_fp32(h);
}

// dequantize(w) . x in double, with x rounded as the kernel's activation
// format rounds it. Q8_1 differs from "dequantize then dot" in one term: the
// weight's min meets the stored f16 block sum, not the sum of the codes.
std::vector<float> reference_product(ferrox_kind kind, const std::vector<std::byte>& w,
                                     uint64_t rows, uint64_t cols, const std::vector<float>& x,
                                     uint64_t n, bool round_acts) {
    const Acts acts = round_acts ? acts_of(kind) : Acts::Float;
    std::vector<ModelActs> models;
    std::vector<float> xr = x;
    if (acts != Acts::Float)
        for (uint64_t j = 0; j < n; ++j) {
            models.push_back(model_quantize(acts, x.data() + j * cols, cols));
            const ModelActs& m = models.back();
            for (uint64_t c = 0; c < cols; ++c)
                xr[j * cols + c] = m.scale[c / m.block] * static_cast<float>(m.q[c]);
        }
    const KindTraits& t = *kind_traits(static_cast<uint32_t>(kind));
    const uint64_t per_row = *row_bytes(kind, cols);
    std::vector<float> dense(cols), y(n * rows);
    for (uint64_t r = 0; r < rows; ++r) {
        const std::byte* row = w.data() + r * per_row;
        REQUIRE(quant::dequantize_row(kind, row, dense.data(), cols));
        for (uint64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (uint64_t c = 0; c < cols; ++c)
                acc += static_cast<double>(dense[c]) * static_cast<double>(xr[j * cols + c]);
            if (acts == Acts::Q8_1)
                for (uint64_t b = 0; b < cols / 32; ++b) {
                    double sum = 0;
                    for (uint64_t c = 32 * b; c < 32 * b + 32; ++c)
                        sum += static_cast<double>(xr[j * cols + c]);
                    acc += static_cast<double>(block_min(kind, row + b * t.block_bytes)) *
                           (static_cast<double>(models[j].q8_1_sum[b]) - sum);
                }
            y[j * rows + r] = static_cast<float>(acc);
        }
    }
    return y;
}

// One product through the dispatcher, checked tight against the reference on
// the activations the kernel sees, and loose against the float activations.
void check_product(CpuRig& rig, ferrox_kind kind, const std::vector<std::byte>& bytes,
                   uint64_t rows, uint64_t cols, uint64_t n, std::mt19937_64& rng) {
    auto m = WeightMatrix::owned("w", kind, rows, cols, bytes);
    REQUIRE(m.has_value());
    const auto x = gaussian(n * cols, rng);
    std::vector<float> y(n * rows, NAN);  // poisoned: every element must be written
    const auto ok =
        n == 1 ? rig.dispatch->apply(*m, "t", x, y) : rig.dispatch->apply_batch(*m, "t", x, n, y);
    REQUIRE(ok.has_value());
    INFO("n=" << n);
    const auto exact = reference_product(kind, bytes, rows, cols, x, n, false);
    if (acts_of(kind) == Acts::Float) {
        CHECK(nmse(y, exact) < 1e-10);
        return;
    }
    CHECK(nmse(y, reference_product(kind, bytes, rows, cols, x, n, true)) < 1e-10);
    // 8-bit activations cost ~1e-5; a handful of outputs is too few to judge.
    if (rows * n >= 30) CHECK(nmse(y, exact) < 1e-3);
}

}  // namespace

TEST_CASE("CPU matvec and gemm agree with the core reference for every kind, on every ISA path") {
    const unsigned threads = GENERATE(1u, 2u);
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(threads, isa);
        std::mt19937_64 rng(test_seed(1234));
        for (const KindTraits& t : kAllKinds) {
            for (uint64_t rows : {1u, 37u, 129u}) {
                const uint64_t cols = 512;
                INFO(t.name << " rows=" << rows << " threads=" << threads << " isa=" << isa);
                const auto bytes = random_weights(t.id, rows, cols, rng);
                for (uint64_t n : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u})
                    check_product(rig, t.id, bytes, rows, cols, n, rng);
            }
        }
        const auto report = rig.registry.seal();
        CHECK(report.entries.size() == 2 * kAllKinds.size());
        for (const auto& e : report.entries) CHECK(e.outcome == Outcome::Hit);
    }
}

TEST_CASE("CPU kernels handle rows whose length is not a multiple of the SIMD width") {
    // 96 = three blocks of 32: a 64-byte step plus a 32-byte tail; 80 F16
    // values: a 16-float step plus a tail of 8+.
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(77));
        for (const KindTraits& t : kAllKinds) {
            if (t.block_elements != 1 && 96 % t.block_elements != 0) continue;  // 64, 128, 256
            const uint64_t cols = t.block_elements == 1 ? 83 : 96;
            INFO(t.name << " isa=" << isa);
            const auto bytes = random_weights(t.id, 11, cols, rng);
            for (uint64_t n : {1u, 5u}) check_product(rig, t.id, bytes, 11, cols, n, rng);
        }
    }
}

TEST_CASE("CPU matvec reads long rows of the decode kinds correctly, odd block counts included") {
    // The decode kinds' MATVEC reads the weight blocks in registers, two 32-
    // weight blocks (or two sub-blocks) per step: 35 blocks leaves a last odd
    // one; 11 super-blocks an odd count of 256.
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(4242));
        for (ferrox_kind kind : {FERROX_KIND_Q8_0, FERROX_KIND_Q4_0, FERROX_KIND_Q5_0,
                                 FERROX_KIND_Q4_K, FERROX_KIND_Q5_K, FERROX_KIND_Q6_K,
                                 FERROX_KIND_Q2_K, FERROX_KIND_Q3_K, FERROX_KIND_IQ4_XS}) {
            const uint64_t cols =
                kind_traits(static_cast<uint32_t>(kind))->block_elements == 256 ? 2816 : 1120;
            INFO(kind_name(kind) << " isa=" << isa << " cols=" << cols);
            check_product(rig, kind, random_weights(kind, 23, cols, rng), 23, cols, 1, rng);
        }
    }
}

TEST_CASE("CPU matvec stays exact at the extreme codes and scales of the 256-weight kinds") {
    // The fused kernels multiply codes by activations in int16 pairs and
    // apply the integer scales in int32: every block here takes its kind's
    // largest |code| and |scale| (bytes set by hand, d = 1), against
    // activation codes of +-127, the worst case for those ranges.
    struct Extreme {
        ferrox_kind kind;
        std::vector<std::pair<int, int>> fills;  // {offset, byte} until the next offset
        std::vector<int> f16_one;                // offsets of f16 fields set to 1
    };
    const std::vector<Extreme> cases = {
        {FERROX_KIND_Q2_K, {{0, 0xff}}, {80, 82}},            // code 3, scale and min 15
        {FERROX_KIND_Q3_K, {{0, 0x00}}, {108}},               // code -4, scale -32
        {FERROX_KIND_Q4_K, {{4, 0xff}}, {0, 2}},              // code 15, scale and min 63
        {FERROX_KIND_Q5_K, {{4, 0xff}}, {0, 2}},              // code 31, scale and min 63
        {FERROX_KIND_Q6_K, {{0, 0x00}, {192, 0x80}}, {208}},  // code -32, scale -128
        {FERROX_KIND_IQ4_XS, {{2, 0x00}}, {0}},               // value -127, scale -32
    };
    const uint64_t rows = 2, cols = 512;
    // Q8_K gives -127 to the first value's sign, +127 to the other; pairs of
    // one sign (the int16 worst case), and not balanced, so the sum is large.
    std::vector<float> x(cols);
    for (uint64_t c = 0; c < cols; ++c) x[c] = c % 4 == 3 ? -0.5f : 0.5f;
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(1, isa);
        for (const Extreme& e : cases) {
            const KindTraits& t = *kind_traits(static_cast<uint32_t>(e.kind));
            std::vector<std::byte> bytes(rows * *row_bytes(e.kind, cols));
            for (uint64_t off = 0; off < bytes.size(); off += t.block_bytes) {
                std::byte* block = bytes.data() + off;
                for (size_t i = 0; i < e.fills.size(); ++i) {
                    const int end = i + 1 < e.fills.size() ? e.fills[i + 1].first
                                                           : static_cast<int>(t.block_bytes);
                    for (int k = e.fills[i].first; k < end; ++k)
                        block[k] = static_cast<std::byte>(e.fills[i].second);
                }
                const uint16_t one = quant::fp32_to_fp16(1.0f);
                for (int at : e.f16_one) std::memcpy(block + at, &one, 2);
            }
            INFO(kind_name(e.kind) << " isa=" << isa);
            auto m = WeightMatrix::owned("w", e.kind, rows, cols, bytes);
            REQUIRE(m.has_value());
            std::vector<float> y(rows, NAN);
            REQUIRE(rig.dispatch->apply(*m, "t", x, y).has_value());
            const auto expected = reference_product(e.kind, bytes, rows, cols, x, 1, true);
            CHECK(std::abs(expected[0]) > 1000.0f);  // the extremes did add up
            CHECK(nmse(y, expected) < 1e-10);
        }
    }
}

TEST_CASE("the cpu plugin refuses an isa it does not know and names the choices") {
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    const ScopedIsa forced("sse9");
    auto plugins = PluginSet::load(config_from("backends: {order: [cpu]}\ncpu: {threads: 1}"),
                                   only_folder(dir.path()));
    CHECK(plugins.selected().empty());
    CHECK_THAT(record_of(plugins, "cpu").reason, Catch::Contains("portable, avx2, avx512 or auto"));
}

TEST_CASE("threads past the cores this process may use are capped to them") {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    const int usable = CPU_COUNT(&allowed);
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    for (const char* threads : {"1024", "0"}) {
        INFO("cpu.threads " << threads);
        auto plugins = PluginSet::load(
            config_from(std::string("backends: {order: [cpu]}\ncpu: {threads: ") + threads + "}"),
            only_folder(dir.path()));
        REQUIRE(plugins.selected().size() == 1);
        const auto& devices = record_of(plugins, "cpu").devices;
        REQUIRE(devices.size() == 1);
        CHECK_THAT(devices[0].name, Catch::Contains("(" + std::to_string(usable) + " threads"));
    }
}

TEST_CASE("CPU gemm with 512 activations matches the reference for every kind") {
    // 19 rows: one partial 32-row panel (its second 16-row half partly
    // filled); 45: a full panel, then one with only part of the first half.
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(99));
        for (const KindTraits& t : kAllKinds) {
            for (uint64_t rows : {19u, 45u}) {
                INFO(t.name << " isa=" << isa << " rows=" << rows);
                const uint64_t cols = 256, n = 512;
                check_product(rig, t.id, random_weights(t.id, rows, cols, rng), rows, cols, n, rng);
            }
        }
    }
}

// How many of a batch's outputs differ, in any bit, from the same activation
// multiplied alone (MATVEC): n random activations through apply_batch.
uint64_t outputs_differing_from_matvec(CpuRig& rig, const WeightMatrix& m, uint64_t n,
                                       std::mt19937_64& rng) {
    const uint64_t rows = m.rows(), cols = m.cols();
    const auto x = gaussian(n * cols, rng);
    std::vector<float> together(n * rows, NAN), alone(rows, NAN);
    REQUIRE(rig.dispatch->apply_batch(m, "t", x, n, together).has_value());
    uint64_t differing = 0;
    for (uint64_t c = 0; c < n; ++c) {
        REQUIRE(
            rig.dispatch->apply(m, "t", std::span<const float>(x).subspan(c * cols, cols), alone)
                .has_value());
        for (uint64_t r = 0; r < rows; ++r)
            differing += std::memcmp(&alone[r], &together[c * rows + r], 4) != 0;
    }
    return differing;
}

TEST_CASE("CPU gemm of up to 16 activations equals matvec bit for bit on the fused kinds") {
    // Batch invariance: a decode step's products must not depend on how many
    // other sequences share the batch. 37 rows (not a multiple of any tile),
    // 512 columns, and 3 blocks more (Q4_0's MATVEC takes 8 blocks a step,
    // then the rest one by one); every activation alone through matvec,
    // then all together.
    const ferrox_kind fused[] = {FERROX_KIND_Q8_0, FERROX_KIND_Q4_0, FERROX_KIND_Q5_0,
                                 FERROX_KIND_Q2_K, FERROX_KIND_Q3_K, FERROX_KIND_Q4_K,
                                 FERROX_KIND_Q5_K, FERROX_KIND_Q6_K, FERROX_KIND_IQ4_XS};
    for (const std::string& isa : runnable_isas()) {
        if (isa == "portable") continue;  // no fused kernels there
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(41));
        const uint64_t rows = 37;
        for (ferrox_kind kind : fused)
            for (uint64_t extra_blocks : {0u, 3u}) {
                const uint64_t cols =
                    512 + extra_blocks * kind_traits(static_cast<uint32_t>(kind))->block_elements;
                auto m = WeightMatrix::owned("w", kind, rows, cols,
                                             random_weights(kind, rows, cols, rng));
                REQUIRE(m.has_value());
                for (uint64_t n : {2u, 3u, 4u, 5u, 8u, 16u}) {
                    INFO(kind_name(kind) << " isa=" << isa << " n=" << n << " cols=" << cols);
                    CHECK(outputs_differing_from_matvec(rig, *m, n, rng) == 0);
                }
            }
    }
}

TEST_CASE(
    "CPU matvec_batch gives every product matvec's bits, on every ISA path and thread count") {
    // ABI 1.9: a MoE token's expert products in one call, their rows split
    // across the threads as one job. Each product must equal its own
    // matvec to the bit (batch invariance), whatever kinds share the call,
    // whichever rows a thread took. Row counts that are no multiple of a
    // tile or a chunk; two products reading one x (quantized once, shared),
    // one weight twice with different x; y starts as NaN, so a row left
    // unwritten or written twice by a wrong split shows.
    const ferrox_kind kinds[] = {FERROX_KIND_Q4_K, FERROX_KIND_Q6_K,  FERROX_KIND_Q8_0,
                                 FERROX_KIND_F16,  FERROX_KIND_Q4_0,  FERROX_KIND_IQ4_XS,
                                 FERROX_KIND_F32,  FERROX_KIND_TQ2_0, FERROX_KIND_Q5_K};
    const uint64_t cols = 512;
    const uint64_t rows_of[] = {37, 130, 5, 257, 64, 19, 41, 300, 3};
    for (const std::string& isa : runnable_isas())
        for (unsigned threads : {1u, 2u, 3u}) {
            CpuRig rig(threads, isa);
            REQUIRE(rig.plugins.selected()[0]->has_matvec_batch());
            std::mt19937_64 rng(test_seed(1909));
            std::vector<WeightMatrix> weights;
            for (size_t i = 0; i < std::size(kinds); ++i) {
                auto m = WeightMatrix::owned("w", kinds[i], rows_of[i], cols,
                                             random_weights(kinds[i], rows_of[i], cols, rng));
                REQUIRE(m.has_value());
                weights.push_back(std::move(*m));
            }
            const auto x_shared = gaussian(cols, rng);
            std::vector<std::vector<float>> xs, alone, together;
            std::vector<MatvecJob> jobs;
            // Every weight reads x_shared, then each its own x, the first twice.
            for (size_t pass = 0; pass < 2; ++pass)
                for (size_t i = 0; i < weights.size(); ++i) {
                    xs.push_back(pass == 0 ? x_shared : gaussian(cols, rng));
                    alone.emplace_back(weights[i].rows(), NAN);
                    together.emplace_back(weights[i].rows(), NAN);
                }
            xs.push_back(gaussian(cols, rng));
            alone.emplace_back(weights[0].rows(), NAN);
            together.emplace_back(weights[0].rows(), NAN);
            for (size_t j = 0; j < xs.size(); ++j) {
                const WeightMatrix& w = weights[j < 2 * weights.size() ? j % weights.size() : 0];
                // x_shared itself for the first pass: one address, one quantization.
                const std::span<const float> x = j < weights.size() ? x_shared : xs[j];
                REQUIRE(rig.dispatch->apply(w, "alone", x, alone[j]).has_value());
                jobs.push_back({&w, "together", x, together[j]});
            }
            REQUIRE(rig.dispatch->apply_many(jobs, "batch").has_value());
            for (size_t j = 0; j < jobs.size(); ++j) {
                uint64_t differing = 0;
                for (size_t r = 0; r < alone[j].size(); ++r)
                    differing += std::memcmp(&alone[j][r], &together[j][r], 4) != 0;
                INFO(kind_name(jobs[j].weight->kind())
                     << " isa=" << isa << " threads=" << threads << " product " << j);
                CHECK(differing == 0);
            }
            bool batched = false;
            for (const RegistryEntry& e : rig.registry.seal().entries)
                batched |= e.key.role == "batch" && e.outcome == Outcome::Hit &&
                           e.detail == Dispatcher::kBatchKernel;
            CHECK(batched);
        }
}

TEST_CASE("CPU gemm equals matvec bit for bit on TQ1_0, TQ2_0, NVFP4 and Q1_0, on every ISA path") {
    // Batch invariance for the kinds without a fused MATVEC: MATVEC and GEMM
    // both go through the int8 tiles, whose every (row, activation) result
    // must not depend on the tile shape or on how many activations share the
    // call. 37 rows, two widths (the second an odd number of blocks), batches
    // from 2 up past the 4x4 tile and past 16.
    const ferrox_kind kinds[] = {FERROX_KIND_TQ1_0, FERROX_KIND_TQ2_0, FERROX_KIND_NVFP4,
                                 FERROX_KIND_Q1_0};
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(4135));
        const uint64_t rows = 37;
        for (ferrox_kind kind : kinds)
            for (uint64_t blocks : {4u, 7u}) {
                const uint64_t cols =
                    blocks * kind_traits(static_cast<uint32_t>(kind))->block_elements;
                auto m = WeightMatrix::owned("w", kind, rows, cols,
                                             random_weights(kind, rows, cols, rng));
                REQUIRE(m.has_value());
                for (uint64_t n : {2u, 5u, 17u}) {
                    INFO(kind_name(kind) << " isa=" << isa << " n=" << n << " cols=" << cols);
                    CHECK(outputs_differing_from_matvec(rig, *m, n, rng) == 0);
                }
            }
    }
}

TEST_CASE("CPU NVFP4 kernels read every UE4M3 scale byte as the core's reference does") {
    // The plugin decodes NVFP4's scales on its own (isa_kernels_impl.inc).
    // Row r's 64 scale slots cycle through the bytes 16r .. 16r + 15, so the
    // 16 rows hold all 256 -- zero and the subnormals in row 0, 0x7F (read as
    // 0) in row 7, the unused top bit in rows 8-15 -- and each row is judged
    // on its own, so a wrong tiny scale is not hidden behind a row of huge ones.
    const uint64_t rows = 16, cols = 1024, n = 3;
    const uint32_t block = kind_traits(FERROX_KIND_NVFP4)->block_bytes;
    const uint64_t per_row = *row_bytes(FERROX_KIND_NVFP4, cols);
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(4040));
        auto bytes = random_weights(FERROX_KIND_NVFP4, rows, cols, rng);
        for (uint64_t r = 0; r < rows; ++r)
            for (uint64_t slot = 0; slot < 4 * (cols / 64); ++slot)
                bytes[r * per_row + slot / 4 * block + slot % 4] =
                    static_cast<std::byte>(16 * r + slot % 16);
        auto m = WeightMatrix::owned("w", FERROX_KIND_NVFP4, rows, cols, bytes);
        REQUIRE(m.has_value());
        const auto x = gaussian(n * cols, rng);
        std::vector<float> y(n * rows, NAN);
        REQUIRE(rig.dispatch->apply_batch(*m, "t", x, n, y).has_value());
        const auto want = reference_product(FERROX_KIND_NVFP4, bytes, rows, cols, x, n, true);
        for (uint64_t r = 0; r < rows; ++r) {
            std::vector<float> got_row, want_row;
            for (uint64_t c = 0; c < n; ++c) {
                got_row.push_back(y[c * rows + r]);
                want_row.push_back(want[c * rows + r]);
            }
            INFO("isa=" << isa << " row " << r << " (scale bytes 0x" << std::hex << 16 * r
                        << "..)");
            CHECK(nmse(got_row, want_row) < 1e-10);
        }
    }
}

TEST_CASE("the kinds that used to fall back now run named CPU kernels, correctly") {
    CpuRig rig(2);
    std::mt19937_64 rng(test_seed(5));
    for (ferrox_kind kind : {FERROX_KIND_IQ4_NL, FERROX_KIND_Q5_0, FERROX_KIND_Q8_1}) {
        INFO(kind_name(kind));
        check_product(rig, kind, random_weights(kind, 13, 64, rng), 13, 64, 1, rng);
    }
    const auto report = rig.registry.seal();
    CHECK(report.misses.empty());
    for (const auto& e : report.entries) CHECK(e.outcome == Outcome::Hit);
    CHECK(report.violations.empty());  // the CPU is not an accelerator
}

namespace {

// Activations that exercise the rounding rules: gaussian blocks, blocks whose
// largest |x| is 127 (Q8_0's multiplier and Q8_K's -127/max are then exactly
// +-1) filled with halves (ties, which round to even), a block scaled so the
// multiplier is 2 (quarter ties), zero blocks of 32 and of 256, and blocks holding both
// +amax and -amax (Q8_K takes the sign of the first).
std::vector<float> rounding_probe(uint64_t cols, std::mt19937_64& rng) {
    auto x = gaussian(cols, rng);
    std::uniform_int_distribution<int> half(-254, 254);
    for (uint64_t b = 0; b < cols / 256; ++b) {
        float* blk = x.data() + 256 * b;
        switch (b % 6) {
            case 0:  // gaussian as drawn
                break;
            case 1:
            case 2:  // ties everywhere, max +127 or -127 first
                for (int i = 0; i < 256; ++i) blk[i] = 0.5f * static_cast<float>(half(rng));
                for (int k = 0; k < 8; ++k) blk[32 * k + 3] = b % 6 == 1 ? 127.0f : -127.0f;
                blk[200] = b % 6 == 1 ? -127.0f : 127.0f;
                break;
            case 3:  // amax 63.5: the Q8_0 multiplier is 2, ties at quarters
                for (int i = 0; i < 256; ++i) blk[i] = 0.25f * static_cast<float>(half(rng) / 2);
                for (int k = 0; k < 8; ++k) blk[32 * k + 7] = -63.5f;
                break;
            case 4:  // zeros, except one non-zero 32-block
                for (int i = 32; i < 256; ++i) blk[i] = 0.0f;
                break;
            default:  // all zero
                for (int i = 0; i < 256; ++i) blk[i] = 0.0f;
                break;
        }
    }
    return x;
}

// One weight 1 per row, at column r, in blocks otherwise zero: y[r] is then
// exactly the kernel's activation scale times its code at column r (every
// other product is an exact zero), for Q8_0 (Q8_0 acts) and Q8_K (Q8_K acts).
std::vector<std::byte> picking_weights(ferrox_kind kind, uint64_t cols) {
    const KindTraits& t = *kind_traits(static_cast<uint32_t>(kind));
    const uint64_t per_row = *row_bytes(kind, cols);
    std::vector<std::byte> w(cols * per_row);
    for (uint64_t r = 0; r < cols; ++r) {
        std::byte* blk = w.data() + r * per_row + r / t.block_elements * t.block_bytes;
        const uint64_t i = r % t.block_elements;
        if (kind == FERROX_KIND_Q8_K) {
            const float one = 1.0f;
            std::memcpy(blk, &one, 4);
            blk[4 + i] = std::byte{1};
        } else {
            const uint16_t one = quant::fp32_to_fp16(1.0f);
            std::memcpy(blk, &one, 2);
            blk[2 + i] = std::byte{1};
        }
    }
    return w;
}

// Q4_1 rows with d = 0 and min 1 in block r only: y[r] is exactly the
// activation's stored Q8_1 block sum.
std::vector<std::byte> block_sum_weights(uint64_t cols) {
    const uint64_t per_row = *row_bytes(FERROX_KIND_Q4_1, cols);
    std::vector<std::byte> w(cols / 32 * per_row);
    const uint16_t one = quant::fp32_to_fp16(1.0f);
    for (uint64_t r = 0; r < cols / 32; ++r)
        std::memcpy(w.data() + r * per_row + r * 20 + 2, &one, 2);
    return w;
}

}  // namespace

TEST_CASE(
    "int8 activations are quantized bit for bit as ggml's x86 rules, ties included, on every ISA "
    "path") {
    const uint64_t cols = 1536;  // six 256-blocks, one of each probe kind
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(31337));
        for (uint64_t n : {1u, 3u}) {
            std::vector<float> x;
            for (uint64_t j = 0; j < n; ++j) {
                const auto one = rounding_probe(cols, rng);
                x.insert(x.end(), one.begin(), one.end());
            }
            for (ferrox_kind kind : {FERROX_KIND_Q8_0, FERROX_KIND_Q8_K, FERROX_KIND_Q4_1}) {
                INFO(kind_name(kind) << " isa=" << isa << " n=" << n);
                const bool sums = kind == FERROX_KIND_Q4_1;
                const uint64_t rows = sums ? cols / 32 : cols;
                auto m = WeightMatrix::owned(
                    "w", kind, rows, cols,
                    sums ? block_sum_weights(cols) : picking_weights(kind, cols));
                REQUIRE(m.has_value());
                std::vector<float> y(n * rows, NAN);
                const auto ok = n == 1 ? rig.dispatch->apply(*m, "t", x, y)
                                       : rig.dispatch->apply_batch(*m, "t", x, n, y);
                REQUIRE(ok.has_value());
                uint64_t mismatches = 0;
                for (uint64_t j = 0; j < n; ++j) {
                    const ModelActs want = model_quantize(acts_of(kind), x.data() + j * cols, cols);
                    for (uint64_t r = 0; r < rows; ++r) {
                        const float expect =
                            sums ? want.q8_1_sum[r]
                                 : want.scale[r / want.block] * static_cast<float>(want.q[r]);
                        if (y[j * rows + r] != expect && mismatches++ < 5)
                            UNSCOPED_INFO("act " << j << " col " << r << ": got " << y[j * rows + r]
                                                 << ", ggml's rule gives " << expect);
                    }
                }
                CHECK(mismatches == 0);
            }
        }
    }
}
