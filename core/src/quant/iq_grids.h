// The i-quant codebooks: each grid row holds 4 or 8 small values packed one
// per byte (element j in byte j). Facts of the GGUF format.
#pragma once

#include <array>
#include <cstdint>

namespace ferrox::quant::grids {

extern const std::array<uint64_t, 256> kIq2xxsGrid;
extern const std::array<uint64_t, 512> kIq2xsGrid;
extern const std::array<uint64_t, 1024> kIq2sGrid;
extern const std::array<uint32_t, 256> kIq3xxsGrid;
extern const std::array<uint32_t, 512> kIq3sGrid;
extern const std::array<uint64_t, 2048> kIq1sGrid;  // int8 values; shared by IQ1_M

// Element j of a packed grid row, as the unsigned byte.
constexpr uint8_t grid_byte(uint64_t row, unsigned j) {
    return static_cast<uint8_t>(row >> (8 * j));
}

}  // namespace ferrox::quant::grids
