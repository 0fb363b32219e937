// RAII owners of device memory and of host pages registered with the driver.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

namespace ferrox::cuda {

struct CudaFree {
    // A failing free at exit (runtime already unloaded) has nobody to tell.
    void operator()(void* pointer) const noexcept { static_cast<void>(cudaFree(pointer)); }
};
using DeviceAllocation = std::unique_ptr<void, CudaFree>;

struct CudaHostUnregister {
    void operator()(void* pointer) const noexcept {
        static_cast<void>(cudaHostUnregister(pointer));
    }
};
using HostRegistration = std::unique_ptr<void, CudaHostUnregister>;

struct CudaStreamDestroy {
    void operator()(cudaStream_t stream) const noexcept {
        static_cast<void>(cudaStreamDestroy(stream));
    }
};
using OwnedStream = std::unique_ptr<CUstream_st, CudaStreamDestroy>;

// cudaMalloc into an owner; `error` set (and the owner empty) on failure.
inline DeviceAllocation allocate_device(uint64_t bytes, cudaError_t& error) {
    void* pointer = nullptr;
    error = cudaMalloc(&pointer, bytes);
    return DeviceAllocation(error == cudaSuccess ? pointer : nullptr);
}

}  // namespace ferrox::cuda
