// Readers for the golden files that tests/quant/gen_vectors.py writes into
// tests/data/quant/ (format described there).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ferrox::quant::testing {

std::filesystem::path quant_data_dir();

// The whole file, or a Catch2 failure naming the path.
std::vector<uint8_t> read_file(const std::filesystem::path& path);

nlohmann::json read_manifest();

struct VectorFile {
    uint32_t kind_id = 0;
    uint32_t block_elements = 0;
    uint32_t block_bytes = 0;
    uint32_t n_blocks = 0;
    std::vector<uint8_t> blocks;  // n_blocks * block_bytes
    std::vector<float> floats;    // n_blocks * block_elements
    uint64_t elements() const { return uint64_t{n_blocks} * block_elements; }
};

// "<KIND>.bin" (magic FXQV: blocks then expected floats) or
// "quantize_<KIND>.bin" (magic FXQQ: input floats then expected blocks).
VectorFile read_dequantize_vectors(const std::string& kind_name);
VectorFile read_quantize_vectors(const std::string& kind_name);

// NaN matches any NaN; everything else must match to the bit (so -0 != +0).
bool same_float(float expected, float actual);

}  // namespace ferrox::quant::testing
