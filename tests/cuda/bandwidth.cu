// ferrox_cuda_bandwidth: device-to-device copy bandwidth of one GPU, the
// yardstick ci/gpu-check.sh divides the MATVEC kernels' weight GB/s by.
//
//   ferrox_cuda_bandwidth [--device N] [--mib M] [--reps R] [--json]
//
// cudaMemcpy D2D of M MiB (default 2048, so far larger than any L2) between
// two device buffers, timed with events, R reps after one warm-up; prints the
// median, p10 and p90. A copy reads M and writes M bytes, so GB/s counts
// 2 x M bytes per copy (1 GB = 1e9 bytes). Exit 0 on success, 77 when there
// is no usable device (the tests' skip code), 1 on any other failure.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int kExitNoDevice = 77;

struct Options {
    int device = 0;
    uint64_t mib = 2048;
    unsigned reps = 20;
    bool json = false;
};

struct CudaFree {
    void operator()(void* pointer) const noexcept { static_cast<void>(cudaFree(pointer)); }
};
using DeviceBuffer = std::unique_ptr<void, CudaFree>;

struct EventDestroy {
    void operator()(cudaEvent_t event) const noexcept {
        static_cast<void>(cudaEventDestroy(event));
    }
};
using OwnedEvent = std::unique_ptr<CUevent_st, EventDestroy>;

// Prints "what: cudaErrorX (text)" and says whether the call succeeded.
bool ok(cudaError_t error, const char* what) {
    if (error == cudaSuccess) return true;
    std::fprintf(stderr, "ferrox_cuda_bandwidth: %s: %s (%s)\n", what, cudaGetErrorName(error),
                 cudaGetErrorString(error));
    return false;
}

bool parse_unsigned(const char* text, uint64_t& out) {
    if (text == nullptr || *text == '\0') return false;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (*end != '\0') return false;
    out = value;
    return true;
}

bool parse_args(int argc, char** argv, Options& options) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
        uint64_t value = 0;
        if (arg == "--json") {
            options.json = true;
            continue;
        }
        if ((arg == "--device" || arg == "--mib" || arg == "--reps") &&
            parse_unsigned(next, value)) {
            if (arg == "--device") options.device = static_cast<int>(value);
            if (arg == "--mib") options.mib = value;
            if (arg == "--reps") options.reps = static_cast<unsigned>(value);
            ++i;
            continue;
        }
        std::fprintf(stderr,
                     "usage: ferrox_cuda_bandwidth [--device N] [--mib M] [--reps R] [--json]\n"
                     "bad or incomplete argument '%s'\n",
                     argv[i]);
        return false;
    }
    return options.mib > 0 && options.reps > 0;
}

double percentile(std::vector<double> values, double p) {
    std::sort(values.begin(), values.end());
    const double index = p * static_cast<double>(values.size() - 1);
    return values[static_cast<size_t>(index + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (!parse_args(argc, argv, options)) return 2;

    int count = 0;
    if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess || count == 0) {
        std::printf("SKIPPED: no CUDA device (%s)\n", error == cudaSuccess
                                                          ? "the driver reports 0 devices"
                                                          : cudaGetErrorString(error));
        return kExitNoDevice;
    }
    if (options.device >= count) {
        std::fprintf(stderr, "ferrox_cuda_bandwidth: device %d requested, %d present\n",
                     options.device, count);
        return 1;
    }
    cudaDeviceProp properties{};
    if (!ok(cudaSetDevice(options.device), "cudaSetDevice") ||
        !ok(cudaGetDeviceProperties(&properties, options.device), "cudaGetDeviceProperties"))
        return 1;

    const uint64_t bytes = options.mib << 20;
    void* raw_source = nullptr;
    void* raw_target = nullptr;
    if (!ok(cudaMalloc(&raw_source, bytes), "cudaMalloc (source)")) return 1;
    const DeviceBuffer source(raw_source);
    if (!ok(cudaMalloc(&raw_target, bytes), "cudaMalloc (target)")) return 1;
    const DeviceBuffer target(raw_target);
    // Non-zero contents, so no layer can shortcut a copy of zeros.
    if (!ok(cudaMemset(source.get(), 0x5A, bytes), "cudaMemset")) return 1;

    cudaEvent_t raw_start = nullptr;
    cudaEvent_t raw_stop = nullptr;
    if (!ok(cudaEventCreate(&raw_start), "cudaEventCreate")) return 1;
    const OwnedEvent start(raw_start);
    if (!ok(cudaEventCreate(&raw_stop), "cudaEventCreate")) return 1;
    const OwnedEvent stop(raw_stop);

    // One warm-up copy (first-touch and clock ramp), then the timed reps.
    if (!ok(cudaMemcpy(target.get(), source.get(), bytes, cudaMemcpyDeviceToDevice),
            "warm-up copy") ||
        !ok(cudaDeviceSynchronize(), "warm-up sync"))
        return 1;
    std::vector<double> gb_per_s;
    for (unsigned rep = 0; rep < options.reps; ++rep) {
        float milliseconds = 0.0f;
        if (!ok(cudaEventRecord(start.get()), "cudaEventRecord") ||
            !ok(cudaMemcpy(target.get(), source.get(), bytes, cudaMemcpyDeviceToDevice),
                "cudaMemcpy D2D") ||
            !ok(cudaEventRecord(stop.get()), "cudaEventRecord") ||
            !ok(cudaEventSynchronize(stop.get()), "cudaEventSynchronize") ||
            !ok(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()),
                "cudaEventElapsedTime"))
            return 1;
        // Read + write: 2 x bytes cross the memory bus per copy.
        gb_per_s.push_back(2.0 * static_cast<double>(bytes) / (milliseconds * 1e-3) / 1e9);
    }
    const double median = percentile(gb_per_s, 0.5);
    const double p10 = percentile(gb_per_s, 0.1);
    const double p90 = percentile(gb_per_s, 0.9);
    if (options.json) {
        std::printf(
            "{\"device\": \"%s\", \"mib\": %llu, \"reps\": %u, \"counted\": \"read+write "
            "(2 x size)\", \"median_gb_per_s\": %.1f, \"p10_gb_per_s\": %.1f, "
            "\"p90_gb_per_s\": %.1f}\n",
            properties.name, static_cast<unsigned long long>(options.mib), options.reps, median,
            p10, p90);
    } else {
        std::printf("device %d: %s\n", options.device, properties.name);
        std::printf("D2D cudaMemcpy of %llu MiB, %u reps, bytes counted read+write (2 x size)\n",
                    static_cast<unsigned long long>(options.mib), options.reps);
        std::printf("copy_gb_per_s median %.1f p10 %.1f p90 %.1f\n", median, p10, p90);
    }
    return 0;
}
