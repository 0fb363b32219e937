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
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attention_split.h"
#include "capability_table.h"
#include "cuda_plugin_library.h"
#include "ferrox/backend_abi.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "kernel_check.h"
#include "rope_case.h"

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
// What g_backend logged through the host table main() lent it, and the SM
// count its device line reports (0 if it did not say).
std::vector<std::string> g_log;
uint32_t g_sm_count = 0;

void capture_log(void*, ferrox_log_level, const char* message) {
    g_log.emplace_back(message);
    const std::string_view text = message;
    if (const size_t at = text.find(" SMs"); at != std::string_view::npos) {
        const size_t start = text.find_last_of(' ', at - 1);
        if (start != std::string_view::npos)
            g_sm_count = static_cast<uint32_t>(std::strtoul(message + start + 1, nullptr, 10));
    }
}

bool logged(std::string_view needle) {
    return std::any_of(g_log.begin(), g_log.end(), [needle](const std::string& line) {
        return line.find(needle) != std::string::npos;
    });
}

// The kinds the plugin's capability table lists for `op`: a row added there
// is tested here without editing this file.
std::vector<ferrox_kind> table_kinds(ferrox_op op) {
    std::vector<ferrox_kind> kinds;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels)
        if (entry.op == op) kinds.push_back(entry.kind);
    return kinds;
}

const std::vector<ferrox_kind> kMatvecKinds = table_kinds(FERROX_OP_MATVEC);
const std::vector<ferrox_kind> kGemmKinds = table_kinds(FERROX_OP_GEMM);
const std::vector<ferrox_kind> kGetRowsKinds = table_kinds(FERROX_OP_GET_ROWS);

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
    // Past 8192 columns the MATVEC kernel stages activations in a second,
    // partial chunk.
    if (block == 1) return {1, 33, 100, 4096, 8192 + 1000};  // floats: short tails
    return {block, 3 * block, 4096, 8192 + 3 * 256};
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

TEST_CASE("GEMM (tiled, or per-position where a kind has no tiled kernel) matches the reference") {
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
        // 2304 columns: the tiled kernel stages 1024 at a time, so three
        // chunks, the last partial.
        for (const uint64_t cols : {512ull, 2304ull}) {
            const Matrix m = random_matrix(kind, rows, cols, rng);
            WeightHandle w;
            ferrox_message message{};
            REQUIRE(prepare(m, w, message) == FERROX_OK);
            for (const uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull, 8ull, 9ull, 64ull}) {
                INFO(cols << " columns, batch " << n << ", seed " << g_seed);
                const std::vector<float> x = random_activations(n * cols, rng);
                const Agreement a = compare(run_backend(w, m, x, n, true), reference(m, x, n));
                record_nmse(tiled ? std::string("GEMM ") + info.kernel
                                  : "GEMM per-position " + kind_text(kind),
                            a.nmse);
                check_agreement(a);
            }
        }
    }
}

