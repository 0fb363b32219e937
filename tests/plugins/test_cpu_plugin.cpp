// The CPU plugin's MATVEC and GEMM, loaded from its real file, against the
// core's scalar reference (dequantize, then a double-precision dot), on every
// ISA path this machine can run (forced with the plugin's `isa` option).
//
// Kinds on the int8 path quantize the activations exactly as gguf's Q8_0
// does, so they are held to the same tight bound against a reference fed the
// Q8_0-rounded activations, and to a loose one against the float activations
// (the error that quantizing activations adds, by design).
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "ferrox/cpu_features.h"
#include "ferrox/dispatch.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "plugin_env.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

// Sets FERROX_CPU_ISA for the plugin's create() (the config file has no
// `isa` key yet), and restores the environment after.
class ScopedIsa {
  public:
    explicit ScopedIsa(std::string_view isa) {
        if (const char* old = std::getenv("FERROX_CPU_ISA")) saved_ = old;
        ::setenv("FERROX_CPU_ISA", std::string(isa).c_str(), 1);
    }
    ~ScopedIsa() {
        if (saved_)
            ::setenv("FERROX_CPU_ISA", saved_->c_str(), 1);
        else
            ::unsetenv("FERROX_CPU_ISA");
    }
    ScopedIsa(const ScopedIsa&) = delete;
    ScopedIsa& operator=(const ScopedIsa&) = delete;

  private:
    std::optional<std::string> saved_;
};

struct CpuRig {
    TempDir dir;
    PluginSet plugins;
    KernelRegistry registry;
    std::unique_ptr<Dispatcher> dispatch;

    explicit CpuRig(unsigned threads, std::string_view isa = "auto") {
        install_plugin(real_plugin("cpu"), dir.path());
        const ScopedIsa forced(isa);
        plugins = PluginSet::load(
            config_from(fmt::format("backends: {{order: [cpu]}}\ncpu: {{threads: {}}}", threads)),
            only_folder(dir.path()));
        REQUIRE(plugins.selected().size() == 1);
        dispatch = std::make_unique<Dispatcher>(plugins.selected(), registry);
    }
};

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

std::vector<float> reference_product(ferrox_kind kind, const std::vector<std::byte>& w,
                                     uint64_t rows, uint64_t cols, const std::vector<float>& x,
                                     uint64_t n) {
    const uint64_t per_row = *row_bytes(kind, cols);
    std::vector<float> dense(cols), y(n * rows);
    for (uint64_t r = 0; r < rows; ++r) {
        REQUIRE(quant::dequantize_row(kind, w.data() + r * per_row, dense.data(), cols));
        for (uint64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (uint64_t c = 0; c < cols; ++c)
                acc += static_cast<double>(dense[c]) * static_cast<double>(x[j * cols + c]);
            y[j * rows + r] = static_cast<float>(acc);
        }
    }
    return y;
}

// Kinds whose CPU kernels use f32 activations; every other kind quantizes
// them to Q8_0 blocks.
bool float_activations(ferrox_kind kind) {
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
            return true;
        default:
            return false;
    }
}

// The activations as the int8 path sees them: gguf's Q8_0, dequantized.
std::vector<float> q8_0_rounded(const std::vector<float>& x) {
    std::vector<std::byte> blocks(*row_bytes(FERROX_KIND_Q8_0, x.size()));
    std::vector<float> out(x.size());
    REQUIRE(quant::quantize_row(FERROX_KIND_Q8_0, x.data(), blocks.data(), x.size()));
    REQUIRE(quant::dequantize_row(FERROX_KIND_Q8_0, blocks.data(), out.data(), x.size()));
    return out;
}

// The ISA paths this machine can run, each forced through the plugin option.
std::vector<std::string> runnable_isas() {
    std::vector<std::string> isas{"portable"};
    const CpuFeatures& f = cpu_features();
    if (f.avx2 && f.fma && f.f16c) isas.emplace_back("avx2");
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) isas.emplace_back("avx512");
    return isas;
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
    const auto exact = reference_product(kind, bytes, rows, cols, x, n);
    if (float_activations(kind)) {
        CHECK(nmse(y, exact) < 1e-10);
        return;
    }
    CHECK(nmse(y, reference_product(kind, bytes, rows, cols, q8_0_rounded(x), n)) < 1e-10);
    // Q8_0 activations cost ~1e-5; a handful of outputs is too few to judge.
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
            if (t.block_elements == 256) continue;
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
                                 FERROX_KIND_Q4_K, FERROX_KIND_Q5_K, FERROX_KIND_Q6_K}) {
            const uint64_t cols =
                kind_traits(static_cast<uint32_t>(kind))->block_elements == 256 ? 2816 : 1120;
            INFO(kind_name(kind) << " isa=" << isa << " cols=" << cols);
            check_product(rig, kind, random_weights(kind, 23, cols, rng), 23, cols, 1, rng);
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

TEST_CASE("CPU gemm with 512 activations matches the reference") {
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        std::mt19937_64 rng(test_seed(99));
        for (ferrox_kind kind : {FERROX_KIND_Q4_K, FERROX_KIND_Q8_0, FERROX_KIND_Q5_0,
                                 FERROX_KIND_Q6_K, FERROX_KIND_F32, FERROX_KIND_IQ2_XS}) {
            INFO(kind_name(kind) << " isa=" << isa);
            const uint64_t rows = 19, cols = 256, n = 512;
            check_product(rig, kind, random_weights(kind, rows, cols, rng), rows, cols, n, rng);
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
