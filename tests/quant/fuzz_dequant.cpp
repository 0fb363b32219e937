// libFuzzer target: arbitrary bytes through every kind's decoder.
// Input: byte 0 picks the kind (index into kAllKinds), byte 1 the number of
// blocks (at most 16, and no more than the remaining bytes hold), byte 2
// whether to also ask for a ragged n; the rest are the blocks. The blocks
// are copied into an exact-size buffer so ASan sees any read past the row.
// Checks: no crash/UB, dequantize_row accepts whole blocks and refuses a
// ragged n, and dot_row equals the documented dequantize-then-sum.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"

namespace {

void check(bool condition) {
    if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 3) return 0;
    const ferrox::KindTraits& kind = ferrox::kAllKinds[data[0] % ferrox::kAllKinds.size()];
    const bool ragged = (data[2] & 1) != 0;
    const size_t available = (size - 3) / kind.block_bytes;
    const size_t blocks = std::min(static_cast<size_t>(data[1] % 17u), available);
    const uint64_t n = uint64_t{blocks} * kind.block_elements;

    const std::vector<uint8_t> row(data + 3, data + 3 + blocks * kind.block_bytes);
    std::vector<float> out(n);
    check(ferrox::quant::dequantize_row(kind.id, row.data(), out.data(), n));

    // x is a fixed, non-trivial vector so the dot product mixes every weight.
    std::vector<float> x(n);
    for (uint64_t i = 0; i < n; ++i) x[i] = 1.0f - 0.03125f * static_cast<float>(i % 64);
    double expected = 0;
    for (uint64_t i = 0; i < n; ++i) expected += static_cast<double>(out[i] * x[i]);
    const float dot = ferrox::quant::dot_row(kind.id, row.data(), x.data(), n);
    check(std::isnan(expected) ? std::isnan(dot) : dot == static_cast<float>(expected));

    if (ragged && kind.block_elements > 1) {
        std::vector<float> untouched(n + 1, 3.0f);
        check(!ferrox::quant::dequantize_row(kind.id, row.data(), untouched.data(), n + 1));
        for (const float v : untouched) check(v == 3.0f);
    }
    return 0;
}