TEST_CASE("a NaN scale makes exactly its own row NaN, on the GPU as in the reference") {
    std::mt19937 rng(g_seed + 2);
    for (const ferrox_kind kind : kMatvecKinds) {
        // An E8M0 scale has no NaN in ggml's decoding (0xFF is 2^127), so an
        // MXFP4 row cannot be made NaN by its scale.
        if (kind == FERROX_KIND_MXFP4) continue;
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
            default:  // the first block's d, wherever its format keeps it
                std::memcpy(row + ferrox::test::scale_fields(kind).d, &nan_half, 2);
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
    // The first kind the table lists no MATVEC for (Q8_1 today).
    const auto missing = std::find_if(
        ferrox::kAllKinds.begin(), ferrox::kAllKinds.end(),
        [](const auto& traits) { return !ferrox::cuda::has_kernel(FERROX_OP_MATVEC, traits.id); });
    REQUIRE(missing != ferrox::kAllKinds.end());
    std::vector<uint8_t> bytes(4 * missing->block_bytes, 1);
    ferrox_weight_desc desc{};
    desc.struct_size = sizeof(desc);
    desc.abi_version = FERROX_ABI_VERSION;
    desc.kind = missing->id;
    desc.rows = 4;
    desc.cols = missing->block_elements;
    desc.row_bytes = missing->block_bytes;
    desc.data = bytes.data();
    ferrox_weight* weight = nullptr;
    ferrox_message message{};
    CHECK(g_backend->weight_prepare(g_backend, &desc, 0, &weight, &message) ==
          FERROX_ERR_UNSUPPORTED);
    CHECK(weight == nullptr);
    CHECK(std::string_view(message.text).find(missing->name) != std::string_view::npos);
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

// ---- ABI 1.2: resident decoding ----------------------------------------------

namespace {

namespace ops = ferrox::model::ops;

// A buffer from the backend, freed through it.
class DeviceBuffer {
  public:
    explicit DeviceBuffer(uint64_t bytes) : bytes_(bytes) {
        ferrox_message message{};
        if (g_backend->buffer_alloc(g_backend, bytes, &buffer_, &message) != FERROX_OK)
            throw std::runtime_error(std::string("buffer_alloc: ") + message.text);
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { g_backend->buffer_free(g_backend, buffer_); }

    ferrox_tensor at(uint64_t offset = 0) const { return {buffer_, offset}; }
    uint64_t bytes() const { return bytes_; }

    void upload(const void* src, uint64_t bytes, uint64_t offset = 0) const {
        ferrox_message message{};
        const ferrox_status status =
            g_backend->buffer_upload(g_backend, buffer_, offset, src, bytes, &message);
        INFO("buffer_upload: " << message.text);
        REQUIRE(status == FERROX_OK);
    }

    // Waits for every entry called before (the ABI's one synchronisation point).
    template <class T>
    std::vector<T> download(uint64_t count, uint64_t offset = 0) const {
        std::vector<T> out(count);
        ferrox_message message{};
        const ferrox_status status = g_backend->buffer_download(
            g_backend, buffer_, offset, out.data(), count * sizeof(T), &message);
        INFO("buffer_download: " << message.text);
        REQUIRE(status == FERROX_OK);
        return out;
    }

  private:
    ferrox_buffer* buffer_ = nullptr;
    uint64_t bytes_ = 0;
};

// `values` on the device, after `lead` poisoned floats (so offsets are tested).
std::unique_ptr<DeviceBuffer> on_device(const std::vector<float>& values, uint64_t lead = 0) {
    auto buffer = std::make_unique<DeviceBuffer>((lead + values.size()) * sizeof(float) + 64);
    std::vector<float> all(lead + values.size() + 16, std::bit_cast<float>(kPoisonBits));
    std::copy(values.begin(), values.end(), all.begin() + static_cast<ptrdiff_t>(lead));
    buffer->upload(all.data(), all.size() * sizeof(float));
    return buffer;
}

std::unique_ptr<DeviceBuffer> poisoned(uint64_t count) {
    return on_device(std::vector<float>(count, std::bit_cast<float>(kPoisonBits)));
}

std::vector<float> uniform(uint64_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

void require_ok(ferrox_status status, const ferrox_message& message) {
    INFO("backend message: " << message.text);
    REQUIRE(status == FERROX_OK);
}

std::string kernel_name(ferrox_op op, ferrox_kind kind) {
    ferrox_kernel_info info{};
    info.struct_size = sizeof(info);
    g_backend->kernel_for(g_backend, op, kind, &info);
    return info.kernel ? info.kernel : "(none)";
}

uint64_t bit_mismatches(const std::vector<float>& got, const std::vector<float>& want) {
    uint64_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]) &&
                              std::bit_cast<uint32_t>(got[i]) != kPoisonBits;
        if (!both_nan && std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]))
            ++mismatches;
    }
    return mismatches;
}

void check_path(const std::string& path, const Agreement& a) {
    record_nmse(path, a.nmse);
    check_agreement(a);
}

bool table_has_resident_entries() {
    return g_backend->struct_size >= sizeof(ferrox_backend) && g_backend->project &&
           g_backend->rms_norm && g_backend->rope && g_backend->add && g_backend->glu &&
           g_backend->convert && g_backend->get_rows && g_backend->attention_resident;
}

}  // namespace

TEST_CASE("the backend fills every ABI 1.2 resident-decoding entry") {
    CHECK(table_has_resident_entries());
    CHECK(FERROX_ABI_MINOR(g_backend->abi_version) >= 2);
}

TEST_CASE("rms_norm on device rows matches the core's rms_norm") {
    std::mt19937 rng(g_seed + 10);
    struct Shape {
        uint64_t rows;
        uint32_t dim;
    };
    // Model-dim rows, per-head (qk-norm) rows of 128, and odd small ones.
    for (const Shape shape : {Shape{5, 2048}, Shape{37 * 8, 128}, Shape{3, 33}, Shape{2, 1}}) {
        INFO(shape.rows << " x " << shape.dim << ", seed " << g_seed);
        const std::vector<float> x = uniform(shape.rows * shape.dim, -3.0f, 3.0f, rng);
        const std::vector<float> gamma = uniform(shape.dim, 0.5f, 1.5f, rng);
        std::vector<float> want(x.size());
        for (uint64_t r = 0; r < shape.rows; ++r)
            ops::rms_norm(std::span(x).subspan(r * shape.dim, shape.dim), gamma, 1e-5f,
                          std::span(want).subspan(r * shape.dim, shape.dim));
        const auto dx = on_device(x, 3);
        const auto dgamma = on_device(gamma);
        const auto dy = poisoned(x.size());
        ferrox_message message{};
        require_ok(g_backend->rms_norm(g_backend, dx->at(3 * sizeof(float)), dgamma->at(),
                                       shape.rows, shape.dim, 1e-5f, dy->at(), &message),
                   message);
        check_path("RMS_NORM cuda_rms_norm", compare(dy->download<float>(x.size()), want));
        // In place (y = x).
        require_ok(
            g_backend->rms_norm(g_backend, dx->at(3 * sizeof(float)), dgamma->at(), shape.rows,
                                shape.dim, 1e-5f, dx->at(3 * sizeof(float)), &message),
            message);
        check_path("RMS_NORM cuda_rms_norm",
                   compare(dx->download<float>(x.size(), 3 * sizeof(float)), want));
    }
}

