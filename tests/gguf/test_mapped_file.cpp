// MappedFile: RAII, move-only, and a mapping id that is never reused -- the
// seeds' MapId lesson: an address alone is not an identity once a mapping can
// be unmapped and another mapped in its place.
#include <catch2/catch.hpp>
#include <set>

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
