// GGUF metadata values: the 13 value types of the format, arrays included
// (arrays of arrays too). A Value's variant index equals its GGUF type id.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "ferrox/api.h"

namespace ferrox::gguf {

enum class ValueType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

inline constexpr uint32_t kValueTypeCount = 13;

// "UINT32", "STRING", ... as the GGUF spec spells them; "?" for an unknown id.
FERROX_API std::string_view value_type_name(ValueType type);

// Encoded size of one scalar element; 0 for String and Array.
FERROX_API uint32_t scalar_size(ValueType type);

class Array;

// Alternatives in GGUF type-id order, so index() == static_cast<size_t>(type).
using Value = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                           std::string, Array, uint64_t, int64_t, double>;

template <class T>
constexpr std::optional<ValueType> value_type_of() {
    if constexpr (std::is_same_v<T, uint8_t>)
        return ValueType::UInt8;
    else if constexpr (std::is_same_v<T, int8_t>)
        return ValueType::Int8;
    else if constexpr (std::is_same_v<T, uint16_t>)
        return ValueType::UInt16;
    else if constexpr (std::is_same_v<T, int16_t>)
        return ValueType::Int16;
    else if constexpr (std::is_same_v<T, uint32_t>)
        return ValueType::UInt32;
    else if constexpr (std::is_same_v<T, int32_t>)
        return ValueType::Int32;
    else if constexpr (std::is_same_v<T, float>)
        return ValueType::Float32;
    else if constexpr (std::is_same_v<T, bool>)
        return ValueType::Bool;
    else if constexpr (std::is_same_v<T, uint64_t>)
        return ValueType::UInt64;
    else if constexpr (std::is_same_v<T, int64_t>)
        return ValueType::Int64;
    else if constexpr (std::is_same_v<T, double>)
        return ValueType::Float64;
    else
        return std::nullopt;
}

// One GGUF array: a count of elements of one type. Scalars are kept as their
// packed little-endian bytes (a 150k-entry score table stays 600 KB, not
// 150k variants); strings back to back in one buffer (a 262k-token vocabulary
// is 3 MB, not 8 MB of std::string objects); nested arrays decoded.
//
// A parsed file's arrays go further and read their elements in place in the
// file's mapping, which they keep alive: once the tokenizer has its own copy,
// a 262K-token vocabulary costs this process no memory at all (the kernel may
// drop the clean file pages and fault them back in if they are read again).
class FERROX_API Array {
  public:
    Array() = default;
    // `packed` holds count * scalar_size(type) bytes; type must be a scalar type.
    static Array of_scalars(ValueType type, uint64_t count, std::vector<std::byte> packed);
    static Array of_strings(const std::vector<std::string>& strings);
    // Strings already back to back: element i is pool[ends[i-1], ends[i]).
    static Array of_string_pool(std::string pool, std::vector<uint64_t> ends);
    static Array of_arrays(std::vector<Array> arrays);

    // In place: `bytes` (count * scalar_size(type) of them) stay valid as
    // long as `backing` lives.
    static Array of_mapped_scalars(ValueType type, uint64_t count, std::span<const std::byte> bytes,
                                   std::shared_ptr<const void> backing);
    // In place, GGUF's own string encoding: `region` is the strings as the
    // file holds them (each a u64 length, then its bytes) and string i's
    // bytes start at region[starts[i]]; it runs to 8 bytes before the next
    // start, the last one to the region's end. The region is under 4 GiB.
    static Array of_mapped_strings(std::span<const std::byte> region, std::vector<uint32_t> starts,
                                   std::shared_ptr<const void> backing);

    ValueType element_type() const { return element_type_; }
    uint64_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    // Element i (< size()) as a Value of element_type().
    Value at(uint64_t i) const;

    // The elements when T is exactly the element type, else nullopt.
    template <class T>
    std::optional<std::vector<T>> as_vector() const {
        static_assert(value_type_of<T>().has_value(), "as_vector<T> needs a scalar GGUF type");
        if (element_type_ != *value_type_of<T>()) return std::nullopt;
        std::vector<T> out(size_);
        const std::byte* packed = scalar_bytes().data();
        for (uint64_t i = 0; i < size_; ++i) {
            if constexpr (std::is_same_v<T, bool>) {
                out[i] = packed[i] != std::byte{0};
            } else {
                std::memcpy(&out[i], packed + i * sizeof(T), sizeof(T));
            }
        }
        return out;
    }

    // String arrays: element i, or all of them copied out.
    std::string_view string_at(uint64_t i) const {
        if (backing_) {
            const uint64_t begin = mapped_starts_[i];
            const uint64_t end = i + 1 < size_ ? mapped_starts_[i + 1] - 8 : mapped_.size();
            return {reinterpret_cast<const char*>(mapped_.data()) + begin, end - begin};
        }
        const uint64_t begin = i == 0 ? 0 : string_ends_[i - 1];
        return std::string_view(string_pool_).substr(begin, string_ends_[i] - begin);
    }
    std::vector<std::string> strings() const;
    const std::vector<Array>& arrays() const { return arrays_; }  // Array arrays

  private:
    // A scalar array's packed elements, owned or in place.
    std::span<const std::byte> scalar_bytes() const {
        if (backing_) return mapped_;
        return scalars_;
    }

    ValueType element_type_ = ValueType::UInt8;
    uint64_t size_ = 0;
    // In place (backing_ set): the elements' bytes, and for strings where
    // each one starts.
    std::shared_ptr<const void> backing_;
    std::span<const std::byte> mapped_;
    std::vector<uint32_t> mapped_starts_;
    std::vector<std::byte> scalars_;
    std::string string_pool_;
    std::vector<uint64_t> string_ends_;  // element i ends at string_ends_[i] in the pool
    std::vector<Array> arrays_;
};

inline ValueType type_of(const Value& value) { return static_cast<ValueType>(value.index()); }

// A short human rendering ("42", "\"llama\"", "[UINT32 x 3: 1, 2, 3]"), arrays
// elided after `max_elements`; for logs and `ferrox inspect`.
FERROX_API std::string to_display_string(const Value& value, uint64_t max_elements = 8);

}  // namespace ferrox::gguf