TEST_CASE("add_rms_norm updates the residual and normalises it like add then rms_norm") {
    REQUIRE(g_backend->add_rms_norm != nullptr);
    std::mt19937 rng(g_seed + 17);
    const uint64_t rows = 7;
    const uint32_t dim = 640;  // Gemma 3 270M's model dim; 20 warps' worth, 8 looping
    for (const uint64_t stride : {uint64_t{dim}, uint64_t{0}}) {
        INFO("src_stride " << stride << ", seed " << g_seed);
        const std::vector<float> x = uniform(rows * dim, -3.0f, 3.0f, rng);
        const std::vector<float> o = uniform(stride ? rows * dim : dim, -1.0f, 1.0f, rng);
        const std::vector<float> gamma = uniform(dim, 0.5f, 1.5f, rng);
        std::vector<float> sum = x, want(x.size());
        for (uint64_t r = 0; r < rows; ++r)
            for (uint32_t i = 0; i < dim; ++i) sum[r * dim + i] += 0.75f * o[r * stride + i];
        for (uint64_t r = 0; r < rows; ++r)
            ops::rms_norm(std::span(sum).subspan(r * dim, dim), gamma, 1e-6f,
                          std::span(want).subspan(r * dim, dim));
        const auto dx = on_device(x);
        const auto dor = on_device(o);
        const auto dgamma = on_device(gamma);
        const auto dy = poisoned(x.size());
        ferrox_message message{};
        require_ok(g_backend->add_rms_norm(g_backend, dx->at(), dor->at(), stride, 0.75f,
                                           dgamma->at(), rows, dim, 1e-6f, dy->at(), &message),
                   message);
        check_path("ADD_RMS_NORM cuda_add_rms_norm (residual)",
                   compare(dx->download<float>(x.size()), sum));
        check_path("ADD_RMS_NORM cuda_add_rms_norm", compare(dy->download<float>(x.size()), want));
        // y on top of dst is refused: other blocks still read it.
        CHECK(g_backend->add_rms_norm(g_backend, dx->at(), dor->at(), stride, 0.75f, dgamma->at(),
                                      rows, dim, 1e-6f, dx->at(),
                                      &message) == FERROX_ERR_INVALID_ARGUMENT);
    }
}

TEST_CASE("rope rotates device heads like the core, in both styles") {
    std::mt19937 rng(g_seed + 11);
    const uint32_t n_pos = 7;
    const uint32_t n_heads = 6;
    for (const uint32_t head_dim : {64u, 128u}) {
        for (const bool neox : {false, true}) {
            INFO("head_dim " << head_dim << (neox ? " neox" : " normal") << ", seed " << g_seed);
            const auto [x, cos, sin, want] =
                ferrox::test::rope_case(n_pos, n_heads, head_dim, neox, 300, 11, rng);
            const auto dx = on_device(x);
            const auto dcos = on_device(cos);
            const auto dsin = on_device(sin);
            ferrox_message message{};
            require_ok(g_backend->rope(g_backend, dx->at(), dcos->at(), dsin->at(), n_pos, n_heads,
                                       head_dim, neox ? 1 : 0, &message),
                       message);
            const std::vector<float> got = dx->download<float>(x.size());
            check_path("ROPE cuda_rope", compare(got, want));
            CHECK(compare(got, x).nmse > 1e-3);  // it really rotated
        }
    }
}

