// Builds small GGUF v3 files in memory for metadata tests: scalar and string
// keys plus F32 tensors. Only what these tests need.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ferrox/gguf/file.h"

namespace ferrox::test {

class TinyGguf {
  public:
    TinyGguf& u32(const std::string& key, uint32_t v) { return scalar(key, 4, &v, 4); }
    TinyGguf& f32(const std::string& key, float v) { return scalar(key, 6, &v, 4); }
    TinyGguf& boolean(const std::string& key, bool v) {
        const uint8_t byte = v ? 1 : 0;
        return scalar(key, 7, &byte, 1);
    }
    TinyGguf& i32_array(const std::string& key, const std::vector<int32_t>& v) {
        std::vector<std::byte> p(12 + 4 * v.size());
        const uint32_t element_type = 5;  // INT32
        const uint64_t n = v.size();
        std::memcpy(p.data(), &element_type, 4);
        std::memcpy(p.data() + 4, &n, 8);
        if (!v.empty()) std::memcpy(p.data() + 12, v.data(), 4 * v.size());
        entries_.push_back({key, 9, std::move(p)});  // ARRAY
        return *this;
    }
    TinyGguf& str_array(const std::string& key, const std::vector<std::string>& v) {
        std::vector<std::byte> p(12);
        const uint32_t element_type = 8;  // STRING
        const uint64_t n = v.size();
        std::memcpy(p.data(), &element_type, 4);
        std::memcpy(p.data() + 4, &n, 8);
        for (const std::string& s : v) put_bytes(p, with_length(s));
        entries_.push_back({key, 9, std::move(p)});  // ARRAY
        return *this;
    }
    TinyGguf& bool_array(const std::string& key, const std::vector<bool>& v) {
        std::vector<std::byte> p(12 + v.size());
        const uint32_t element_type = 7;  // BOOL
        const uint64_t n = v.size();
        std::memcpy(p.data(), &element_type, 4);
        std::memcpy(p.data() + 4, &n, 8);
        for (size_t i = 0; i < v.size(); ++i) p[12 + i] = v[i] ? std::byte{1} : std::byte{0};
        entries_.push_back({key, 9, std::move(p)});  // ARRAY
        return *this;
    }
    TinyGguf& str(const std::string& key, const std::string& v) {
        entries_.push_back({key, 8, with_length(v)});
        return *this;
    }
    // A 2-D F32 tensor [cols, rows] (ggml order) filled with `value`.
    TinyGguf& tensor(const std::string& name, uint64_t cols, uint64_t rows, float value) {
        tensors_.push_back({name, cols, rows, std::vector<float>(cols * rows, value)});
        return *this;
    }
    // Drops a tensor added earlier (to add it again with another shape).
    TinyGguf& without_tensor(const std::string& name) {
        std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
        return *this;
    }
    // Drops a key added earlier, to test its absence.
    TinyGguf& without(const std::string& key) {
        std::erase_if(entries_, [&](const Entry& e) { return e.key == key; });
        return *this;
    }

    Expected<gguf::File> parse() const {
        const std::vector<std::byte> bytes = build();
        return gguf::File::parse(std::make_shared<const gguf::MappedFile>(
            gguf::MappedFile::copy_of(bytes, "tiny.gguf")));
    }

    // The same bytes as a file, for loaders that open a path (the C API, the CLI).
    bool write(const std::string& path) const {
        const std::vector<std::byte> bytes = build();
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(bytes.data()),
                  static_cast<std::streamsize>(bytes.size()));
        return static_cast<bool>(out);
    }

  private:
    struct Entry {
        std::string key;
        uint32_t type;
        std::vector<std::byte> payload;
    };
    struct Tensor {
        std::string name;
        uint64_t cols, rows;
        std::vector<float> data;
    };

    static std::vector<std::byte> with_length(const std::string& s) {
        std::vector<std::byte> out(8 + s.size());
        const uint64_t n = s.size();
        std::memcpy(out.data(), &n, 8);
        std::memcpy(out.data() + 8, s.data(), s.size());
        return out;
    }
    TinyGguf& scalar(const std::string& key, uint32_t type, const void* v, size_t n) {
        std::vector<std::byte> p(n);
        std::memcpy(p.data(), v, n);
        entries_.push_back({key, type, std::move(p)});
        return *this;
    }
    template <class T>
    static void put(std::vector<std::byte>& out, T v) {
        const size_t at = out.size();
        out.resize(at + sizeof(T));
        std::memcpy(out.data() + at, &v, sizeof(T));
    }
    static void put_bytes(std::vector<std::byte>& out, const std::vector<std::byte>& b) {
        out.insert(out.end(), b.begin(), b.end());
    }

    std::vector<std::byte> build() const {
        std::vector<std::byte> out;
        put<uint32_t>(out, 0x46554747u);  // "GGUF"
        put<uint32_t>(out, 3);
        put<uint64_t>(out, tensors_.size());
        put<uint64_t>(out, entries_.size());
        for (const auto& e : entries_) {
            put_bytes(out, with_length(e.key));
            put<uint32_t>(out, e.type);
            put_bytes(out, e.payload);
        }
        uint64_t offset = 0;
        for (const auto& t : tensors_) {
            put_bytes(out, with_length(t.name));
            put<uint32_t>(out, 2);
            put<uint64_t>(out, t.cols);
            put<uint64_t>(out, t.rows);
            put<uint32_t>(out, 0);  // F32
            put<uint64_t>(out, offset);
            offset += (t.data.size() * 4 + 31) / 32 * 32;
        }
        out.resize((out.size() + 31) / 32 * 32);
        for (const auto& t : tensors_) {
            const size_t at = out.size();
            out.resize(at + (t.data.size() * 4 + 31) / 32 * 32);
            std::memcpy(out.data() + at, t.data.data(), t.data.size() * 4);
        }
        return out;
    }

    std::vector<Entry> entries_;
    std::vector<Tensor> tensors_;
};

}  // namespace ferrox::test
