// ByteReader: a bounds-checked little-endian cursor over a file's bytes.
// Every read checks what is left first, so no malformed length can move it
// past the end; every error names the source, the byte offset and the problem.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "ferrox/expected.h"

namespace ferrox::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader decodes little-endian files by memcpy");

class ByteReader {
  public:
    ByteReader(std::span<const std::byte> bytes, std::string source)
        : bytes_(bytes), source_(std::move(source)) {}

    uint64_t offset() const { return offset_; }
    uint64_t size() const { return bytes_.size(); }
    uint64_t remaining() const { return bytes_.size() - offset_; }
    const std::string& source() const { return source_; }

    // "<path>: offset <n>: <problem>", the shape of every reader error.
    Error error_at(uint64_t offset, std::string_view problem) const {
        return make_error("{}: offset {}: {}", source_, offset, problem);
    }

    Expected<std::span<const std::byte>> take(uint64_t count, std::string_view what) {
        if (count > remaining())
            return error_at(offset_, fmt::format("file is truncated: {} needs {} bytes, {} left",
                                                 what, count, remaining()));
        auto out = bytes_.subspan(offset_, count);
        offset_ += count;
        return out;
    }

    template <class T>
    Expected<T> read(std::string_view what) {
        static_assert(std::is_trivially_copyable_v<T>);
        auto raw = take(sizeof(T), what);
        if (!raw) return raw.error();
        T value;
        std::memcpy(&value, raw->data(), sizeof(T));
        return value;
    }

    // A GGUF string: uint64 length, then that many bytes (not NUL-terminated).
    Expected<std::string> read_string(std::string_view what) {
        auto view = read_string_view(what);
        if (!view) return view.error();
        return std::string(*view);
    }

    // The same, viewed in place (valid as long as the bytes are).
    Expected<std::string_view> read_string_view(std::string_view what) {
        const uint64_t at = offset_;
        auto length = read<uint64_t>(what);
        if (!length) return length.error();
        if (*length > remaining())
            return error_at(
                at, fmt::format("{} has length {} but only {} bytes are left in the file", what,
                                *length, remaining()));
        auto raw = take(*length, what);
        if (!raw) return raw.error();
        return std::string_view(reinterpret_cast<const char*>(raw->data()), raw->size());
    }

  private:
    std::span<const std::byte> bytes_;
    std::string source_;
    uint64_t offset_ = 0;
};

// Overflow-checked arithmetic: nullopt-free booleans so call sites read as tests.
inline bool checked_add(uint64_t a, uint64_t b, uint64_t& out) {
    return !__builtin_add_overflow(a, b, &out);
}
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
    return !__builtin_mul_overflow(a, b, &out);
}

}  // namespace ferrox::gguf
