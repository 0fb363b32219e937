#include "ferrox/gguf/value.h"

#include <fmt/format.h>

#include <array>
#include <cassert>
#include <utility>

namespace ferrox::gguf {
namespace {

constexpr std::array<std::string_view, kValueTypeCount> kTypeNames{
    "UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
    "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
constexpr std::array<uint32_t, kValueTypeCount> kScalarSizes{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

template <class T>
T load(std::span<const std::byte> packed, uint64_t index) {
    T value;
    std::memcpy(&value, packed.data() + index * sizeof(T), sizeof(T));
    return value;
}

}  // namespace

std::string_view value_type_name(ValueType type) {
    const auto id = static_cast<uint32_t>(type);
    return id < kValueTypeCount ? kTypeNames[id] : std::string_view{"?"};
}

uint32_t scalar_size(ValueType type) {
    const auto id = static_cast<uint32_t>(type);
    return id < kValueTypeCount ? kScalarSizes[id] : 0;
}

Array Array::of_scalars(ValueType type, uint64_t count, std::vector<std::byte> packed) {
    assert(scalar_size(type) != 0 && packed.size() == count * scalar_size(type));
    Array array;
    array.element_type_ = type;
    array.size_ = count;
    array.scalars_ = std::move(packed);
    return array;
}

Array Array::of_mapped_scalars(ValueType type, uint64_t count, std::span<const std::byte> bytes,
                               std::shared_ptr<const void> backing) {
    assert(scalar_size(type) != 0 && bytes.size() == count * scalar_size(type) && backing);
    Array array;
    array.element_type_ = type;
    array.size_ = count;
    array.mapped_ = bytes;
    array.backing_ = std::move(backing);
    return array;
}

Array Array::of_mapped_strings(std::span<const std::byte> region, std::vector<uint32_t> starts,
                               std::shared_ptr<const void> backing) {
    assert(region.size() <= UINT32_MAX && backing);
    Array array;
    array.element_type_ = ValueType::String;
    array.size_ = starts.size();
    array.mapped_ = region;
    array.mapped_starts_ = std::move(starts);
    array.backing_ = std::move(backing);
    return array;
}

Array Array::of_strings(const std::vector<std::string>& strings) {
    std::string pool;
    std::vector<uint64_t> ends;
    ends.reserve(strings.size());
    for (const std::string& s : strings) {
        pool += s;
        ends.push_back(pool.size());
    }
    return of_string_pool(std::move(pool), std::move(ends));
}

Array Array::of_string_pool(std::string pool, std::vector<uint64_t> ends) {
    Array array;
    array.element_type_ = ValueType::String;
    array.size_ = ends.size();
    array.string_pool_ = std::move(pool);
    array.string_ends_ = std::move(ends);
    return array;
}

std::vector<std::string> Array::strings() const {
    std::vector<std::string> out;
    if (element_type_ != ValueType::String) return out;
    out.reserve(size_);
    for (uint64_t i = 0; i < size_; ++i) out.emplace_back(string_at(i));
    return out;
}

Array Array::of_arrays(std::vector<Array> arrays) {
    Array array;
    array.element_type_ = ValueType::Array;
    array.size_ = arrays.size();
    array.arrays_ = std::move(arrays);
    return array;
}

Value Array::at(uint64_t i) const {
    assert(i < size_);
    const std::span<const std::byte> scalars = scalar_bytes();
    switch (element_type_) {
        case ValueType::UInt8:
            return load<uint8_t>(scalars, i);
        case ValueType::Int8:
            return load<int8_t>(scalars, i);
        case ValueType::UInt16:
            return load<uint16_t>(scalars, i);
        case ValueType::Int16:
            return load<int16_t>(scalars, i);
        case ValueType::UInt32:
            return load<uint32_t>(scalars, i);
        case ValueType::Int32:
            return load<int32_t>(scalars, i);
        case ValueType::Float32:
            return load<float>(scalars, i);
        case ValueType::Bool:
            return scalars[i] != std::byte{0};
        case ValueType::String:
            return std::string(string_at(i));
        case ValueType::Array:
            return arrays_[i];
        case ValueType::UInt64:
            return load<uint64_t>(scalars, i);
        case ValueType::Int64:
            return load<int64_t>(scalars, i);
        case ValueType::Float64:
            return load<double>(scalars, i);
    }
    return uint8_t{0};  // unreachable: element_type_ is always a valid type
}

std::string to_display_string(const Value& value, uint64_t max_elements) {
    return std::visit(
        [&](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
                return fmt::format("\"{}\"", v);
            } else if constexpr (std::is_same_v<T, bool>) {
                return v ? "true" : "false";
            } else if constexpr (std::is_same_v<T, Array>) {
                std::string out =
                    fmt::format("[{} x {}:", value_type_name(v.element_type()), v.size());
                for (uint64_t i = 0; i < v.size() && i < max_elements; ++i)
                    out += (i ? ", " : " ") + to_display_string(v.at(i), max_elements);
                if (v.size() > max_elements) out += ", ...";
                return out + "]";
            } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
                return fmt::format("{}", static_cast<int>(v));  // a number, not a character
            } else {
                return fmt::format("{}", v);
            }
        },
        value);
}

}  // namespace ferrox::gguf
