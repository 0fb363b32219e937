// Shared helpers for the GGUF reader tests: fixture paths, sidecars written by
// make_fixtures.py (the independent `gguf` package), and in-memory parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "ferrox/gguf/file.h"

namespace gguf_test {

inline std::filesystem::path fixture_dir() {
    return std::filesystem::path(FERROX_TEST_DATA_DIR) / "gguf";
}

inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(chars.size());
    for (std::size_t i = 0; i < chars.size(); ++i) bytes[i] = static_cast<std::byte>(chars[i]);
    return bytes;
}

inline nlohmann::json sidecar(const std::string& fixture) {
    std::ifstream in(fixture_dir() / (fixture + ".json"));
    return nlohmann::json::parse(in);
}

// FNV-1a 64, the checksum make_fixtures.py records per tensor.
inline std::string fnv1a64(std::span<const std::byte> bytes) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (std::byte b : bytes) {
        h ^= std::to_integer<uint64_t>(b);
        h *= 0x100000001B3ull;
    }
    return fmt::format("{:016x}", h);
}

inline ferrox::Expected<ferrox::gguf::File> parse_bytes(std::span<const std::byte> bytes,
                                                        const std::string& label) {
    return ferrox::gguf::File::parse(std::make_shared<const ferrox::gguf::MappedFile>(
        ferrox::gguf::MappedFile::copy_of(bytes, label)));
}

template <class T>
void put_le(std::vector<std::byte>& bytes, uint64_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace gguf_test
