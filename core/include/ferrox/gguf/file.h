// A parsed, validated GGUF file (versions 2 and 3, little-endian): metadata,
// tensor infos, and tensor bytes borrowed zero-copy from the mapping.
//
// A model split into shards ("name-00001-of-00003.gguf", keys split.no,
// split.count, split.tensors.count, as llama.cpp's gguf-split writes them) is
// one File too: opening the first shard maps all of them, checks that the set
// is complete and belongs together, and lists every shard's tensors, each
// borrowing its own shard's mapping. Metadata is the first shard's.
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
// The memory a parsed header may take (keys, values, nested arrays, string
// starts, tensor records and their indexes); array elements are read in place
// and cost nothing. Gemma 3 270M's header (262K tokens) is charged 1.1 MiB;
// before, a million empty arrays in a 12 MB file took 187 MiB.
inline constexpr uint64_t kMetadataBudget = uint64_t{64} << 20;

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

// One file of a model: the file itself, or one shard of a split model.
struct Shard {
    std::filesystem::path path;
    std::shared_ptr<const MappedFile> mapping;
    uint64_t tensor_count = 0;
    uint64_t tensor_bytes = 0;  // the bytes of the tensors stored in this shard
};

class FERROX_API File {
  public:
    // A split model's first shard opens every shard (see above); opening any
    // other shard is an error naming the first one.
    static Expected<File> open(const std::filesystem::path& path);
    // One file's bytes, never its sibling shards (for in-memory files and the fuzzer).
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

    // ---- tensors, in file order (shard by shard) ----
    const std::vector<Tensor>& tensors() const { return tensors_; }
    const Tensor* find_tensor(std::string_view name) const;  // nullptr when absent

    // ---- the files behind it: one, or every shard in split.no order ----
    const std::vector<Shard>& shards() const { return shards_; }
    bool is_split() const { return shards_.size() > 1; }
    uint64_t mapped_bytes() const;  // every shard's whole file

    // Once a model and its tokenizer are built from the metadata, the pages
    // before the tensor data (keys, arrays, tensor infos; a split model's
    // other shards hold no vocabulary) are not read again: this lets the
    // process's memory drop them (MappedFile::release_pages). Reading a
    // value afterwards still works.
    void release_header_pages() const;

  private:
    File() = default;
    friend class Parser;
    // `first` is a parsed file; when it is a split model's first shard, the
    // other shards are opened, checked and their tensors added (split.cpp).
    static Expected<File> open_other_shards(File first);

    std::shared_ptr<const MappedFile> mapping_;
    uint32_t version_ = 0;
    uint32_t alignment_ = kDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<KeyValue> metadata_;
    std::map<std::string, std::size_t, std::less<>> key_index_;
    std::vector<Tensor> tensors_;
    std::map<std::string, std::size_t, std::less<>> tensor_index_;
    std::vector<Shard> shards_;
};

}  // namespace ferrox::gguf
