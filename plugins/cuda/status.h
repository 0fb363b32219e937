// Status: what every backend operation returns before the ABI layer turns it
// into a ferrox_status plus a message. Also the one mapping of cudaError_t.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda {

struct [[nodiscard]] Status {
    ferrox_status code = FERROX_OK;
    std::string message;

    static Status ok() { return {}; }
    static Status fail(ferrox_status code, std::string message) {
        return {code, std::move(message)};
    }
    bool is_ok() const { return code == FERROX_OK; }
};

// "cudaErrorMemoryAllocation (out of memory)": name and text, for messages.
inline std::string describe_cuda_error(cudaError_t error) {
    return fmt::format("{} ({})", cudaGetErrorName(error), cudaGetErrorString(error));
}

// Maps a failed runtime call to a typed status; `what` names the operation.
// Also clears the thread's last error: a non-sticky one (a failed cudaMalloc)
// would otherwise be returned by the next launch's cudaGetLastError and fail
// that healthy launch. A sticky one (a kernel fault) is not cleared by this.
inline Status cuda_failure(cudaError_t error, std::string_view what) {
    static_cast<void>(cudaGetLastError());
    ferrox_status code = FERROX_ERR_INTERNAL;
    if (error == cudaErrorMemoryAllocation) code = FERROX_ERR_OUT_OF_MEMORY;
    if (error == cudaErrorNotSupported) code = FERROX_ERR_UNSUPPORTED;
    return Status::fail(code, fmt::format("cuda: {}: {}", what, describe_cuda_error(error)));
}

}  // namespace ferrox::cuda