TEST_CASE("add broadcasts a stride-0 bias and strides a padded source, with alpha") {
    std::mt19937 rng(g_seed + 12);
    const uint64_t rows = 9;
    const uint32_t dim = 1000;
    for (const uint64_t stride : {uint64_t{0}, uint64_t{dim}, uint64_t{dim + 24}}) {
        const float alpha = stride == 0 ? 1.0f : -0.75f;
        INFO("src_stride " << stride << " alpha " << alpha << ", seed " << g_seed);
        const std::vector<float> dst = uniform(rows * dim, -1.0f, 1.0f, rng);
        const uint64_t src_count = stride == 0 ? dim : (rows - 1) * stride + dim;
        const std::vector<float> src = uniform(src_count, -1.0f, 1.0f, rng);
        std::vector<float> want = dst;
        for (uint64_t r = 0; r < rows; ++r)
            for (uint32_t i = 0; i < dim; ++i) want[r * dim + i] += alpha * src[r * stride + i];
        const auto ddst = on_device(dst);
        const auto dsrc = on_device(src, 5);
        ferrox_message message{};
        require_ok(g_backend->add(g_backend, ddst->at(), dsrc->at(5 * sizeof(float)), rows, dim,
                                  stride, alpha, &message),
                   message);
        check_path("ADD cuda_add", compare(ddst->download<float>(dst.size()), want));
    }
}

TEST_CASE("swiglu and geglu on device match the core's glu") {
    std::mt19937 rng(g_seed + 13);
    const uint64_t count = 100003;
    for (const ferrox_glu_kind kind : {FERROX_GLU_SWIGLU, FERROX_GLU_GEGLU}) {
        const bool gelu = kind == FERROX_GLU_GEGLU;
        INFO((gelu ? "geglu" : "swiglu") << ", seed " << g_seed);
        // Past +-10 too: GeGLU's clamps.
        const std::vector<float> gate = uniform(count, -12.0f, 12.0f, rng);
        const std::vector<float> up = uniform(count, -2.0f, 2.0f, rng);
        std::vector<float> want = gate;
        ops::glu(
            want, up,
            gelu ? ferrox::model::FfnActivation::GeluTanh : ferrox::model::FfnActivation::Silu);
        const auto dgate = on_device(gate);
        const auto dup = on_device(up);
        ferrox_message message{};
        require_ok(g_backend->glu(g_backend, kind, dgate->at(), dup->at(), count, &message),
                   message);
        const std::vector<float> got = dgate->download<float>(count);
        check_path(gelu ? "GEGLU cuda_geglu" : "SWIGLU cuda_swiglu", compare(got, want));
        if (gelu) {
            // Bit-identical except where the device tanhf's last ulp survives
            // the f16 rounding: report how often, and bound it.
            const uint64_t mismatches = bit_mismatches(got, want);
            std::printf("geglu: %llu of %llu outputs differ in bits from the core's table\n",
                        static_cast<unsigned long long>(mismatches),
                        static_cast<unsigned long long>(count));
            CHECK(mismatches * 100 < count);
        }
    }
}

TEST_CASE("convert stores f32 as f32 and as f16 bit-exact with ferrox_quant") {
    std::mt19937 rng(g_seed + 14);
    std::vector<float> src = uniform(50000, -70000.0f, 70000.0f, rng);
    // Small magnitudes too: f16 subnormals and underflow.
    const std::vector<float> small = uniform(50000, -1e-4f, 1e-4f, rng);
    src.insert(src.end(), small.begin(), small.end());
    const std::vector<float> unit = uniform(50000, -1.0f, 1.0f, rng);
    src.insert(src.end(), unit.begin(), unit.end());
    const uint64_t count = src.size();
    const auto dsrc = on_device(src);
    {
        const auto ddst = poisoned(count);
        ferrox_message message{};
        require_ok(
            g_backend->convert(g_backend, dsrc->at(), ddst->at(), FERROX_KIND_F32, count, &message),
            message);
        CHECK(bit_mismatches(ddst->download<float>(count), src) == 0);
    }
    {
        DeviceBuffer ddst(count * sizeof(uint16_t) + 2);
        const std::vector<uint16_t> poison(count + 1, 0x7e55);
        ddst.upload(poison.data(), poison.size() * sizeof(uint16_t));
        ferrox_message message{};
        // At a 2-byte offset: a KV row need not be 4-byte aligned.
        require_ok(
            g_backend->convert(g_backend, dsrc->at(), ddst.at(2), FERROX_KIND_F16, count, &message),
            message);
        const std::vector<uint16_t> got = ddst.download<uint16_t>(count, 2);
        uint64_t mismatches = 0;
        for (uint64_t i = 0; i < count; ++i)
            if (got[i] != ferrox::quant::fp32_to_fp16(src[i])) ++mismatches;
        CHECK(mismatches == 0);
    }
}

