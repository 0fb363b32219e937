// File's metadata getters and Tensor: lookups over what the parser validated.
#include "ferrox/gguf/file.h"

#include <cassert>
#include <limits>
#include <type_traits>
#include <utility>

namespace ferrox::gguf {

Tensor::Tensor(std::string name, ferrox_kind kind, std::span<const uint64_t> shape,
               uint64_t byte_size, uint64_t file_offset, std::shared_ptr<const MappedFile> mapping)
    : name_(std::move(name)),
      kind_(kind),
      n_dims_(static_cast<uint32_t>(shape.size())),
      element_count_(1),
      byte_size_(byte_size),
      file_offset_(file_offset),
      mapping_(std::move(mapping)) {
    assert(!shape.empty() && shape.size() <= kMaxDims);
    for (std::size_t d = 0; d < shape.size(); ++d) {
        dims_[d] = shape[d];
        element_count_ *= shape[d];
    }
    assert(mapping_ && file_offset_ <= mapping_->bytes().size() &&
           byte_size_ <= mapping_->bytes().size() - file_offset_);
}

std::span<const std::byte> Tensor::data() const {
    return mapping_->bytes().subspan(file_offset_, byte_size_);
}

const Value* File::find(std::string_view key) const {
    auto it = key_index_.find(key);
    return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const Tensor* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// An integer Value converted to T when its value fits, else nullopt.
template <class T>
std::optional<T> integer_as(const Value& value) {
    return std::visit(
        [](const auto& v) -> std::optional<T> {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
                if (std::in_range<T>(v)) return static_cast<T>(v);
            }
            return std::nullopt;
        },
        value);
}

Error wrong_type(const File& file, std::string_view key, const Value& value,
                 std::string_view wanted) {
    return make_error("{}: metadata key '{}' holds {} ({}), expected {}", file.path().string(), key,
                      value_type_name(type_of(value)), to_display_string(value, 4), wanted);
}

Error missing(const File& file, std::string_view key) {
    return make_error("{}: metadata key '{}' is missing", file.path().string(), key);
}

template <class T>
Expected<T> get_integer(const File& file, std::string_view key, std::string_view wanted) {
    const Value* value = file.find(key);
    if (!value) return missing(file, key);
    if (auto v = integer_as<T>(*value)) return *v;
    return wrong_type(file, key, *value, wanted);
}

template <class T>
Expected<std::vector<T>> get_integer_array(const File& file, std::string_view key,
                                           std::string_view wanted) {
    const Value* value = file.find(key);
    if (!value) return missing(file, key);
    const auto* array = std::get_if<Array>(value);
    if (!array || array->element_type() == ValueType::String ||
        array->element_type() == ValueType::Array || array->element_type() == ValueType::Bool ||
        array->element_type() == ValueType::Float32 || array->element_type() == ValueType::Float64)
        return wrong_type(file, key, *value, wanted);
    std::vector<T> out;
    out.reserve(array->size());
    for (uint64_t i = 0; i < array->size(); ++i) {
        auto v = integer_as<T>(array->at(i));
        if (!v)
            return make_error("{}: metadata key '{}' element #{} ({}) does not fit {}",
                              file.path().string(), key, i, to_display_string(array->at(i)),
                              wanted);
        out.push_back(*v);
    }
    return out;
}

template <class T, class Getter>
Expected<T> or_fallback(const File& file, std::string_view key, T fallback, Getter get) {
    if (!file.find(key)) return fallback;
    return get(file, key);
}

}  // namespace

Expected<uint32_t> File::get_u32(std::string_view key) const {
    return get_integer<uint32_t>(*this, key, "an integer that fits uint32");
}
Expected<uint64_t> File::get_u64(std::string_view key) const {
    return get_integer<uint64_t>(*this, key, "an integer that fits uint64");
}
Expected<int32_t> File::get_i32(std::string_view key) const {
    return get_integer<int32_t>(*this, key, "an integer that fits int32");
}
Expected<int64_t> File::get_i64(std::string_view key) const {
    return get_integer<int64_t>(*this, key, "an integer that fits int64");
}

Expected<float> File::get_f32(std::string_view key) const {
    const Value* value = find(key);
    if (!value) return missing(*this, key);
    if (const auto* f = std::get_if<float>(value)) return *f;
    if (const auto* d = std::get_if<double>(value)) return static_cast<float>(*d);
    return wrong_type(*this, key, *value, "FLOAT32 or FLOAT64");
}

Expected<bool> File::get_bool(std::string_view key) const {
    const Value* value = find(key);
    if (!value) return missing(*this, key);
    if (const auto* b = std::get_if<bool>(value)) return *b;
    return wrong_type(*this, key, *value, "BOOL");
}

Expected<std::string> File::get_string(std::string_view key) const {
    const Value* value = find(key);
    if (!value) return missing(*this, key);
    if (const auto* s = std::get_if<std::string>(value)) return *s;
    return wrong_type(*this, key, *value, "STRING");
}

Expected<std::vector<std::string>> File::get_string_array(std::string_view key) const {
    const Value* value = find(key);
    if (!value) return missing(*this, key);
    const auto* array = std::get_if<Array>(value);
    if (!array || array->element_type() != ValueType::String)
        return wrong_type(*this, key, *value, "an ARRAY of STRING");
    return array->strings();
}

Expected<std::vector<float>> File::get_f32_array(std::string_view key) const {
    const Value* value = find(key);
    if (!value) return missing(*this, key);
    const auto* array = std::get_if<Array>(value);
    if (array) {
        if (auto floats = array->as_vector<float>()) return std::move(*floats);
    }
    return wrong_type(*this, key, *value, "an ARRAY of FLOAT32");
}

Expected<std::vector<int32_t>> File::get_i32_array(std::string_view key) const {
    return get_integer_array<int32_t>(*this, key, "an ARRAY of integers that fit int32");
}
Expected<std::vector<uint32_t>> File::get_u32_array(std::string_view key) const {
    return get_integer_array<uint32_t>(*this, key, "an ARRAY of integers that fit uint32");
}

Expected<uint32_t> File::get_u32_or(std::string_view key, uint32_t fallback) const {
    return or_fallback(*this, key, fallback,
                       [](const File& f, std::string_view k) { return f.get_u32(k); });
}
Expected<float> File::get_f32_or(std::string_view key, float fallback) const {
    return or_fallback(*this, key, fallback,
                       [](const File& f, std::string_view k) { return f.get_f32(k); });
}
Expected<bool> File::get_bool_or(std::string_view key, bool fallback) const {
    return or_fallback(*this, key, fallback,
                       [](const File& f, std::string_view k) { return f.get_bool(k); });
}
Expected<std::string> File::get_string_or(std::string_view key, std::string fallback) const {
    return or_fallback(*this, key, std::move(fallback),
                       [](const File& f, std::string_view k) { return f.get_string(k); });
}

}  // namespace ferrox::gguf
