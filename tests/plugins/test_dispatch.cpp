// The kernel registry and dispatch, through real plugin files: the intent of
// the seeds' four registry tests, and what they did not cover.
#include <cmath>
#include <cstring>
#include <random>

#include "ferrox/dispatch.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "plugin_env.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

struct Rig {
    TempDir dir;
    PluginSet plugins;
    KernelRegistry registry;
    std::unique_ptr<Dispatcher> dispatch;

    explicit Rig(std::string_view order) {
        for (const char* f : {"fakemetal", "fakecuda", "fake"})
            install_plugin(fixture(f), dir.path());
        install_plugin(real_plugin("cpu"), dir.path());
        plugins = PluginSet::load(config_from(fmt::format("backends: {{order: [{}]}}", order)),
                                  only_folder(dir.path()));
        dispatch = std::make_unique<Dispatcher>(plugins.selected(), registry);
    }
};

bool has_entry(const RegistryReport& r, std::string_view backend, ferrox_op op, ferrox_kind kind,
               Outcome outcome, std::string_view detail) {
    for (const auto& e : r.entries)
        if (e.key.backend == backend && e.key.op == op && e.key.kind == kind &&
            e.outcome == outcome && e.detail == detail)
            return true;
    return false;
}

}  // namespace

TEST_CASE("a deliberately unsupported kind trips the registry") {
    Rig rig("fakemetal, cpu");
    REQUIRE(rig.dispatch->backends().size() == 2);
    rig.dispatch->probe(FERROX_KIND_Q4_K, "ffn_down");
    rig.dispatch->probe(FERROX_KIND_IQ2_XXS, "ffn_up");
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    REQUIRE(report.violations.size() == 2);  // IQ2_XXS matvec + gemm on the accelerator
    for (const auto& v : report.violations) CHECK(v.key.kind == FERROX_KIND_IQ2_XXS);
    CHECK(has_entry(report, "fakemetal", FERROX_OP_GEMM, FERROX_KIND_IQ2_XXS, Outcome::Miss,
                    "CPU gemm"));
    const std::string rendered = report.render_violations();
    CHECK_THAT(rendered, Catch::Contains("IQ2_XXS") && Catch::Contains("test_dispatch.cpp"));
    // The host tier it lands on is recorded too (the CPU has every kind), and is no violation.
    CHECK(has_entry(report, "cpu", FERROX_OP_MATVEC, FERROX_KIND_IQ2_XXS, Outcome::Hit,
                    "cpu.iq2_xxs.matvec"));
}

TEST_CASE("a fully supported model seals clean") {
    Rig rig("fakemetal, cpu");
    for (ferrox_kind k : {FERROX_KIND_Q4_K, FERROX_KIND_Q6_K, FERROX_KIND_Q8_0})
        rig.dispatch->probe(k, "ffn_down");
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    CHECK(report.violations.empty());
    CHECK(report.misses.empty());
    CHECK(report.entries.size() == 6);
}

TEST_CASE("a CUDA prefill without a GEMM is recorded as a per-position matvec loop") {
    Rig rig("fakecuda, cpu");
    rig.dispatch->probe(FERROX_KIND_Q4_K, "ffn_down");
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    CHECK(has_entry(report, "fakecuda", FERROX_OP_MATVEC, FERROX_KIND_Q4_K, Outcome::Hit,
                    "cuda.matvec"));
    CHECK(has_entry(report, "fakecuda", FERROX_OP_GEMM, FERROX_KIND_Q4_K, Outcome::Miss,
                    "CUDA per-position matvec"));
    CHECK(report.violations.size() == 1);
    // Q8_0 has a real GEMM on this table: no miss for it.
    rig.dispatch->probe(FERROX_KIND_Q8_0, "attn_q");
    CHECK(rig.registry.seal().violations.size() == 1);
}

TEST_CASE("an f32 weight is recorded without being a violation") {
    Rig rig("fakemetal, cpu");
    rig.dispatch->probe(FERROX_KIND_F32, "moe_router");
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    CHECK_FALSE(report.misses.empty());
    CHECK(report.violations.empty());
    CHECK(has_entry(report, "cpu", FERROX_OP_MATVEC, FERROX_KIND_F32, Outcome::Hit,
                    "cpu.f32.matvec"));
}

TEST_CASE("dispatch records the same decision the probe predicted, and counts calls") {
    Rig rig("fakecuda, fake, cpu");
    std::mt19937_64 rng(test_seed(7));
    const uint64_t rows = 5, cols = 64;
    auto w = gaussian(rows * cols, rng);
    std::vector<std::byte> bytes(w.size() * 4);
    std::memcpy(bytes.data(), w.data(), bytes.size());
    auto m = WeightMatrix::owned("router", FERROX_KIND_F32, rows, cols, bytes);
    REQUIRE(m.has_value());

    rig.dispatch->probe(FERROX_KIND_F32, "moe_router");
    auto x = gaussian(cols, rng);
    std::vector<float> y(rows);
    for (int i = 0; i < 3; ++i) REQUIRE(rig.dispatch->apply(*m, "moe_router", x, y).has_value());

    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    size_t dispatch_hits = 0;
    for (const auto& e : report.entries)
        if (e.phase == Phase::Dispatch && e.outcome == Outcome::Hit) {
            CHECK(e.key.backend == "fake");
            CHECK(e.detail == "fixture.f32.matvec");
            CHECK(e.count == 3);
            ++dispatch_hits;
        }
    CHECK(dispatch_hits == 1);
    CHECK(has_entry(report, "fake", FERROX_OP_MATVEC, FERROX_KIND_F32, Outcome::Hit,
                    "fixture.f32.matvec"));
    // And the fixture's product is right (it computes in double).
    for (uint64_t r = 0; r < rows; ++r) {
        double want = 0;
        for (uint64_t c = 0; c < cols; ++c)
            want += static_cast<double>(w[r * cols + c]) * static_cast<double>(x[c]);
        CHECK(y[r] == Approx(want).epsilon(1e-5));
    }
}