TEST_CASE("get_rows looks up scaled rows of every kind it lists as the reference dequantizes") {
    std::mt19937 rng(g_seed + 15);
    int kinds_checked = 0;
    for (const ferrox_kind kind : kGetRowsKinds) {
        ferrox_kernel_info info{};
        info.struct_size = sizeof(info);
        g_backend->kernel_for(g_backend, FERROX_OP_GET_ROWS, kind, &info);
        INFO("kind " << kind_text(kind));
        REQUIRE(info.kernel != nullptr);  // the backend answers from the same table
        const std::string name = info.kernel;
        INFO("kind " << kind_text(kind) << ", kernel " << name << ", seed " << g_seed);
        const uint64_t rows = 50;
        const uint64_t cols = traits_of(kind).block_elements == 1 ? 1037 : 4 * 256;
        const Matrix m = random_matrix(kind, rows, cols, rng);
        WeightHandle w;
        ferrox_message message{};
        require_ok(prepare(m, w, message), message);
        const std::vector<int32_t> ids{7, 0, 49, 7, 23};
        const float scale = 0.5f;
        std::vector<float> want(ids.size() * cols);
        for (size_t i = 0; i < ids.size(); ++i) {
            REQUIRE(ferrox::quant::dequantize_row(
                kind, &m.bytes[static_cast<uint64_t>(ids[i]) * m.row_bytes], &want[i * cols],
                cols));
            for (uint64_t c = 0; c < cols; ++c) want[i * cols + c] *= scale;
        }
        const auto dout = poisoned(want.size());
        require_ok(g_backend->get_rows(g_backend, w.weight, ids.data(), ids.size(), scale,
                                       dout->at(), &message),
                   message);
        const std::vector<float> got = dout->download<float>(want.size());
        check_path("GET_ROWS " + name, compare(got, want));
        CHECK(bit_mismatches(got, want) == 0);  // the same decoder, the same multiply

        // An id outside the weight is refused before anything runs.
        const std::vector<int32_t> bad{3, 50};
        CHECK(g_backend->get_rows(g_backend, w.weight, bad.data(), bad.size(), scale, dout->at(),
                                  &message) == FERROX_ERR_INVALID_ARGUMENT);
        CHECK(std::string_view(message.text).find("id 50") != std::string_view::npos);
        ++kinds_checked;
    }
    CHECK(kinds_checked == static_cast<int>(kGetRowsKinds.size()));
    CHECK(kGetRowsKinds.size() == kMatvecKinds.size());
}

TEST_CASE("attention_resident matches the core's attend: decode, prefill, window, GQA") {
    struct Case {
        uint32_t n_query, pos0, window, n_head, n_head_kv, head_dim;
    };
    const std::vector<Case> cases{
        {1, 700, 0, 8, 2, 128},
        {37, 0, 0, 8, 2, 128},
        {37, 100, 0, 8, 2, 64},
        {37, 100, 8, 8, 2, 128},
        {1, 700, 8, 8, 2, 256},
        {5, 40, 0, 4, 4, 256},
        {1, 700, 0, 8, 8, 64},
        // Long decodes: the split (flash-decoding) path on any GPU with more
        // SMs than heads (attention_split.h), a window of 512 too.
        {1, 5000, 0, 8, 2, 128},
        {1, 5000, 512, 8, 2, 128},
        {1, 20000, 0, 8, 2, 128},
        {1, 20000, 0, 32, 8, 128},
    };
    std::mt19937 rng(g_seed + 16);
    bool split_expected = false;
    for (const Case& c : cases) {
        // The path the backend takes, by the heuristic it uses and the SM count it reported.
        const uint32_t splits =
            ferrox::cuda::attention_splits(c.n_query, c.pos0, c.window, c.n_head, g_sm_count);
        split_expected = split_expected || splits > 1;
        std::printf("attention n_query %u pos0 %u window %u heads %u: %s (%u SMs)\n", c.n_query,
                    c.pos0, c.window, c.n_head,
                    splits > 1 ? ("split into " + std::to_string(splits) + " chunks").c_str()
                               : "single pass",
                    g_sm_count);
        const std::string path = splits > 1 ? " split" : "";
        for (const ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16}) {
            INFO("n_query " << c.n_query << " pos0 " << c.pos0 << " window " << c.window
                            << " heads " << c.n_head << ":" << c.n_head_kv << " dim " << c.head_dim
                            << " " << kind_text(kind) << ", seed " << g_seed);
            const uint32_t positions = c.pos0 + c.n_query;
            const uint64_t kv_row = uint64_t{c.n_head_kv} * c.head_dim;
            const uint64_t q_row = uint64_t{c.n_head} * c.head_dim;
            const std::vector<float> q = uniform(c.n_query * q_row, -1.0f, 1.0f, rng);
            std::vector<float> keys = uniform(positions * kv_row, -1.0f, 1.0f, rng);
            std::vector<float> values = uniform(positions * kv_row, -1.0f, 1.0f, rng);
            std::vector<uint16_t> keys16(keys.size());
            std::vector<uint16_t> values16(values.size());
            for (size_t i = 0; i < keys.size(); ++i) {
                keys16[i] = ferrox::quant::fp32_to_fp16(keys[i]);
                values16[i] = ferrox::quant::fp32_to_fp16(values[i]);
                if (kind == FERROX_KIND_F16) {  // the reference reads the same f16 values
                    keys[i] = ferrox::quant::fp16_to_fp32(keys16[i]);
                    values[i] = ferrox::quant::fp16_to_fp32(values16[i]);
                }
            }
            const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
            const ops::AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, c.head_dim, scale};
            std::vector<float> want(c.n_query * q_row);
            std::vector<float> scores(positions);
            for (uint32_t i = 0; i < c.n_query; ++i) {
                const uint32_t last = c.pos0 + i;
                const uint32_t first =
                    c.window > 0 && last + 1 > c.window ? last + 1 - c.window : 0;
                ops::attend(shape, std::span(q).subspan(i * q_row, q_row), keys.data(),
                            values.data(), first, last, scores,
                            std::span(want).subspan(i * q_row, q_row));
            }
            const uint64_t element = kind == FERROX_KIND_F16 ? 2 : 4;
            DeviceBuffer dkeys(keys.size() * element);
            DeviceBuffer dvalues(values.size() * element);
            if (kind == FERROX_KIND_F16) {
                dkeys.upload(keys16.data(), keys16.size() * 2);
                dvalues.upload(values16.data(), values16.size() * 2);
            } else {
                dkeys.upload(keys.data(), keys.size() * 4);
                dvalues.upload(values.data(), values.size() * 4);
            }
            const auto dq = on_device(q);
            const auto dout = poisoned(want.size());
            ferrox_attention_desc desc{};
            desc.struct_size = sizeof(desc);
            desc.abi_version = FERROX_ABI_VERSION;
            desc.n_query = c.n_query;
            desc.pos0 = c.pos0;
            desc.window = c.window;
            desc.n_head = c.n_head;
            desc.n_head_kv = c.n_head_kv;
            desc.head_dim_k = c.head_dim;
            desc.head_dim_v = c.head_dim;
            desc.scale = scale;
            desc.kv_kind = desc.value_kind = kind;
            ferrox_message message{};
            require_ok(g_backend->attention_resident(g_backend, &desc, dq->at(), dkeys.at(),
                                                     dvalues.at(), dout->at(), &message),
                       message);
            check_path("ATTENTION " + kernel_name(FERROX_OP_ATTENTION, kind) + path,
                       compare(dout->download<float>(want.size()), want));
        }
    }
    // The backend says (once, at debug level) when it first splits.
    INFO("SM count from the device line: " << g_sm_count);
    CHECK(g_sm_count > 0);
    CHECK(split_expected);
    CHECK(logged("attention_resident: split decode") == split_expected);
}

