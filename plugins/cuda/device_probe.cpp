#include "device_probe.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "kernels.h"
#include "status.h"

namespace ferrox::cuda {
namespace {

constexpr const char* kDriverFloor = "CUDA 13 needs an NVIDIA driver >= 580";

// 12040 -> "12.4", the way cudaDriverGetVersion/CUDART_VERSION encode it.
std::string cuda_version_text(int version) {
    return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

ProbeOutcome failure(ferrox_status status, std::string reason) {
    ProbeOutcome outcome;
    outcome.status = status;
    outcome.reason = std::move(reason);
    return outcome;
}

ProbeOutcome classify_count_error(cudaError_t error, int driver_version) {
    switch (error) {
        case cudaErrorInsufficientDriver:
            // The static cudart reports a missing libcuda.so.1 the same way as
            // an old one; the driver version (0 = none loaded) tells them apart.
            if (driver_version == 0)
                return failure(FERROX_ERR_NO_DRIVER,
                               fmt::format("cuda: no NVIDIA driver found (libcuda.so.1 could not "
                                           "be loaded); {}",
                                           kDriverFloor));
            return failure(FERROX_ERR_NO_DRIVER,
                           fmt::format("cuda: the NVIDIA driver supports CUDA {} but this plugin "
                                       "uses CUDA {}: {}",
                                       cuda_version_text(driver_version),
                                       cuda_version_text(CUDART_VERSION), kDriverFloor));
        case cudaErrorSystemDriverMismatch:
        case cudaErrorCompatNotSupportedOnDevice:
        case cudaErrorSystemNotReady:
            return failure(FERROX_ERR_NO_DRIVER,
                           fmt::format("cuda: the NVIDIA driver cannot be used: {}; {}",
                                       describe_cuda_error(error), kDriverFloor));
        case cudaErrorNoDevice:
        case cudaErrorDevicesUnavailable:
            return failure(
                FERROX_ERR_NO_DEVICE,
                fmt::format("cuda: the NVIDIA driver (CUDA {}) found no usable CUDA "
                            "device: {}",
                            cuda_version_text(driver_version), describe_cuda_error(error)));
        default:
            return failure(FERROX_ERR_INTERNAL, fmt::format("cuda: cudaGetDeviceCount failed: {}",
                                                            describe_cuda_error(error)));
    }
}

}  // namespace

ProbeOutcome probe_device(int ordinal) {
    int driver_version = 0;
    if (cudaDriverGetVersion(&driver_version) != cudaSuccess) driver_version = 0;

    int count = 0;
    if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess)
        return classify_count_error(error, driver_version);
    if (count <= 0)
        return failure(FERROX_ERR_NO_DEVICE, "cuda: the NVIDIA driver reports no CUDA device");
    if (ordinal >= count)
        return failure(FERROX_ERR_NO_DEVICE,
                       fmt::format("cuda: device {} was requested but only {} CUDA device(s) "
                                   "are present (device 0..{})",
                                   ordinal, count, count - 1));

    if (const cudaError_t error = cudaSetDevice(ordinal); error != cudaSuccess)
        return failure(FERROX_ERR_NO_DEVICE, fmt::format("cuda: cannot use device {}: {}", ordinal,
                                                         describe_cuda_error(error)));
    cudaDeviceProp properties{};
    if (const cudaError_t error = cudaGetDeviceProperties(&properties, ordinal);
        error != cudaSuccess)
        return failure(FERROX_ERR_NO_DEVICE, fmt::format("cuda: cannot query device {}: {}",
                                                         ordinal, describe_cuda_error(error)));

    ProbeOutcome outcome;
    outcome.device.ordinal = ordinal;
    outcome.device.name = properties.name;
    outcome.device.compute_major = properties.major;
    outcome.device.compute_minor = properties.minor;
    outcome.device.memory_total = properties.totalGlobalMem;

    // A device newer than every SASS and PTX in the build (or older than the
    // oldest) would fail at the first launch; say so now, as a device state.
    if (const cudaError_t error = check_kernel_image(); error != cudaSuccess)
        return failure(FERROX_ERR_NO_DEVICE,
                       fmt::format("cuda: device {} ({}, sm_{}{}) cannot run this build's kernels "
                                   "(built for FERROX_CUDA_ARCHS={}): {}",
                                   ordinal, outcome.device.name, properties.major, properties.minor,
                                   FERROX_CUDA_ARCHS_TEXT, describe_cuda_error(error)));
    return outcome;
}

}  // namespace ferrox::cuda
