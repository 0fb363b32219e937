#include "vector_files.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ferrox::quant::testing {
namespace {

uint32_t u32_at(const std::vector<uint8_t>& bytes, size_t offset) {
    uint32_t value;
    std::memcpy(&value, bytes.data() + offset, sizeof value);
    return value;
}

VectorFile read_vectors(const std::filesystem::path& path, const char* magic, bool floats_first) {
    const std::vector<uint8_t> bytes = read_file(path);
    INFO("vector file " << path.string());
    constexpr size_t kHeader = 24;
    REQUIRE(bytes.size() >= kHeader);
    REQUIRE(std::memcmp(bytes.data(), magic, 4) == 0);
    REQUIRE(u32_at(bytes, 4) == 1);  // format version
    VectorFile file;
    file.kind_id = u32_at(bytes, 8);
    file.block_elements = u32_at(bytes, 12);
    file.block_bytes = u32_at(bytes, 16);
    file.n_blocks = u32_at(bytes, 20);
    const size_t block_part = size_t{file.n_blocks} * file.block_bytes;
    const size_t float_part = file.elements() * sizeof(float);
    REQUIRE(bytes.size() == kHeader + block_part + float_part);
    const uint8_t* blocks = bytes.data() + kHeader + (floats_first ? float_part : 0);
    const uint8_t* floats = bytes.data() + kHeader + (floats_first ? 0 : block_part);
    file.blocks.assign(blocks, blocks + block_part);
    file.floats.resize(file.elements());
    std::memcpy(file.floats.data(), floats, float_part);
    return file;
}

}  // namespace

std::filesystem::path quant_data_dir() {
    return std::filesystem::path(FERROX_TEST_DATA_DIR) / "quant";
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    INFO("reading " << path.string());
    REQUIRE(in.good());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json read_manifest() {
    const std::vector<uint8_t> bytes = read_file(quant_data_dir() / "manifest.json");
    return nlohmann::json::parse(bytes.begin(), bytes.end());
}

VectorFile read_dequantize_vectors(const std::string& kind_name) {
    return read_vectors(quant_data_dir() / (kind_name + ".bin"), "FXQV", false);
}

VectorFile read_quantize_vectors(const std::string& kind_name) {
    return read_vectors(quant_data_dir() / ("quantize_" + kind_name + ".bin"), "FXQQ", true);
}

bool same_float(float expected, float actual) {
    if (std::isnan(expected)) return std::isnan(actual);
    return std::bit_cast<uint32_t>(expected) == std::bit_cast<uint32_t>(actual);
}

}  // namespace ferrox::quant::testing