TEST_CASE("attention_cells over scrambled cells equals attention_resident over them in order") {
    // Two sequences whose cells interleave at random in one cache, both in
    // one call (ABI 1.3); each must equal, bit for bit, attention_resident
    // over its own rows laid out in position order (the kernels walk the
    // same positions in the same order), single pass and split.
    REQUIRE(g_backend->attention_cells != nullptr);
    std::mt19937 rng(g_seed + 17);
    const uint32_t n_head = 8, n_head_kv = 2, dim = 128, rows = 1;
    const uint64_t kv_row = uint64_t{n_head_kv} * dim, q_row = uint64_t{n_head} * dim;
    for (const uint32_t length : {40u, 5000u}) {
        for (const uint32_t window : {0u, 512u}) {
            INFO("length " << length << " window " << window << ", seed " << g_seed);
            const uint32_t lengths[2] = {length, length / 2 + 3};
            const uint32_t n_cells = lengths[0] + lengths[1] + 4;
            const std::vector<float> keys = uniform(n_cells * kv_row, -1.0f, 1.0f, rng);
            const std::vector<float> values = uniform(n_cells * kv_row, -1.0f, 1.0f, rng);
            std::vector<uint32_t> order(n_cells);
            for (uint32_t c = 0; c < n_cells; ++c) order[c] = c;
            std::shuffle(order.begin(), order.end(), rng);
            std::vector<uint32_t> cell_index, spans;
            uint32_t max_span = 0;
            for (uint32_t s = 0; s < 2; ++s) {
                const auto base = static_cast<uint32_t>(cell_index.size());
                for (uint32_t p = 0; p < lengths[s]; ++p)
                    cell_index.push_back(order[(s ? lengths[0] : 0) + p]);
                const uint32_t last = lengths[s] - 1;
                const uint32_t first = window && last + 1 > window ? last + 1 - window : 0;
                spans.push_back(base + first);
                spans.push_back(base + last + 1);
                max_span = std::max(max_span, last + 1 - first);
            }
            const std::vector<float> q = uniform(2 * rows * q_row, -1.0f, 1.0f, rng);
            const auto dq = on_device(q), dkeys = on_device(keys), dvalues = on_device(values);
            DeviceBuffer dindex(cell_index.size() * 4), dspans(spans.size() * 4);
            dindex.upload(cell_index.data(), cell_index.size() * 4);
            dspans.upload(spans.data(), spans.size() * 4);
            const auto dout = poisoned(2 * rows * q_row);
            ferrox_attention_cells_desc d{};
            d.struct_size = sizeof d;
            d.abi_version = FERROX_ABI_VERSION;
            d.n_query = 2 * rows;
            d.n_head = n_head;
            d.n_head_kv = n_head_kv;
            d.head_dim_k = d.head_dim_v = dim;
            d.scale = 1.0f / std::sqrt(static_cast<float>(dim));
            d.kv_kind = FERROX_KIND_F32;
            d.n_cells = n_cells;
            d.n_index = static_cast<uint32_t>(cell_index.size());
            d.max_span = max_span;
            ferrox_message message{};
            require_ok(
                g_backend->attention_cells(g_backend, &d, dq->at(), dkeys->at(), dvalues->at(),
                                           dindex.at(), dspans.at(), dout->at(), &message),
                message);
            const auto got = dout->download<float>(2 * rows * q_row);
            for (uint32_t s = 0; s < 2; ++s) {
                std::vector<float> k, v;
                for (uint32_t p = 0; p < lengths[s]; ++p) {
                    const uint32_t cell = order[(s ? lengths[0] : 0) + p];
                    k.insert(k.end(), keys.begin() + cell * kv_row,
                             keys.begin() + (cell + 1) * kv_row);
                    v.insert(v.end(), values.begin() + cell * kv_row,
                             values.begin() + (cell + 1) * kv_row);
                }
                const auto sq = on_device(std::vector<float>(q.begin() + s * rows * q_row,
                                                             q.begin() + (s + 1) * rows * q_row));
                const auto sk = on_device(k), sv = on_device(v);
                const auto sout = poisoned(rows * q_row);
                ferrox_attention_desc one{};
                one.struct_size = sizeof one;
                one.abi_version = FERROX_ABI_VERSION;
                one.n_query = rows;
                one.pos0 = lengths[s] - rows;
                one.window = window;
                one.n_head = n_head;
                one.n_head_kv = n_head_kv;
                one.head_dim_k = one.head_dim_v = dim;
                one.scale = d.scale;
                one.kv_kind = FERROX_KIND_F32;
                require_ok(g_backend->attention_resident(g_backend, &one, sq->at(), sk->at(),
                                                         sv->at(), sout->at(), &message),
                           message);
                const auto want = sout->download<float>(rows * q_row);
                // Bit-identical when both calls take the same split count.
                const bool same_split =
                    ferrox::cuda::attention_splits_for_span(2 * rows, n_head, max_span,
                                                            g_sm_count) ==
                    ferrox::cuda::attention_splits(rows, one.pos0, window, n_head, g_sm_count);
                if (same_split)
                    CHECK(std::memcmp(got.data() + s * rows * q_row, want.data(),
                                      want.size() * sizeof(float)) == 0);
                else
                    check_path("ATTENTION cells vs resident",
                               compare(std::vector<float>(got.begin() + s * rows * q_row,
                                                          got.begin() + (s + 1) * rows * q_row),
                                       want));
            }
        }
    }
}