TEST_CASE(
    "apply_many without a matvec_batch entry runs one matvec each, recorded as the fallback") {
    // The fixture plugin has no 1.9 entry: every product still runs, to
    // apply()'s bits, each under its own role, and the batch is a Miss
    // (a host backend) naming the per-product fallback.
    Rig rig("fake, cpu");
    REQUIRE_FALSE(rig.plugins.selected()[0]->has_matvec_batch());
    std::mt19937_64 rng(test_seed(19));
    const uint64_t cols = 64;
    std::vector<WeightMatrix> weights;
    for (uint64_t rows : {5u, 9u}) {
        auto w = gaussian(rows * cols, rng);
        std::vector<std::byte> bytes(w.size() * 4);
        std::memcpy(bytes.data(), w.data(), bytes.size());
        auto m = WeightMatrix::owned("expert", FERROX_KIND_F32, rows, cols, bytes);
        REQUIRE(m.has_value());
        weights.push_back(std::move(*m));
    }
    const auto x = gaussian(cols, rng);
    std::vector<std::vector<float>> alone, together;
    std::vector<MatvecJob> jobs;
    for (const WeightMatrix& w : weights) {
        alone.emplace_back(w.rows(), NAN);
        together.emplace_back(w.rows(), NAN);
        REQUIRE(rig.dispatch->apply(w, "ffn_up_exps", x, alone.back()).has_value());
        jobs.push_back({&w, "ffn_up_exps", x, together.back()});
    }
    REQUIRE(rig.dispatch->apply_many(jobs, "ffn_exps_batch").has_value());
    for (size_t j = 0; j < jobs.size(); ++j)
        CHECK(std::memcmp(alone[j].data(), together[j].data(), alone[j].size() * 4) == 0);
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    CHECK(has_entry(report, "fake", FERROX_OP_MATVEC, FERROX_KIND_F32, Outcome::Miss,
                    Dispatcher::kBatchFallback));
    CHECK(report.violations.empty());
    for (const auto& e : report.entries)
        if (e.key.role == "ffn_up_exps") CHECK(e.count == 4);  // 2 alone + 2 together
}

TEST_CASE("strict mode turns violations into an error naming them while non-strict only warns") {
    Rig rig("fakemetal, cpu");
    rig.dispatch->probe(FERROX_KIND_IQ2_XXS, "ffn_up");
    const RegistryReport report = rig.registry.seal();
    const auto strict = enforce_registry(report, true);
    REQUIRE_FALSE(strict.has_value());
    CHECK_THAT(strict.error().message(),
               Catch::Contains("IQ2_XXS") && Catch::Contains("2 violation"));
    CHECK(enforce_registry(report, false).has_value());
}

TEST_CASE("a ragged or short weight is refused before any kernel runs") {
    std::vector<std::byte> bytes(34 * 3);
    auto ragged = WeightMatrix::owned("blk.0.ffn_down.weight", FERROX_KIND_Q8_0, 3, 40, bytes);
    REQUIRE_FALSE(ragged.has_value());
    CHECK_THAT(ragged.error().message(),
               Catch::Contains("blk.0.ffn_down.weight") && Catch::Contains("multiple of"));
    auto short_bytes = WeightMatrix::owned("w", FERROX_KIND_Q8_0, 4, 32, bytes);
    REQUIRE_FALSE(short_bytes.has_value());
    CHECK_THAT(short_bytes.error().message(), Catch::Contains("needs 136 bytes, got 102"));
}

TEST_CASE("a product no selected backend can run is an error, not a crash") {
    Rig rig("fakemetal");
    std::vector<std::byte> bytes(18 * 2);
    auto m = WeightMatrix::owned("w", FERROX_KIND_IQ4_NL, 2, 32, bytes);
    REQUIRE(m.has_value());
    std::vector<float> x(32, 1.0f), y(2);
    const auto r = rig.dispatch->apply(*m, "ffn_up", x, y);
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message(),
               Catch::Contains("no selected backend") && Catch::Contains("IQ4_NL"));
}

TEST_CASE("a shape mismatch between weight and activations is refused") {
    Rig rig("cpu");
    std::vector<std::byte> bytes(4 * 8 * 4);
    auto m = WeightMatrix::owned("w", FERROX_KIND_F32, 4, 8, bytes);
    REQUIRE(m.has_value());
    std::vector<float> x(7), y(4);
    CHECK_FALSE(rig.dispatch->apply(*m, "r", x, y).has_value());
    std::vector<float> xb(16), yb(7);
    CHECK_FALSE(rig.dispatch->apply_batch(*m, "r", xb, 2, yb).has_value());
}
