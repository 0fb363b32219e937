// ferrox_cuda_bench: MATVEC / GEMM timings of libferrox_cuda.so through its
// ABI table alone (no core, no dispatch), for ci/gpu-check.sh.
//
//   ferrox_cuda_bench [--kinds Q4_K,Q6_K|all] [--shape 8192x28672] [-n 1]
//                     [--reps 50] [--rotate-mib 1024] [--hot] [--seed S]
//
// Why not only `ferrox bench`: that one makes its weights with the reference
// quantizer, which takes minutes per 8192x28672 K-quant matrix on one core;
// here the weights are random blocks with realistic scales (kernel_check.h),
// made in about a second. The timed call is the same ABI v1 round trip the
// core makes: activations up from host memory, the kernel, results down,
// stream synchronised. Cold (the default): the one host matrix is prepared
// into distinct device copies totalling >= --rotate-mib and the calls rotate
// over them, so each call reads its weight from HBM, not from L2.
//
// Prints one JSON object {"results": [...]} with the same row keys as
// `ferrox bench --json`. Exit 0 on success, 77 without a device, 1 on failure.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "capability_table.h"
#include "cuda_plugin_library.h"
#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"
#include "kernel_check.h"

namespace {

constexpr int kExitNoDevice = 77;

struct Options {
    std::vector<std::string> kinds{"Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};
    uint64_t rows = 8192;
    uint64_t cols = 28672;
    uint64_t n = 1;
    unsigned reps = 50;
    uint64_t rotate_mib = 1024;
    bool hot = false;
    uint32_t seed = 1;
};

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    std::stringstream stream{std::string(text)};
    for (std::string part; std::getline(stream, part, separator);)
        if (!part.empty()) parts.push_back(part);
    return parts;
}

// "--kinds all": every kind the plugin's capability table has a MATVEC
// kernel for (kernel_check.h makes weights for each of them).
std::vector<std::string> table_kinds() {
    std::vector<std::string> kinds;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels)
        if (entry.op == FERROX_OP_MATVEC) kinds.emplace_back(ferrox::kind_name(entry.kind));
    return kinds;
}

bool parse_args(int argc, char** argv, Options& o) {
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string_view arg = argv[i];
            if (arg == "--hot") {
                o.hot = true;
                continue;
            }
            if (i + 1 >= argc) throw std::invalid_argument("missing value");
            const std::string value = argv[++i];
            if (arg == "--kinds") {
                o.kinds = value == "all" ? table_kinds() : split(value, ',');
            } else if (arg == "--shape") {
                const auto dims = split(value, 'x');
                if (dims.size() != 2) throw std::invalid_argument("shape");
                o.rows = std::stoull(dims[0]);
                o.cols = std::stoull(dims[1]);
            } else if (arg == "-n") {
                o.n = std::stoull(value);
            } else if (arg == "--reps") {
                o.reps = static_cast<unsigned>(std::stoul(value));
            } else if (arg == "--rotate-mib") {
                o.rotate_mib = std::stoull(value);
            } else if (arg == "--seed") {
                o.seed = static_cast<uint32_t>(std::stoul(value));
            } else {
                throw std::invalid_argument("unknown option");
            }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr,
                     "usage: ferrox_cuda_bench [--kinds K,...|all] [--shape ROWSxCOLS] [-n N] "
                     "[--reps R] [--rotate-mib M] [--hot] [--seed S]\n");
        return false;
    }
    return o.rows > 0 && o.cols > 0 && o.n > 0 && o.reps > 0 && !o.kinds.empty();
}

double percentile(std::vector<double> values, double p) {
    std::sort(values.begin(), values.end());
    const double index = p * static_cast<double>(values.size() - 1);
    return values[static_cast<size_t>(index + 0.5)];
}

// Releases every prepared copy through the backend that made it.
struct PreparedCopies {
    ferrox_backend* backend = nullptr;
    std::vector<ferrox_weight*> weights;
    PreparedCopies() = default;
    PreparedCopies(const PreparedCopies&) = delete;
    PreparedCopies& operator=(const PreparedCopies&) = delete;
    ~PreparedCopies() {
        for (ferrox_weight* weight : weights) backend->weight_release(backend, weight);
    }
};