TEST_CASE("project runs MATVEC (n = 1) and GEMM (n = 5) on device activations") {
    std::mt19937 rng(g_seed + 17);
    // Every MATVEC kind, F16 included, has a tiled GEMM kernel now.
    for (const ferrox_kind kind : {FERROX_KIND_Q4_K, FERROX_KIND_Q5_K, FERROX_KIND_F16}) {
        const uint64_t rows = 37;
        const uint64_t cols = 512;
        const Matrix m = random_matrix(kind, rows, cols, rng);
        WeightHandle w;
        ferrox_message message{};
        require_ok(prepare(m, w, message), message);
        for (const uint64_t n : {uint64_t{1}, uint64_t{5}}) {
            INFO("kind " << kind_text(kind) << ", n " << n << ", seed " << g_seed);
            const std::vector<float> x = random_activations(n * cols, rng);
            const auto dx = on_device(x, 1);
            const auto dy = poisoned(n * rows);
            require_ok(g_backend->project(g_backend, w.weight, dx->at(sizeof(float)), n, dy->at(),
                                          &message),
                       message);
            check_path("PROJECT " + kind_text(kind) + (n == 1 ? " n=1" : " n=5"),
                       compare(dy->download<float>(n * rows), reference(m, x, n)));
        }
    }
}

