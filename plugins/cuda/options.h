// The CUDA plugin's options, as the YAML file's `options:` map hands them in.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferrox/backend_abi.h"
#include "ferrox/expected.h"

namespace ferrox::cuda {

struct CudaOptions {
    int device = 0;                         // "device": CUDA device ordinal
    std::optional<uint64_t> vram_budget;    // "vram_budget": bytes of weights + buffers; 0 = no cap
    std::vector<std::string> unknown_keys;  // reported as warnings, not errors
};

// The options create() takes, declared to the core through describe() (ABI 1.6),
// which checks a `cuda:` section against them before create() runs.
std::span<const ferrox_option_spec> declared_options();

// Fails on a malformed value, naming the key and the value it could not read.
Expected<CudaOptions> parse_options(std::span<const ferrox_option> options);

}  // namespace ferrox::cuda
