// The VRAM capacity plan: may one more weight or buffer be placed on the
// device? Pure arithmetic (no CUDA call), so it is tested on any host; the
// backend feeds it cudaMemGetInfo's numbers and its own resident total.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferrox::cuda {

struct DeviceMemory {
    uint64_t free_bytes = 0;  // cudaMemGetInfo, at the moment of the request
    uint64_t total_bytes = 0;
};

struct PlacementRequest {
    std::string_view what;        // "a 8192 x 28672 Q4_K weight", "a buffer"
    uint64_t bytes = 0;           // what it needs
    uint64_t resident_bytes = 0;  // weights + buffers this backend already holds
    uint64_t vram_budget = 0;     // the option; 0 = no cap but free memory
};

// nullopt when the request fits both the budget and the free memory; else
// the refusal, with the arithmetic, e.g.
//   cuda: cannot place a 8192 x 28672 Q4_K weight (132.1 MiB): 79.2 GiB used
//   + 132.1 MiB > vram_budget 80.0 GiB (free 139.5 GiB of 140.4 GiB)
std::optional<std::string> refuse_placement(const PlacementRequest& request,
                                            const DeviceMemory& memory);

// "512 B", "1.5 KiB", "132.1 MiB", "80.0 GiB": binary units, one decimal.
std::string format_bytes(uint64_t bytes);

}  // namespace ferrox::cuda