TEST_CASE("queued resident entries run in call order before one download") {
    // get_rows -> rms_norm -> project -> add, with no synchronisation between.
    std::mt19937 rng(g_seed + 18);
    const uint64_t vocab = 40;
    const uint64_t dim = 256;
    const Matrix embed = random_matrix(FERROX_KIND_Q8_0, vocab, dim, rng);
    const Matrix proj = random_matrix(FERROX_KIND_Q4_K, 64, dim, rng);
    WeightHandle we;
    WeightHandle wp;
    ferrox_message message{};
    require_ok(prepare(embed, we, message), message);
    require_ok(prepare(proj, wp, message), message);
    const std::vector<int32_t> ids{3, 17, 39};
    const std::vector<float> gamma = uniform(dim, 0.5f, 1.5f, rng);
    const std::vector<float> bias = uniform(64, -1.0f, 1.0f, rng);

    std::vector<float> h(ids.size() * dim);
    for (size_t i = 0; i < ids.size(); ++i)
        REQUIRE(ferrox::quant::dequantize_row(
            embed.kind, &embed.bytes[static_cast<uint64_t>(ids[i]) * embed.row_bytes], &h[i * dim],
            dim));
    for (size_t i = 0; i < ids.size(); ++i)
        ops::rms_norm(std::span(h).subspan(i * dim, dim), gamma, 1e-6f,
                      std::span(h).subspan(i * dim, dim));
    std::vector<float> want = reference(proj, h, ids.size());
    for (size_t i = 0; i < ids.size(); ++i)
        for (uint64_t r = 0; r < 64; ++r) want[i * 64 + r] += bias[r];

    const auto dh = poisoned(h.size());
    const auto dgamma = on_device(gamma);
    const auto dbias = on_device(bias);
    const auto dy = poisoned(want.size());
    require_ok(
        g_backend->get_rows(g_backend, we.weight, ids.data(), ids.size(), 1.0f, dh->at(), &message),
        message);
    require_ok(g_backend->rms_norm(g_backend, dh->at(), dgamma->at(), ids.size(), dim, 1e-6f,
                                   dh->at(), &message),
               message);
    require_ok(g_backend->project(g_backend, wp.weight, dh->at(), ids.size(), dy->at(), &message),
               message);
    require_ok(g_backend->add(g_backend, dy->at(), dbias->at(), ids.size(), 64, 0, 1.0f, &message),
               message);
    check_path("chain get_rows/rms_norm/project/add",
               compare(dy->download<float>(want.size()), want));
}

TEST_CASE("resident entries refuse tensors outside their buffers as invalid arguments") {
    const auto x = poisoned(64);
    const auto gamma = poisoned(64);
    ferrox_message message{};
    // Offset past the end of the buffer.
    CHECK(g_backend->rms_norm(g_backend, {x->at().buffer, x->bytes() + 4}, gamma->at(), 1, 64,
                              1e-6f, x->at(), &message) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK(std::string_view(message.text).find("'x'") != std::string_view::npos);
    // In range at its start but not for its extent.
    CHECK(g_backend->glu(g_backend, FERROX_GLU_SWIGLU, x->at(), gamma->at(), x->bytes(),
                         &message) == FERROX_ERR_INVALID_ARGUMENT);
    // Misaligned for floats.
    CHECK(g_backend->add(g_backend, x->at(2), gamma->at(), 1, 8, 0, 1.0f, &message) ==
          FERROX_ERR_INVALID_ARGUMENT);
    // No buffer at all.
    CHECK(g_backend->add(g_backend, ferrox_tensor{nullptr, 0}, gamma->at(), 1, 8, 0, 1.0f,
                         &message) == FERROX_ERR_INVALID_ARGUMENT);
    // A cache too short for pos0 + n_query rows.
    ferrox_attention_desc desc{};
    desc.struct_size = sizeof(desc);
    desc.n_query = 1;
    desc.pos0 = 100;
    desc.n_head = 1;
    desc.n_head_kv = 1;
    desc.head_dim_k = 64;
    desc.head_dim_v = 64;
    desc.scale = 0.125f;
    desc.kv_kind = FERROX_KIND_F32;
    CHECK(g_backend->attention_resident(g_backend, &desc, x->at(), x->at(), x->at(), gamma->at(),
                                        &message) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK(std::string_view(message.text).find("'keys'") != std::string_view::npos);
    // A projection into its own input.
    std::mt19937 rng(g_seed + 19);
    const Matrix m = random_matrix(FERROX_KIND_Q8_0, 4, 32, rng);
    WeightHandle w;
    require_ok(prepare(m, w, message), message);
    CHECK(g_backend->project(g_backend, w.weight, x->at(), 1, x->at(8), &message) ==
          FERROX_ERR_INVALID_ARGUMENT);
    // The refusals left the stream healthy: a download still succeeds.
    static_cast<void>(x->download<float>(64));
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
    ferrox_host host{};
    host.struct_size = sizeof(host);
    host.abi_version = FERROX_ABI_VERSION;
    host.log = capture_log;
    const ferrox_status status = plugin.create(&host, nullptr, 0, &raw, &message);
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
