// File::parse: the GGUF v2/v3 layout, validated field by field.
//
//   "GGUF" u32 version | u64 tensor_count | u64 kv_count
//   kv_count x  (string key, u32 value type, value)
//   tensor_count x (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset)
//   padding to general.alignment, then the data section; tensor offsets are
//   relative to its start.
#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "ferrox/gguf/file.h"
#include "ferrox/quant_kind.h"
#include "gguf/byte_reader.h"

namespace ferrox::gguf {
namespace {

constexpr std::array<std::byte, 4> kMagic{std::byte{'G'}, std::byte{'G'}, std::byte{'U'},
                                          std::byte{'F'}};
constexpr uint64_t kTensorCountOffset = 8;
constexpr uint64_t kKvCountOffset = 16;
// Smallest possible encodings, used to refuse counts the file cannot hold
// before anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // empty key, type, a u8
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;                      // empty name, n_dims, 1 dim, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;  // element type, count
constexpr uint64_t kMinStringBytes = 8;     // length
// Above this many elements ferrox::row_bytes (at most 4 bytes per element)
// could overflow uint64; no real tensor comes near it.
constexpr uint64_t kMaxElements = uint64_t{1} << 60;
// A std::map node beside its key: three pointers, a colour, the key's
// std::string and the mapped index, rounded up for the allocator.
constexpr uint64_t kIndexNodeBytes = 96;

uint64_t min_encoded_size(ValueType type) {
    if (type == ValueType::String) return kMinStringBytes;
    if (type == ValueType::Array) return kMinArrayBytes;
    return scalar_size(type);
}

bool is_power_of_two(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

class Parser {
  public:
    explicit Parser(std::shared_ptr<const MappedFile> mapping)
        : reader_(mapping->bytes(), mapping->path().string()) {
        file_.mapping_ = std::move(mapping);
    }

    Expected<File> run() {
        if (auto ok = header(); !ok) return ok.error();
        for (uint64_t i = 0; i < kv_count_; ++i)
            if (auto ok = key_value(i); !ok) return ok.error();
        if (auto ok = alignment(); !ok) return ok.error();
        for (uint64_t i = 0; i < tensor_count_; ++i)
            if (auto ok = tensor_info(i); !ok) return ok.error();
        if (auto ok = place_tensors(); !ok) return ok.error();
        return std::move(file_);
    }

  private:
    // What the parser learned about one tensor before the data section is known.
    struct PendingTensor {
        std::string name;
        ferrox_kind kind;
        std::array<uint64_t, kMaxDims> dims{};
        uint32_t n_dims;
        uint64_t byte_size;
        uint64_t relative_offset;
        uint64_t offset_field_at;  // where the offset was read, for messages
    };

    Error error_at(uint64_t offset, std::string_view problem) const {
        return reader_.error_at(offset, problem);
    }

    // Counts what the parsed header will hold in memory (keys, values, nested
    // arrays, string starts, tensor records, their index nodes) before it is
    // allocated: an entry costs ~15x its smallest encoding, so without a
    // budget a million empty arrays (a 12 MB file) took 187 MiB, a million
    // one-byte keys (21 MB) 317 MiB; Gemma 3 270M's header is charged 1.1 MiB.
    Expected<void> charge(uint64_t bytes, uint64_t at, std::string_view what) {
        if (bytes <= kMetadataBudget - parsed_bytes_) {
            parsed_bytes_ += bytes;
            return {};
        }
        return error_at(at, fmt::format("{} would take the parsed header past {} MiB of memory "
                                        "(the metadata budget; a real model's takes a few MiB)",
                                        what, kMetadataBudget >> 20));
    }

    Expected<void> header() {
        auto magic = reader_.take(kMagic.size(), "the magic");
        if (!magic) return magic.error();
        if (!std::equal(magic->begin(), magic->end(), kMagic.begin()))
            return error_at(0, fmt::format("not a GGUF file: magic bytes are {:02x} {:02x} {:02x} "
                                           "{:02x}, expected 47 47 55 46 (\"GGUF\")",
                                           (*magic)[0], (*magic)[1], (*magic)[2], (*magic)[3]));
        const uint64_t version_at = reader_.offset();
        auto version = reader_.read<uint32_t>("the version");
        if (!version) return version.error();
        if (*version == 1)
            return error_at(version_at,
                            "GGUF version 1 is not supported (only versions 2 and 3); re-convert "
                            "the model with a current converter");
        if (*version != 2 && *version != 3) {
            const uint32_t swapped = __builtin_bswap32(*version);
            if (swapped == 2 || swapped == 3)
                return error_at(version_at, fmt::format("big-endian GGUF (version field reads "
                                                        "{:#x}); only little-endian is supported",
                                                        *version));
            return error_at(version_at, fmt::format("unsupported GGUF version {}; this reader "
                                                    "handles versions 2 and 3",
                                                    *version));
        }
        file_.version_ = *version;

        auto tensor_count = reader_.read<uint64_t>("the tensor count");
        if (!tensor_count) return tensor_count.error();
        auto kv_count = reader_.read<uint64_t>("the metadata count");
        if (!kv_count) return kv_count.error();
        const uint64_t left = reader_.remaining();
        if (*tensor_count > left / kMinTensorInfoBytes)
            return error_at(kTensorCountOffset,
                            fmt::format("tensor count {} cannot fit in the {} bytes left (each "
                                        "tensor info takes at least {})",
                                        *tensor_count, left, kMinTensorInfoBytes));
        if (*kv_count > left / kMinKvBytes)
            return error_at(kKvCountOffset,
                            fmt::format("metadata count {} cannot fit in the {} bytes left (each "
                                        "entry takes at least {})",
                                        *kv_count, left, kMinKvBytes));
        // Both are now <= left, so neither product nor the sum can overflow.
        if (*tensor_count * kMinTensorInfoBytes + *kv_count * kMinKvBytes > left)
            return error_at(kKvCountOffset,
                            fmt::format("{} metadata entries and {} tensor infos cannot fit in "
                                        "the {} bytes left",
                                        *kv_count, *tensor_count, left));
        tensor_count_ = *tensor_count;
        kv_count_ = *kv_count;
        return {};
    }

    Expected<void> key_value(uint64_t index) {
        const uint64_t key_at = reader_.offset();
        auto key = reader_.read_string(fmt::format("the key of metadata entry #{}", index));
        if (!key) return key.error();
        if (auto ok = charge(sizeof(KeyValue) + kIndexNodeBytes + 2 * key->size(), key_at,
                             fmt::format("metadata entry #{} ('{}')", index, *key));
            !ok)
            return ok.error();
        if (file_.key_index_.count(*key))
            return error_at(key_at, fmt::format("duplicate metadata key '{}'", *key));
        auto type = value_type(fmt::format("the value type of key '{}'", *key));
        if (!type) return type.error();
        const uint64_t value_at = reader_.offset();
        auto value = read_value(*type, *key, 0);
        if (!value) return value.error();
        if (*key == "general.alignment") alignment_value_at_ = value_at;
        file_.key_index_.emplace(*key, file_.metadata_.size());
        file_.metadata_.push_back(KeyValue{std::move(*key), std::move(*value), key_at});
        return {};
    }

    Expected<ValueType> value_type(std::string_view what) {
        const uint64_t at = reader_.offset();
        auto id = reader_.read<uint32_t>(what);
        if (!id) return id.error();
        if (*id >= kValueTypeCount)
            return error_at(at, fmt::format("unknown metadata value type {} ({})", *id, what));
        return static_cast<ValueType>(*id);
    }

    template <class T>
    Expected<Value> scalar(std::string_view key) {
        auto value = reader_.read<T>(fmt::format("the value of key '{}'", key));
        if (!value) return value.error();
        return Value(*value);
    }

    Expected<Value> read_value(ValueType type, std::string_view key, uint32_t depth) {
        switch (type) {
            case ValueType::UInt8:
                return scalar<uint8_t>(key);
            case ValueType::Int8:
                return scalar<int8_t>(key);
            case ValueType::UInt16:
                return scalar<uint16_t>(key);
            case ValueType::Int16:
                return scalar<int16_t>(key);
            case ValueType::UInt32:
                return scalar<uint32_t>(key);
            case ValueType::Int32:
                return scalar<int32_t>(key);
            case ValueType::Float32:
                return scalar<float>(key);
            case ValueType::UInt64:
                return scalar<uint64_t>(key);
            case ValueType::Int64:
                return scalar<int64_t>(key);
            case ValueType::Float64:
                return scalar<double>(key);
            case ValueType::Bool: {
                const uint64_t at = reader_.offset();
                auto byte = reader_.read<uint8_t>(fmt::format("the value of key '{}'", key));
                if (!byte) return byte.error();
                if (*byte > 1)
                    return error_at(at, fmt::format("bool value {} of key '{}' is neither 0 nor 1",
                                                    *byte, key));
                return Value(*byte == 1);
            }
            case ValueType::String: {
                const uint64_t at = reader_.offset();
                auto text = reader_.read_string(fmt::format("the string value of key '{}'", key));
                if (!text) return text.error();
                if (auto ok = charge(text->size(), at, fmt::format("the string of key '{}'", key));
                    !ok)
                    return ok.error();
                return Value(std::move(*text));
            }
            case ValueType::Array: {
                auto array = read_array(key, depth + 1);
                if (!array) return array.error();
                return Value(std::move(*array));
            }
        }
        return error_at(reader_.offset(), "unreachable value type");
    }

    // The body of an array (element type, count, elements) at nesting `depth` (1 = top).
    Expected<Array> read_array(std::string_view key, uint32_t depth) {
        const uint64_t at = reader_.offset();
        if (depth > kMaxArrayDepth)
            return error_at(at, fmt::format("arrays of key '{}' are nested deeper than {} levels",
                                            key, kMaxArrayDepth));
        auto element = value_type(fmt::format("the array element type of key '{}'", key));
        if (!element) return element.error();
        const uint64_t count_at = reader_.offset();
        auto count = reader_.read<uint64_t>(fmt::format("the array length of key '{}'", key));
        if (!count) return count.error();
        const uint64_t min_size = min_encoded_size(*element);
        if (*count > reader_.remaining() / min_size)
            return error_at(
                count_at, fmt::format("array of key '{}' claims {} {} elements, which cannot fit "
                                      "in the {} bytes left",
                                      key, *count, value_type_name(*element), reader_.remaining()));

        if (*element == ValueType::String) {
            // In place: each string checked and its start noted, nothing copied.
            if (auto ok = charge(*count * sizeof(uint32_t), count_at,
                                 fmt::format("the {} string starts of key '{}'", *count, key));
                !ok)
                return ok.error();
            const uint64_t region_at = reader_.offset();
            std::vector<uint32_t> starts;
            starts.reserve(*count);
            // Named once, not per element (the error gives the offset).
            const std::string what = fmt::format("a string in the array of key '{}'", key);
            for (uint64_t i = 0; i < *count; ++i) {
                auto text = reader_.read_string_view(what);
                if (!text) return text.error();
                const uint64_t start = reader_.offset() - text->size() - region_at;
                if (reader_.offset() - region_at > std::numeric_limits<uint32_t>::max())
                    return error_at(
                        region_at,
                        fmt::format("the strings of key '{}' take more than 4 GiB", key));
                starts.push_back(static_cast<uint32_t>(start));
            }
            const auto all = file_.mapping_->bytes();
            return Array::of_mapped_strings(all.subspan(region_at, reader_.offset() - region_at),
                                            std::move(starts), file_.mapping_);
        }
        if (*element == ValueType::Array) {
            if (auto ok = charge(*count * sizeof(Array), count_at,
                                 fmt::format("the {} nested arrays of key '{}'", *count, key));
                !ok)
                return ok.error();
            std::vector<Array> arrays;
            arrays.reserve(*count);
            for (uint64_t i = 0; i < *count; ++i) {
                auto inner = read_array(key, depth + 1);
                if (!inner) return inner.error();
                arrays.push_back(std::move(*inner));
            }
            return Array::of_arrays(std::move(arrays));
        }
        const uint64_t elements_at = reader_.offset();
        auto packed = reader_.take(*count * min_size, fmt::format("the elements of key '{}'", key));
        if (!packed) return packed.error();
        if (*element == ValueType::Bool) {
            for (uint64_t i = 0; i < *count; ++i)
                if (std::to_integer<uint8_t>((*packed)[i]) > 1)
                    return error_at(
                        elements_at + i,
                        fmt::format("bool element #{} of key '{}' is neither 0 nor 1", i, key));
        }
        return Array::of_mapped_scalars(*element, *count, *packed, file_.mapping_);
    }

    Expected<void> alignment() {
        const Value* value = file_.find("general.alignment");
        if (!value) return {};
        const auto* alignment = std::get_if<uint32_t>(value);
        if (!alignment)
            return error_at(alignment_value_at_,
                            fmt::format("general.alignment has type {}, expected UINT32",
                                        value_type_name(type_of(*value))));
        if (!is_power_of_two(*alignment))
            return error_at(alignment_value_at_,
                            fmt::format("general.alignment {} is not a power of two", *alignment));
        file_.alignment_ = *alignment;
        return {};
    }

    Expected<void> tensor_info(uint64_t index) {
        const uint64_t info_at = reader_.offset();
        PendingTensor t{};
        auto name = reader_.read_string(fmt::format("the name of tensor #{}", index));
        if (!name) return name.error();
        t.name = std::move(*name);
        // The pending record, the Tensor, the name twice more (set, index) and two index nodes.
        if (auto ok = charge(
                sizeof(PendingTensor) + sizeof(Tensor) + 2 * kIndexNodeBytes + 3 * t.name.size(),
                info_at, fmt::format("tensor info #{} ('{}')", index, t.name));
            !ok)
            return ok.error();
        if (!seen_names_.insert(t.name).second)
            return error_at(info_at, fmt::format("duplicate tensor name '{}'", t.name));

        const uint64_t n_dims_at = reader_.offset();
        auto n_dims = reader_.read<uint32_t>(fmt::format("the rank of tensor '{}'", t.name));
        if (!n_dims) return n_dims.error();
        if (*n_dims == 0 || *n_dims > kMaxDims)
            return error_at(n_dims_at, fmt::format("tensor '{}' has {} dimensions; GGUF allows 1 "
                                                   "to {}",
                                                   t.name, *n_dims, kMaxDims));
        t.n_dims = *n_dims;

        const uint64_t dims_at = reader_.offset();
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const uint64_t dim_at = reader_.offset();
            auto dim =
                reader_.read<uint64_t>(fmt::format("dimension {} of tensor '{}'", d, t.name));
            if (!dim) return dim.error();
            if (*dim == 0)
                return error_at(dim_at, fmt::format("tensor '{}' dimension {} is 0", t.name, d));
            if (!checked_mul(elements, *dim, elements) || elements > kMaxElements)
                return error_at(dim_at, fmt::format("tensor '{}' element count overflows at "
                                                    "dimension {} ({})",
                                                    t.name, d, *dim));
            t.dims[d] = *dim;
        }

        const uint64_t type_at = reader_.offset();
        auto type = reader_.read<uint32_t>(fmt::format("the type of tensor '{}'", t.name));
        if (!type) return type.error();
        const KindTraits* traits = kind_traits(*type);
        if (!traits)
            return error_at(type_at,
                            fmt::format("tensor '{}' has unknown ggml type id {}", t.name, *type));
        t.kind = traits->id;
        const auto row = row_bytes(t.kind, t.dims[0]);
        if (!row)
            return error_at(dims_at,
                            fmt::format("tensor '{}' row length {} is not a multiple of "
                                        "the {} block size {}",
                                        t.name, t.dims[0], traits->name, traits->block_elements));
        // elements <= 2^60 and rows * row <= elements * 4, so this cannot overflow.
        if (!checked_mul(*row, elements / t.dims[0], t.byte_size))
            return error_at(dims_at, fmt::format("tensor '{}' byte size overflows", t.name));

        t.offset_field_at = reader_.offset();
        auto offset = reader_.read<uint64_t>(fmt::format("the data offset of tensor '{}'", t.name));
        if (!offset) return offset.error();
        if (*offset % file_.alignment_ != 0)
            return error_at(t.offset_field_at,
                            fmt::format("tensor '{}' data offset {} is not a multiple of the "
                                        "alignment {}",
                                        t.name, *offset, file_.alignment_));
        t.relative_offset = *offset;
        pending_.push_back(std::move(t));
        return {};
    }

    // The data section starts at the next alignment boundary after the infos;
    // every tensor must lie inside the file and no two may share a byte.
    Expected<void> place_tensors() {
        const uint64_t end_of_infos = reader_.offset();
        uint64_t data_start = 0;
        if (!checked_add(end_of_infos, file_.alignment_ - 1, data_start))
            return error_at(end_of_infos, "data section start overflows");
        data_start -= data_start % file_.alignment_;
        file_.data_offset_ = data_start;

        const uint64_t file_size = reader_.size();
        std::vector<uint64_t> starts(pending_.size());
        for (std::size_t i = 0; i < pending_.size(); ++i) {
            const PendingTensor& t = pending_[i];
            uint64_t end = 0;
            if (!checked_add(data_start, t.relative_offset, starts[i]) ||
                !checked_add(starts[i], t.byte_size, end) || end > file_size)
                return error_at(
                    t.offset_field_at,
                    fmt::format("tensor '{}' data (offset {} + {} bytes from the data "
                                "section at {}) runs past the end of the file ({} "
                                "bytes)",
                                t.name, t.relative_offset, t.byte_size, data_start, file_size));
        }

        std::vector<std::size_t> order(pending_.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::sort(order.begin(), order.end(),
                  [&](std::size_t a, std::size_t b) { return starts[a] < starts[b]; });
        for (std::size_t k = 1; k < order.size(); ++k) {
            const PendingTensor& before = pending_[order[k - 1]];
            const PendingTensor& after = pending_[order[k]];
            if (starts[order[k - 1]] + before.byte_size > starts[order[k]])
                return error_at(
                    after.offset_field_at,
                    fmt::format("tensor '{}' data [{}, {}) overlaps tensor '{}' data "
                                "[{}, {})",
                                after.name, starts[order[k]], starts[order[k]] + after.byte_size,
                                before.name, starts[order[k - 1]],
                                starts[order[k - 1]] + before.byte_size));
        }

        file_.tensors_.reserve(pending_.size());
        for (std::size_t i = 0; i < pending_.size(); ++i) {
            PendingTensor& t = pending_[i];
            file_.tensor_index_.emplace(t.name, i);
            file_.tensors_.emplace_back(std::move(t.name), t.kind,
                                        std::span<const uint64_t>(t.dims.data(), t.n_dims),
                                        t.byte_size, starts[i], file_.mapping_);
        }
        return {};
    }

    ByteReader reader_;
    File file_;
    uint64_t tensor_count_ = 0;
    uint64_t kv_count_ = 0;
    uint64_t alignment_value_at_ = 0;
    uint64_t parsed_bytes_ = 0;  // charged against kMetadataBudget
    std::vector<PendingTensor> pending_;
    std::set<std::string, std::less<>> seen_names_;
};

Expected<File> File::parse(std::shared_ptr<const MappedFile> mapping) {
    if (!mapping) return Error("gguf: File::parse was given no mapping");
    auto file = Parser(mapping).run();
    if (!file) return file;
    uint64_t bytes = 0;
    for (const Tensor& t : file->tensors_) bytes += t.byte_size();
    file->shards_.push_back({mapping->path(), mapping, file->tensors_.size(), bytes});
    return file;
}

Expected<File> File::open(const std::filesystem::path& path) {
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.error();
    auto file = parse(std::make_shared<const MappedFile>(std::move(*mapped)));
    if (!file) return file;
    return open_other_shards(std::move(*file));
}

}  // namespace ferrox::gguf
