// `ferrox bench` sizes, checked before anything is multiplied or allocated:
// every number here comes from the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferrox/backend_abi.h"
#include "ferrox/expected.h"

namespace ferrox::cli {

struct Shape {
    uint64_t rows = 0, cols = 0;
};

inline constexpr uint64_t kMaxBenchDim = uint64_t{1} << 24;   // 16M rows or columns
inline constexpr uint64_t kMaxRotateMib = uint64_t{1} << 20;  // 1 TiB

// "ROWSxCOLS", decimal digits only, each in [1, kMaxBenchDim].
Expected<Shape> parse_shape(const std::string& text);

// What one (kind, shape) case allocates at most: `copies` weight copies (the
// rotation), f32 activations and results for the largest batch, and the
// bandwidth probe's buffer; refused with the arithmetic when it exceeds
// `memory_limit` bytes (0: this machine's physical memory).
struct BenchFootprint {
    uint64_t weight_bytes = 0, copies = 0, total_bytes = 0;
};
Expected<BenchFootprint> bench_footprint(ferrox_kind kind, const Shape& shape,
                                         const std::vector<uint64_t>& batches, bool hot,
                                         uint64_t rotate_mib, uint64_t memory_limit = 0);

}  // namespace ferrox::cli
