// libFuzzer target: parse arbitrary bytes as GGUF, then touch every metadata
// value and every byte of every tensor, so any bound the parser failed to
// check shows up as an ASan report rather than a silent misread.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <variant>

#include "ferrox/gguf/file.h"

namespace {

uint64_t touch(const ferrox::gguf::Value& value) {
    if (const auto* array = std::get_if<ferrox::gguf::Array>(&value)) {
        uint64_t sum = array->size();
        for (uint64_t i = 0; i < array->size(); ++i) sum += touch(array->at(i));
        return sum;
    }
    if (const auto* text = std::get_if<std::string>(&value)) {
        uint64_t sum = 0;
        for (char c : *text) sum += static_cast<unsigned char>(c);
        return sum;
    }
    return ferrox::gguf::to_display_string(value).size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    auto file = ferrox::gguf::File::parse(std::make_shared<const ferrox::gguf::MappedFile>(
        ferrox::gguf::MappedFile::copy_of(bytes, "fuzz-input.gguf")));
    if (!file) return 0;

    uint64_t sink = 0;
    for (const auto& kv : file->metadata()) {
        sink += touch(kv.value);
        sink += file->get_u32(kv.key).has_value();
        sink += file->get_string_array(kv.key).has_value();
        sink += file->get_f32_array(kv.key).has_value();
        sink += file->get_i32_array(kv.key).has_value();
    }
    for (const auto& tensor : file->tensors()) {
        for (std::byte b : tensor.data()) sink += std::to_integer<uint8_t>(b);
        sink += tensor.element_count() + (file->find_tensor(tensor.name()) == &tensor);
    }
    volatile uint64_t keep = sink;  // the reads above must not be optimised away
    (void)keep;
    return 0;
}
