// MappedFile: RAII, move-only, and a mapping id that is never reused -- the
// seeds' MapId lesson: an address alone is not an identity once a mapping can
// be unmapped and another mapped in its place.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gguf_test_support.h"

using ferrox::gguf::MappedFile;

TEST_CASE("a mapped file exposes exactly the file's bytes") {
    const auto path = gguf_test::fixture_dir() / "small_v2.gguf";
    auto mapped = MappedFile::open(path);
    REQUIRE(mapped.has_value());
    const auto expected = gguf_test::read_bytes(path);
    REQUIRE(mapped->bytes().size() == expected.size());
    CHECK(std::equal(expected.begin(), expected.end(), mapped->bytes().begin()));
    CHECK(mapped->path() == path);
    CHECK(mapped->is_file_mapping());
}

TEST_CASE("mapping ids are unique and never reused, even when an address is") {
    const auto path = gguf_test::fixture_dir() / "small_v2.gguf";
    std::set<uint64_t> ids;
    std::set<const std::byte*> addresses;
    for (int i = 0; i < 64; ++i) {
        auto mapped = MappedFile::open(path);  // unmapped again at the end of each turn
        REQUIRE(mapped.has_value());
        CHECK(mapped->mapping_id() != 0);
        CHECK(ids.insert(mapped->mapping_id()).second);
        addresses.insert(mapped->bytes().data());
        const auto copy = MappedFile::copy_of(mapped->bytes(), "copy");
        CHECK(ids.insert(copy.mapping_id()).second);
    }
    // Typically the kernel hands the same address back: exactly the ABA a
    // cache keyed on addresses would fall for.
    INFO("distinct addresses seen: " << addresses.size());
    CHECK(ids.size() == 128);
}

TEST_CASE("moving a mapping carries its bytes and id and leaves the source empty") {
    auto mapped = MappedFile::open(gguf_test::fixture_dir() / "small_v2.gguf");
    REQUIRE(mapped.has_value());
    const uint64_t id = mapped->mapping_id();
    const auto* data = mapped->bytes().data();
    MappedFile moved = std::move(*mapped);
    CHECK(moved.mapping_id() == id);
    CHECK(moved.bytes().data() == data);
    CHECK(mapped->mapping_id() ==
          0);  // NOLINT(bugprone-use-after-move): checking the moved-from state
    CHECK(mapped->bytes().empty());

    MappedFile other = MappedFile::copy_of(moved.bytes(), "other");
    other = std::move(moved);
    CHECK(other.mapping_id() == id);
    CHECK(other.bytes().data() == data);
}

TEST_CASE("an owned copy is aligned like a mapping and holds its own bytes") {
    std::vector<std::byte> source(100);
    for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::byte>(i * 7 + 1);
    const auto copy = MappedFile::copy_of(source, "bytes");
    source.assign(source.size(), std::byte{0});
    CHECK(reinterpret_cast<uintptr_t>(copy.bytes().data()) % 64 == 0);
    CHECK(std::to_integer<int>(copy.bytes()[99]) == (99 * 7 + 1) % 256);
    CHECK_FALSE(copy.is_file_mapping());
    CHECK(MappedFile::copy_of({}, "empty").bytes().empty());
}

namespace {

// Resident KiB of the mapping that holds `address` (/proc/self/smaps), or -1.
long resident_kib(const void* address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(address);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        uintptr_t begin = 0, end = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) {  // a mapping's first line
            inside = begin <= at && at < end;
        } else if (inside && line.rfind("Rss:", 0) == 0) {
            return std::stol(line.substr(4));
        }
    }
    return -1;
}

}  // namespace

TEST_CASE("released header pages leave the process and read back unchanged") {
    // A GGUF of one 40000-string array (about 940 KiB of header) and no
    // tensors, written by hand: magic, version 3, 0 tensors, 1 key.
    std::vector<std::string> words;
    std::string bytes = "GGUF";
    const auto put = [&](auto v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); };
    const auto put_string = [&](const std::string& text) {
        put(uint64_t{text.size()});
        bytes += text;
    };
    put(uint32_t{3});
    put(uint64_t{0});
    put(uint64_t{1});
    put_string("test.words");
    put(uint32_t{9});  // ARRAY
    put(uint32_t{8});  // of STRING
    put(uint64_t{40000});
    for (int i = 0; i < 40000; ++i) {
        words.push_back("word-" + std::to_string(i * 7919 % 100003) + std::string(i % 13, 'x'));
        put_string(words.back());
    }
    const auto path = std::filesystem::temp_directory_path() /
                      ("ferrox-release-" + std::to_string(::getpid()) + ".gguf");
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    auto file = ferrox::gguf::File::open(path);
    std::filesystem::remove(path);  // the mapping keeps the bytes
    REQUIRE(file.has_value());
    const auto& array = std::get<ferrox::gguf::Array>(*file->find("test.words"));
    REQUIRE(array.size() == words.size());
    for (size_t i = 0; i < words.size(); ++i) REQUIRE(array.string_at(i) == words[i]);
    const void* base = file->mapping()->bytes().data();
    const long before = resident_kib(base);
    file->release_header_pages();
    const long after = resident_kib(base);
    INFO("mapping resident before " << before << " KiB, after " << after << " KiB");
    CHECK(before >= 400);
    CHECK(after <= before - 400);
    for (size_t i = 0; i < words.size(); ++i) REQUIRE(array.string_at(i) == words[i]);
}
