// The CPU plugin's MATVEC and GEMM, loaded from its real file, against the
// core's scalar reference (dequantize, then a double-precision dot).
#include <cstring>
#include <random>

#include "ferrox/dispatch.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "plugin_env.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

struct CpuRig {
    TempDir dir;
    PluginSet plugins;
    KernelRegistry registry;
    std::unique_ptr<Dispatcher> dispatch;

    explicit CpuRig(unsigned threads) {
        install_plugin(real_plugin("cpu"), dir.path());
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
        quantized = quant::quantize_row(kind, values.data() + r * cols, out.data() + r * per_row, cols);
    if (quantized) return out;
    const KindTraits& t = *kind_traits(static_cast<uint32_t>(kind));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (auto& b : out) b = static_cast<std::byte>(byte(rng));
    for (uint64_t off = 0; off < out.size(); off += t.block_bytes) {
        const uint16_t h = quant::fp32_to_fp16(scale(rng));
        std::memcpy(out.data() + off, &h, 2);
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

constexpr ferrox_kind kKernelKinds[] = {FERROX_KIND_F32,  FERROX_KIND_F16,  FERROX_KIND_Q8_0,
                                        FERROX_KIND_Q4_0, FERROX_KIND_Q4_K, FERROX_KIND_Q5_K,
                                        FERROX_KIND_Q6_K};

}  // namespace

TEST_CASE("CPU matvec and gemm agree with the core reference for every kernel kind") {
    const unsigned threads = GENERATE(1u, 2u);
    CpuRig rig(threads);
    std::mt19937_64 rng(test_seed(1234));
    for (ferrox_kind kind : kKernelKinds) {
        for (uint64_t rows : {1u, 37u, 129u}) {
            const uint64_t cols = 512;
            INFO(kind_name(kind) << " rows=" << rows << " threads=" << threads);
            const auto bytes = random_weights(kind, rows, cols, rng);
            auto m = WeightMatrix::owned("w", kind, rows, cols, bytes);
            REQUIRE(m.has_value());
            for (uint64_t n : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u}) {
                const auto x = gaussian(n * cols, rng);
                std::vector<float> y(n * rows, NAN);  // poisoned: every element must be written
                const auto ok = n == 1 ? rig.dispatch->apply(*m, "t", x, y)
                                       : rig.dispatch->apply_batch(*m, "t", x, n, y);
                REQUIRE(ok.has_value());
                const auto want = reference_product(kind, bytes, rows, cols, x, n);
                INFO("n=" << n);
                CHECK(nmse(y, want) < 1e-10);
            }
        }
    }
    const auto report = rig.registry.seal();
    for (const auto& e : report.entries) CHECK(e.outcome == Outcome::Hit);
}

TEST_CASE("CPU gemm with 512 activations matches the reference") {
    CpuRig rig(2);
    std::mt19937_64 rng(test_seed(99));
    for (ferrox_kind kind : {FERROX_KIND_Q4_K, FERROX_KIND_Q8_0}) {
        const uint64_t rows = 19, cols = 256, n = 512;
        const auto bytes = random_weights(kind, rows, cols, rng);
        auto m = WeightMatrix::owned("w", kind, rows, cols, bytes);
        REQUIRE(m.has_value());
        const auto x = gaussian(n * cols, rng);
        std::vector<float> y(n * rows, NAN);
        REQUIRE(rig.dispatch->apply_batch(*m, "t", x, n, y).has_value());
        CHECK(nmse(y, reference_product(kind, bytes, rows, cols, x, n)) < 1e-10);
    }
}

TEST_CASE("kinds without a CPU kernel run the named f32 dequant-dot fallback, correctly") {
    CpuRig rig(2);
    std::mt19937_64 rng(test_seed(5));
    for (ferrox_kind kind : {FERROX_KIND_IQ4_NL, FERROX_KIND_Q5_0, FERROX_KIND_Q8_1}) {
        INFO(kind_name(kind));
        const uint64_t rows = 13, cols = 64;
        const auto bytes = random_weights(kind, rows, cols, rng);
        auto m = WeightMatrix::owned("w", kind, rows, cols, bytes);
        REQUIRE(m.has_value());
        const auto x = gaussian(cols, rng);
        std::vector<float> y(rows, NAN);
        REQUIRE(rig.dispatch->apply(*m, "ffn_up", x, y).has_value());
        CHECK(nmse(y, reference_product(kind, bytes, rows, cols, x, 1)) < 1e-10);
    }
    const auto report = rig.registry.seal();
    CHECK(report.misses.size() == 3);
    for (const auto& e : report.misses) CHECK(e.detail == "f32 dequant-dot");
    CHECK(report.violations.empty());  // the CPU is not an accelerator
}
