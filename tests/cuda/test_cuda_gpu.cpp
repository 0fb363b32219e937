// GPU tests of libferrox_cuda.so: every kernel against the scalar reference
// (ferrox_quant) on random weights. Without a usable device the executable
// prints "SKIPPED: no CUDA device (<reason>)" and exits 77, which ctest shows
// as skipped (SKIP_RETURN_CODE 77) rather than silently passing.
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_plugin_library.h"
#include "ferrox/backend_abi.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "kernel_check.h"

namespace {

using ferrox::test::Agreement;
using ferrox::test::compare;
using ferrox::test::CudaPluginLibrary;
using ferrox::test::kMaxNmse;
using ferrox::test::kPoisonBits;
using ferrox::test::Matrix;
using ferrox::test::OwnedBackend;
using ferrox::test::random_activations;
using ferrox::test::random_matrix;
using ferrox::test::reference;
using ferrox::test::traits_of;

// Set up by main() before any test runs.
CudaPluginLibrary* g_plugin = nullptr;
ferrox_backend* g_backend = nullptr;
uint32_t g_seed = 0;

const std::vector<ferrox_kind> kMatvecKinds{FERROX_KIND_F32,  FERROX_KIND_F16,  FERROX_KIND_BF16,
                                            FERROX_KIND_Q8_0, FERROX_KIND_Q4_0, FERROX_KIND_Q4_K,
                                            FERROX_KIND_Q5_K, FERROX_KIND_Q6_K};
const std::vector<ferrox_kind> kGemmKinds{FERROX_KIND_Q8_0, FERROX_KIND_Q4_0, FERROX_KIND_Q4_K,
                                          FERROX_KIND_Q6_K};

struct WeightHandle {
    ferrox_weight* weight = nullptr;
    ~WeightHandle() {
        if (weight) g_backend->weight_release(g_backend, weight);
    }
};

ferrox_status prepare(const Matrix& m, WeightHandle& out, ferrox_message& message) {
    ferrox_weight_desc desc{};
    desc.struct_size = sizeof(desc);
    desc.abi_version = FERROX_ABI_VERSION;
    desc.kind = m.kind;
    desc.rows = m.rows;
    desc.cols = m.cols;
    desc.row_bytes = m.row_bytes;
    desc.data = m.bytes.data();
    return g_backend->weight_prepare(g_backend, &desc, 0, &out.weight, &message);
}

// Runs the backend's GEMM (n > 1 or `use_gemm`) or MATVEC into a poisoned
// output and returns it.
std::vector<float> run_backend(const WeightHandle& w, const Matrix& m, const std::vector<float>& x,
                               uint64_t n, bool use_gemm) {
    std::vector<float> y(n * m.rows, std::bit_cast<float>(kPoisonBits));
    ferrox_message message{};
    const ferrox_status status =
        use_gemm ? g_backend->gemm(g_backend, w.weight, x.data(), n, y.data(), &message)
                 : g_backend->matvec(g_backend, w.weight, x.data(), y.data(), &message);
    INFO("backend message: " << message.text);
    REQUIRE(status == FERROX_OK);
    return y;
}

std::vector<uint64_t> column_counts(ferrox_kind kind) {
    const uint32_t block = traits_of(kind).block_elements;
    if (block == 1) return {1, 33, 100, 4096};  // floats: tails shorter than a granule
    return {block, 3 * block, 4096};
}

std::string kind_text(ferrox_kind kind) { return std::string(ferrox::kind_name(kind)); }

// Worst NMSE per kernel path, printed after the run as one line each
// ("nmse MATVEC cuda_matvec_q4_k max 1.2e-13 over 12 checks") for ci/gpu-check.sh.
struct NmseSummary {
    double worst = 0;
    unsigned checks = 0;
};
std::map<std::string, NmseSummary> g_nmse;

void record_nmse(const std::string& path, double nmse) {
    NmseSummary& summary = g_nmse[path];
    summary.worst = std::max(summary.worst, nmse);
    ++summary.checks;
}

void print_nmse_summary() {
    for (const auto& [path, summary] : g_nmse)
        std::printf("nmse %s max %.3g over %u checks (bound %.0e)\n", path.c_str(), summary.worst,
                    summary.checks, kMaxNmse);
}

void check_agreement(const Agreement& a) {
    CHECK(a.unwritten == 0);
    CHECK(a.nan_mismatch == 0);
    CHECK(a.nmse <= kMaxNmse);
}

}  // namespace