// One row of the JSON output; `error` set (and false returned) on failure.
bool bench_kind(ferrox_backend* backend, const char* backend_name, const Options& o,
                const std::string& kind_text, std::string& row, std::string& error) {
    const ferrox::KindTraits* traits = ferrox::kind_traits(kind_text);
    if (traits == nullptr) {
        error = "unknown kind " + kind_text;
        return false;
    }
    const ferrox_kind kind = traits->id;
    if (!ferrox::row_bytes(kind, o.cols)) {
        error = kind_text + ": the column count is not a multiple of its block";
        return false;
    }
    std::mt19937 rng(o.seed);
    ferrox::test::Matrix m{};
    try {
        m = ferrox::test::random_matrix(kind, o.rows, o.cols, rng);
    } catch (const std::logic_error& e) {  // a kind kernel_check.h makes no weights for
        error = kind_text + ": " + e.what();
        return false;
    }
    const uint64_t bytes = m.bytes.size();
    const uint64_t copies = o.hot ? 1 : std::max<uint64_t>(1, (o.rotate_mib << 20) / bytes + 1);

    PreparedCopies prepared;
    prepared.backend = backend;
    for (uint64_t i = 0; i < copies; ++i) {
        ferrox_weight_desc desc{sizeof(ferrox_weight_desc),
                                FERROX_ABI_VERSION,
                                kind,
                                m.rows,
                                m.cols,
                                m.row_bytes,
                                m.bytes.data()};
        ferrox_weight* weight = nullptr;
        ferrox_message message{};
        if (backend->weight_prepare(backend, &desc, 0, &weight, &message) != FERROX_OK) {
            error = kind_text + ": weight_prepare: " + message.text;
            return false;
        }
        prepared.weights.push_back(weight);
    }

    const std::vector<float> x = ferrox::test::random_activations(o.n * o.cols, rng);
    std::vector<float> y(o.n * o.rows);
    auto once = [&](const ferrox_weight* weight) {
        ferrox_message message{};
        const ferrox_status status =
            o.n == 1 ? backend->matvec(backend, weight, x.data(), y.data(), &message)
                     : backend->gemm(backend, weight, x.data(), o.n, y.data(), &message);
        if (status != FERROX_OK) error = kind_text + ": " + message.text;
        return status == FERROX_OK;
    };
    for (const ferrox_weight* weight : prepared.weights)  // warm-up: every copy once
        if (!once(weight)) return false;
    std::vector<double> seconds;
    for (unsigned rep = 0; rep < o.reps; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        if (!once(prepared.weights[rep % copies])) return false;
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }

    ferrox_kernel_info info{};
    info.struct_size = sizeof(info);
    backend->kernel_for(backend, o.n == 1 ? FERROX_OP_MATVEC : FERROX_OP_GEMM, kind, &info);
    const std::string kernel = info.kernel != nullptr              ? info.kernel
                               : backend->gemm_fallback != nullptr ? backend->gemm_fallback
                                                                   : "-";
    const double median = percentile(seconds, 0.5);
    char text[768];
    std::snprintf(text, sizeof(text),
                  "{\"kind\": \"%s\", \"shape\": \"%llux%llu\", \"n\": %llu, \"backend\": \"%s\", "
                  "\"kernel\": \"%s\", \"median_s\": %.9g, \"p10_s\": %.9g, \"p90_s\": %.9g, "
                  "\"weight_gb_per_s\": %.6g, \"gflop_per_s\": %.6g, \"copies\": %llu, "
                  "\"weight_bytes\": %llu}",
                  std::string(traits->name).c_str(), static_cast<unsigned long long>(o.rows),
                  static_cast<unsigned long long>(o.cols), static_cast<unsigned long long>(o.n),
                  backend_name, kernel.c_str(), median, percentile(seconds, 0.1),
                  percentile(seconds, 0.9), static_cast<double>(bytes) / median / 1e9,
                  2.0 * static_cast<double>(o.rows * o.cols * o.n) / median / 1e9,
                  static_cast<unsigned long long>(copies), static_cast<unsigned long long>(bytes));
    row = text;
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (!parse_args(argc, argv, options)) return 2;
    ferrox::test::CudaPluginLibrary plugin;
    if (!plugin.ok()) {
        std::fprintf(stderr, "ferrox_cuda_bench: cannot open %s: %s\n",
                     ferrox::test::cuda_plugin_path().c_str(), plugin.error().c_str());
        return 1;
    }
    ferrox_backend* raw = nullptr;
    ferrox_message message{};
    const ferrox_status status = plugin.create(nullptr, nullptr, 0, &raw, &message);
    if (status == FERROX_ERR_NO_DRIVER || status == FERROX_ERR_NO_DEVICE) {
        std::printf("SKIPPED: no CUDA device (%s)\n", message.text);
        return kExitNoDevice;
    }
    if (status != FERROX_OK) {
        std::fprintf(stderr, "ferrox_cuda_bench: create failed (%d): %s\n", status, message.text);
        return 1;
    }
    const ferrox::test::OwnedBackend backend(raw);
    // The plugin's own name: FERROX_CUDA_PLUGIN may name another plugin (the
    // CPU one runs this tool on a host without a GPU).
    ferrox_plugin_info info{};
    info.struct_size = sizeof(info);
    const char* backend_name =
        plugin.describe(&info) == FERROX_OK && info.name != nullptr ? info.name : "?";
    std::string rows;
    for (const std::string& kind : options.kinds) {
        std::string row;
        std::string error;
        if (!bench_kind(backend.get(), backend_name, options, kind, row, error)) {
            std::fprintf(stderr, "ferrox_cuda_bench: %s\n", error.c_str());
            return 1;
        }
        std::fprintf(stderr, "ferrox_cuda_bench: %s\n", row.c_str());  // progress
        rows += (rows.empty() ? "\n  " : ",\n  ") + row;
    }
    std::printf("{\"weights\": \"%s\", \"reps\": %u, \"results\": [%s\n]}\n",
                options.hot ? "hot" : "cold", options.reps, rows.c_str());
    return 0;
}
