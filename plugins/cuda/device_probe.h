// Finding the device a backend will run on, or the typed reason there is none.
// This is the only place the plugin first touches the CUDA runtime, and so the
// only place the driver library (libcuda.so.1) is opened, by the static cudart.
#pragma once

#include <cstdint>
#include <string>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda {

struct DeviceDescription {
    int ordinal = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    uint64_t memory_total = 0;
};

struct ProbeOutcome {
    // FERROX_OK, or FERROX_ERR_NO_DRIVER / FERROX_ERR_NO_DEVICE / FERROX_ERR_INTERNAL.
    ferrox_status status = FERROX_OK;
    std::string reason;        // why, when status != FERROX_OK
    DeviceDescription device;  // valid when status == FERROX_OK
};

// Never crashes and never throws a CUDA error at the caller: a host without a
// driver, with a driver too old for CUDA 13, or without a usable device gets a
// status and a sentence an operator can act on. Leaves `ordinal` current.
ProbeOutcome probe_device(int ordinal);

}  // namespace ferrox::cuda