TEST_CASE("every MATVEC kernel matches the scalar reference on random weights") {
    std::mt19937 rng(g_seed);
    for (const ferrox_kind kind : kMatvecKinds) {
        ferrox_kernel_info info{};
        info.struct_size = sizeof(info);
        g_backend->kernel_for(g_backend, FERROX_OP_MATVEC, kind, &info);
        INFO("kind " << kind_text(kind));
        REQUIRE(info.kernel != nullptr);
        for (const uint64_t rows : {1ull, 7ull, 37ull, 300ull}) {
            for (const uint64_t cols : column_counts(kind)) {
                INFO(rows << " x " << cols << ", kernel " << info.kernel << ", seed " << g_seed);
                const Matrix m = random_matrix(kind, rows, cols, rng);
                const std::vector<float> x = random_activations(cols, rng);
                WeightHandle w;
                ferrox_message message{};
                REQUIRE(prepare(m, w, message) == FERROX_OK);
                const Agreement a = compare(run_backend(w, m, x, 1, false), reference(m, x, 1));
                UNSCOPED_INFO("nmse " << a.nmse);
                record_nmse(std::string("MATVEC ") + info.kernel, a.nmse);
                check_agreement(a);
            }
        }
    }
}

TEST_CASE("GEMM, tiled or per-position, matches the reference for batches 1..9 and 64") {
    std::mt19937 rng(g_seed + 1);
    for (const ferrox_kind kind : kMatvecKinds) {
        ferrox_kernel_info info{};
        info.struct_size = sizeof(info);
        g_backend->kernel_for(g_backend, FERROX_OP_GEMM, kind, &info);
        const bool tiled =
            std::find(kGemmKinds.begin(), kGemmKinds.end(), kind) != kGemmKinds.end();
        INFO("kind " << kind_text(kind) << ", "
                     << (tiled ? "tiled gemm" : g_backend->gemm_fallback));
        CHECK((info.kernel != nullptr) == tiled);

        const uint64_t rows = 37;  // odd: the last row block is partial
        const uint64_t cols = 512;
        const Matrix m = random_matrix(kind, rows, cols, rng);
        WeightHandle w;
        ferrox_message message{};
        REQUIRE(prepare(m, w, message) == FERROX_OK);
        for (const uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull, 8ull, 9ull, 64ull}) {
            INFO("batch " << n << ", seed " << g_seed);
            const std::vector<float> x = random_activations(n * cols, rng);
            const Agreement a = compare(run_backend(w, m, x, n, true), reference(m, x, n));
            record_nmse(
                tiled ? std::string("GEMM ") + info.kernel : "GEMM per-position " + kind_text(kind),
                a.nmse);
            check_agreement(a);
        }
    }
}

TEST_CASE("a NaN scale makes exactly its own row NaN, on the GPU as in the reference") {
    std::mt19937 rng(g_seed + 2);
    for (const ferrox_kind kind : kMatvecKinds) {
        INFO("kind " << kind_text(kind) << ", seed " << g_seed);
        const uint64_t cols = traits_of(kind).block_elements == 1 ? 64 : 512;
        Matrix m = random_matrix(kind, 5, cols, rng);
        uint8_t* row = &m.bytes[2 * m.row_bytes];
        const uint16_t nan_half = 0x7e00;  // f16 quiet NaN (also every quant block's d)
        const uint16_t nan_bf16 = 0x7fc0;  // bf16 quiet NaN; 0x7e00 is a finite bf16
        const float nan_float = std::numeric_limits<float>::quiet_NaN();
        switch (kind) {
            case FERROX_KIND_F32:
                std::memcpy(row, &nan_float, 4);
                break;
            case FERROX_KIND_F16:
                std::memcpy(row, &nan_half, 2);
                break;
            case FERROX_KIND_BF16:
                std::memcpy(row, &nan_bf16, 2);
                break;
            case FERROX_KIND_Q6_K:
                std::memcpy(row + 208, &nan_half, 2);
                break;
            default:  // Q8_0, Q4_0, Q4_K, Q5_K: d leads the block
                std::memcpy(row, &nan_half, 2);
                break;
        }
        const std::vector<float> x = random_activations(cols, rng);
        WeightHandle w;
        ferrox_message message{};
        REQUIRE(prepare(m, w, message) == FERROX_OK);
        const std::vector<float> want = reference(m, x, 1);
        REQUIRE(std::isnan(want[2]));  // the fixture really has a NaN row
        REQUIRE_FALSE(std::isnan(want[1]));
        check_agreement(compare(run_backend(w, m, x, 1, false), want));
        check_agreement(compare(run_backend(w, m, x, 1, true), want));
    }
}

