// The host-side face of the CUDA kernels (kernels.cu): device pointers in,
// a cudaError_t out. Included by the g++-compiled ABI glue and by nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda {

// A weight matrix already resident on the device, in its GGUF block layout.
struct DeviceWeightView {
    ferrox_kind kind;
    const uint8_t* data;  // rows * row_bytes device bytes
    uint64_t rows;
    uint64_t cols;
    uint64_t row_bytes;
};

// y[rows] = W x[cols]; x and y are device pointers. cudaErrorNotSupported when
// the capability table lists no MATVEC kernel for the weight's kind.
cudaError_t launch_matvec(const DeviceWeightView& weight, const float* x, float* y,
                          cudaStream_t stream);

// Y[n][rows] = X[n][cols] W^T with the tiled GEMM kernel; cudaErrorNotSupported
// when the capability table lists no GEMM kernel for the weight's kind.
cudaError_t launch_gemm(const DeviceWeightView& weight, const float* x, uint64_t n, float* y,
                        cudaStream_t stream);

// cudaSuccess when this build carries code the current device can run (SASS
// for its architecture or PTX it can JIT); otherwise the runtime's reason.
cudaError_t check_kernel_image();

}  // namespace ferrox::cuda
