// A parsed, validated GGUF file (versions 2 and 3, little-endian): metadata,
// tensor infos, and tensor bytes borrowed zero-copy from the mapping.
//
// Every structural fact is checked before it is trusted: a truncated, corrupt
// or hostile file yields an Error naming the path, the byte offset and the
// problem, never an out-of-bounds read.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/mapped_file.h"
#include "ferrox/gguf/value.h"

namespace ferrox::gguf {

inline constexpr uint32_t kMaxDims = 4;
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxArrayDepth = 8;  // nested arrays deeper than this are refused

struct KeyValue {
    std::string key;
    Value value;
    uint64_t offset;  // of the key in the file, for messages
};

class FERROX_API Tensor {
  public:
    // `file_offset` + `byte_size` must lie inside mapping->bytes() (the parser checked).
    Tensor(std::string name, ferrox_kind kind, std::span<const uint64_t> shape, uint64_t byte_size,
           uint64_t file_offset, std::shared_ptr<const MappedFile> mapping);

    const std::string& name() const { return name_; }
    ferrox_kind kind() const { return kind_; }
    // ggml order: shape()[0] is the row length (contiguous), shape()[1] the rows, ...
    std::span<const uint64_t> shape() const { return {dims_.data(), n_dims_}; }
    uint64_t row_length() const { return dims_[0]; }
    uint64_t row_count() const { return element_count_ / dims_[0]; }
    uint64_t element_count() const { return element_count_; }
    uint64_t byte_size() const { return byte_size_; }
    uint64_t file_offset() const { return file_offset_; }  // from the start of the file

    // The tensor's bytes inside the mapping; valid while mapping() lives.
    std::span<const std::byte> data() const;
    const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }

  private:
    std::string name_;
    ferrox_kind kind_;
    std::array<uint64_t, kMaxDims> dims_{};
    uint32_t n_dims_;
    uint64_t element_count_;
    uint64_t byte_size_;
    uint64_t file_offset_;
    std::shared_ptr<const MappedFile> mapping_;
};

class FERROX_API File {
  public:
    static Expected<File> open(const std::filesystem::path& path);
    static Expected<File> parse(std::shared_ptr<const MappedFile> mapping);

    const std::filesystem::path& path() const { return mapping_->path(); }
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
    const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }

    // ---- metadata, in file order ----
    const std::vector<KeyValue>& metadata() const { return metadata_; }
    const Value* find(std::string_view key) const;  // nullptr when absent

    // Typed getters: an Error (naming file and key) when the key is missing or
    // holds another type. Integer getters accept any integer type whose value
    // fits; get_f32 accepts FLOAT32 and FLOAT64.
    Expected<uint32_t> get_u32(std::string_view key) const;
    Expected<uint64_t> get_u64(std::string_view key) const;
    Expected<int32_t> get_i32(std::string_view key) const;
    Expected<int64_t> get_i64(std::string_view key) const;
    Expected<float> get_f32(std::string_view key) const;
    Expected<bool> get_bool(std::string_view key) const;
    Expected<std::string> get_string(std::string_view key) const;
    Expected<std::vector<std::string>> get_string_array(std::string_view key) const;
    Expected<std::vector<float>> get_f32_array(std::string_view key) const;
    Expected<std::vector<int32_t>> get_i32_array(std::string_view key) const;
    Expected<std::vector<uint32_t>> get_u32_array(std::string_view key) const;

    // The same, but a missing key yields `fallback` (a wrong type is still an Error).
    Expected<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
    Expected<float> get_f32_or(std::string_view key, float fallback) const;
    Expected<bool> get_bool_or(std::string_view key, bool fallback) const;
    Expected<std::string> get_string_or(std::string_view key, std::string fallback) const;

    // ---- tensors, in file order ----
    const std::vector<Tensor>& tensors() const { return tensors_; }
    const Tensor* find_tensor(std::string_view name) const;  // nullptr when absent

  private:
    File() = default;
    friend class Parser;

    std::shared_ptr<const MappedFile> mapping_;
    uint32_t version_ = 0;
    uint32_t alignment_ = kDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<KeyValue> metadata_;
    std::map<std::string, std::size_t, std::less<>> key_index_;
    std::vector<Tensor> tensors_;
    std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace ferrox::gguf