TEST_CASE("a prepared weight keeps its own copy: reusing the host bytes changes nothing") {
    // The seed cached device weights by host address; a later mapping at the
    // same address then silently ran against stale weights.
    std::mt19937 rng(g_seed + 3);
    Matrix m = random_matrix(FERROX_KIND_Q4_K, 9, 512, rng);
    const std::vector<float> x = random_activations(512, rng);
    WeightHandle first;
    ferrox_message message{};
    REQUIRE(prepare(m, first, message) == FERROX_OK);
    const std::vector<float> first_want = reference(m, x, 1);

    const Matrix other = random_matrix(FERROX_KIND_Q4_K, 9, 512, rng);
    std::copy(other.bytes.begin(), other.bytes.end(), m.bytes.begin());  // same address
    WeightHandle second;
    REQUIRE(prepare(m, second, message) == FERROX_OK);

    check_agreement(compare(run_backend(first, m, x, 1, false), first_want));
    check_agreement(compare(run_backend(second, m, x, 1, false), reference(m, x, 1)));
}

TEST_CASE("a kind without a kernel is refused at prepare time with UNSUPPORTED") {
    std::vector<uint8_t> bytes(4 * 22, 1);
    ferrox_weight_desc desc{};
    desc.struct_size = sizeof(desc);
    desc.abi_version = FERROX_ABI_VERSION;
    desc.kind = FERROX_KIND_Q5_0;
    desc.rows = 4;
    desc.cols = 32;
    desc.row_bytes = 22;
    desc.data = bytes.data();
    ferrox_weight* weight = nullptr;
    ferrox_message message{};
    CHECK(g_backend->weight_prepare(g_backend, &desc, 0, &weight, &message) ==
          FERROX_ERR_UNSUPPORTED);
    CHECK(weight == nullptr);
    CHECK(std::string_view(message.text).find("Q5_0") != std::string_view::npos);
}

TEST_CASE("vram_budget refuses a weight that would exceed it, as out of memory") {
    const ferrox_option options[] = {{"vram_budget", "4096"}};
    ferrox_backend* raw = nullptr;
    ferrox_message message{};
    REQUIRE(g_plugin->create(nullptr, options, 1, &raw, &message) == FERROX_OK);
    const OwnedBackend budgeted(raw);
    std::mt19937 rng(g_seed + 4);
    const Matrix small = random_matrix(FERROX_KIND_Q8_0, 8, 256, rng);   // 2176 bytes
    const Matrix large = random_matrix(FERROX_KIND_Q8_0, 16, 256, rng);  // 4352 bytes
    auto try_prepare = [&](const Matrix& m, ferrox_weight** out) {
        ferrox_weight_desc desc{sizeof(ferrox_weight_desc),
                                FERROX_ABI_VERSION,
                                m.kind,
                                m.rows,
                                m.cols,
                                m.row_bytes,
                                m.bytes.data()};
        return budgeted->weight_prepare(budgeted.get(), &desc, 0, out, &message);
    };
    ferrox_weight* kept = nullptr;
    REQUIRE(try_prepare(small, &kept) == FERROX_OK);
    ferrox_weight* refused = nullptr;
    CHECK(try_prepare(large, &refused) == FERROX_ERR_OUT_OF_MEMORY);
    CHECK(refused == nullptr);
    const std::string_view text = message.text;
    INFO(text);
    CHECK(text.find("cannot place a 16 x 256 Q8_0 weight") != std::string_view::npos);
    CHECK(text.find("> vram_budget 4.0 KiB (free ") != std::string_view::npos);
    budgeted->weight_release(budgeted.get(), kept);
}

TEST_CASE("a weight larger than the free device memory is refused before its bytes are read") {
    // 1024 Q8_0 rows (34 MiB) more than the device has free: the free-memory
    // check must refuse it without touching `data`, which points at 1 byte.
    ferrox_device_info info{};
    info.struct_size = sizeof(info);
    ferrox_message message{};
    REQUIRE(g_backend->device_info(g_backend, 0, &info, &message) == FERROX_OK);
    const uint64_t cols = 32768;
    const uint64_t row_bytes = cols / 32 * 34;
    const uint64_t rows = info.memory_free / row_bytes + 1024;
    const uint8_t one_byte = 1;
    ferrox_weight_desc desc{sizeof(ferrox_weight_desc),
                            FERROX_ABI_VERSION,
                            FERROX_KIND_Q8_0,
                            rows,
                            cols,
                            row_bytes,
                            &one_byte};
    ferrox_weight* refused = nullptr;
    CHECK(g_backend->weight_prepare(g_backend, &desc, 0, &refused, &message) ==
          FERROX_ERR_OUT_OF_MEMORY);
    CHECK(refused == nullptr);
    const std::string_view text = message.text;
    INFO(text);
    CHECK(text.find("cannot place a ") != std::string_view::npos);
    CHECK(text.find(" > free ") != std::string_view::npos);
    CHECK(text.find("no vram_budget") != std::string_view::npos);
}

TEST_CASE("buffers round-trip bytes and refuse out-of-range copies") {
    ferrox_buffer* buffer = nullptr;
    ferrox_message message{};
    REQUIRE(g_backend->buffer_alloc(g_backend, 64, &buffer, &message) == FERROX_OK);
    std::vector<uint8_t> in(48);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
    CHECK(g_backend->buffer_upload(g_backend, buffer, 16, in.data(), in.size(), &message) ==
          FERROX_OK);
    std::vector<uint8_t> out(48, 0);
    CHECK(g_backend->buffer_download(g_backend, buffer, 16, out.data(), out.size(), &message) ==
          FERROX_OK);
    CHECK(out == in);
    CHECK(g_backend->buffer_upload(g_backend, buffer, 32, in.data(), in.size(), &message) ==
          FERROX_ERR_INVALID_ARGUMENT);
    g_backend->buffer_free(g_backend, buffer);
}

int main(int argc, char** argv) {
    CudaPluginLibrary plugin;
    if (!plugin.ok()) {
        std::fprintf(stderr, "cannot open %s: %s\n", ferrox::test::cuda_plugin_path().c_str(),
                     plugin.error().c_str());
        return 1;  // a broken build, not a missing GPU: fail loudly
    }
    ferrox_backend* raw = nullptr;
    ferrox_message message{};
    const ferrox_status status = plugin.create(nullptr, nullptr, 0, &raw, &message);
    if (status == FERROX_ERR_NO_DRIVER || status == FERROX_ERR_NO_DEVICE) {
        std::printf("SKIPPED: no CUDA device (%s)\n", message.text);
        return 77;
    }
    if (status != FERROX_OK) {
        std::fprintf(stderr, "cuda backend creation failed (status %d): %s\n", status,
                     message.text);
        return 1;
    }
    const OwnedBackend backend(raw);
    g_plugin = &plugin;
    g_backend = backend.get();
    const char* seed_text = std::getenv("FERROX_TEST_SEED");
    g_seed = seed_text ? static_cast<uint32_t>(std::strtoul(seed_text, nullptr, 10))
                       : std::random_device{}();
    std::printf("test_cuda_gpu: seed %u (set FERROX_TEST_SEED to repeat)\n", g_seed);
    const int failed = Catch::Session().run(argc, argv);
    print_nmse_summary();
    return failed;
}
