// Damaged and hostile files: each must yield an Error that names the file, the
// byte offset (taken from the gguf package's own reader, via the sidecar) and
// the problem -- and nothing may read out of bounds (run under ASan in CI).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <random>

#include "gguf_test_support.h"

using ferrox::gguf::File;
using nlohmann::json;

namespace {

struct Fixture {
    std::vector<std::byte> bytes;
    json want;

    explicit Fixture(const std::string& name)
        : bytes(gguf_test::read_bytes(gguf_test::fixture_dir() / (name + ".gguf"))),
          want(gguf_test::sidecar(name)) {}

    const json& kv(const std::string& key) const {
        for (const auto& entry : want["metadata"])
            if (entry["key"] == key) return entry;
        throw std::runtime_error("no key " + key + " in sidecar");
    }
    const json& tensor(const std::string& name) const {
        for (const auto& entry : want["tensors"])
            if (entry["name"] == name) return entry;
        throw std::runtime_error("no tensor " + name + " in sidecar");
    }
};

// The error message of parsing `bytes`, which must fail.
std::string parse_error(std::span<const std::byte> bytes, const std::string& label) {
    auto file = gguf_test::parse_bytes(bytes, label);
    REQUIRE_FALSE(file.has_value());
    const std::string message = file.error().message();
    INFO(message);
    CHECK_THAT(message, Catch::Contains(label));
    return message;
}

std::string at(uint64_t offset) { return fmt::format("offset {}:", offset); }

}  // namespace

TEST_CASE("a file truncated at any byte before its last tensor ends is refused with its offset") {
    for (const std::string name : {"all_types_v3", "aligned64_v3", "small_v2"}) {
        const Fixture f(name);
        uint64_t last_end = 0;
        for (const auto& t : f.want["tensors"])
            last_end = std::max(last_end,
                                t["file_offset"].get<uint64_t>() + t["byte_size"].get<uint64_t>());
        for (uint64_t cut = 0; cut < last_end; ++cut) {
            INFO(name << " cut at " << cut);
            const std::string message =
                parse_error(std::span(f.bytes).first(cut), "truncated.gguf");
            CHECK_THAT(message, Catch::Contains("offset "));
        }
        // Trailing padding after the last tensor is not needed.
        CHECK(gguf_test::parse_bytes(std::span(f.bytes).first(last_end), "t.gguf").has_value());
    }
}

TEST_CASE("an empty file on disk is refused naming its path") {
    const auto path =
        std::filesystem::temp_directory_path() / fmt::format("ferrox-empty-{}.gguf", ::getpid());
    { std::ofstream touch(path); }
    auto file = File::open(path);
    std::filesystem::remove(path);
    REQUIRE_FALSE(file.has_value());
    CHECK_THAT(file.error().message(),
               Catch::Contains(path.string()) && Catch::Contains("truncated"));
}

TEST_CASE("a truncated file on disk is refused naming its path and offset") {
    const Fixture f("small_v2");
    const auto path = std::filesystem::temp_directory_path() /
                      fmt::format("ferrox-truncated-{}.gguf", ::getpid());
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(f.bytes.data()), 100);
    }
    auto file = File::open(path);
    std::filesystem::remove(path);
    REQUIRE_FALSE(file.has_value());
    CHECK_THAT(file.error().message(), Catch::Contains(path.string()) && Catch::Contains("offset"));
}

TEST_CASE("a missing file or a directory is refused naming the path") {
    auto missing = File::open("/nonexistent/ferrox/model.gguf");
    REQUIRE_FALSE(missing.has_value());
    CHECK_THAT(missing.error().message(), Catch::Contains("/nonexistent/ferrox/model.gguf"));
    auto directory = File::open(gguf_test::fixture_dir());
    REQUIRE_FALSE(directory.has_value());
    CHECK_THAT(directory.error().message(), Catch::Contains("not a regular file"));
}

TEST_CASE("bad magic is refused at offset 0") {
    Fixture f("small_v2");
    f.bytes[0] = std::byte{'X'};
    CHECK_THAT(parse_error(f.bytes, "magic.gguf"),
               Catch::Contains(at(0)) && Catch::Contains("not a GGUF file"));
}

TEST_CASE("version 1, an unknown version and a big-endian file are refused at offset 4") {
    Fixture f("small_v2");
    gguf_test::put_le<uint32_t>(f.bytes, 4, 1);
    CHECK_THAT(parse_error(f.bytes, "v1.gguf"),
               Catch::Contains(at(4)) && Catch::Contains("version 1 is not supported"));
    gguf_test::put_le<uint32_t>(f.bytes, 4, 4);
    CHECK_THAT(parse_error(f.bytes, "v4.gguf"),
               Catch::Contains(at(4)) && Catch::Contains("unsupported GGUF version 4"));
    gguf_test::put_le<uint32_t>(f.bytes, 4, 0x03000000u);
    CHECK_THAT(parse_error(f.bytes, "be.gguf"),
               Catch::Contains(at(4)) && Catch::Contains("big-endian"));
}

TEST_CASE("tensor and metadata counts that cannot fit in the file are refused at their field") {
    Fixture f("all_types_v3");
    const uint64_t tensor_count_at = f.want["tensor_count_at"];
    const uint64_t kv_count_at = f.want["kv_count_at"];
    for (uint64_t huge : {uint64_t{1} << 40, ~uint64_t{0}, uint64_t{1000}}) {
        auto bytes = f.bytes;
        gguf_test::put_le<uint64_t>(bytes, tensor_count_at, huge);
        CHECK_THAT(parse_error(bytes, "tensors.gguf"),
                   Catch::Contains(at(tensor_count_at)) && Catch::Contains("tensor count"));
        bytes = f.bytes;
        gguf_test::put_le<uint64_t>(bytes, kv_count_at, huge);
        CHECK_THAT(parse_error(bytes, "kvs.gguf"),
                   Catch::Contains(at(kv_count_at)) && Catch::Contains("metadata count"));
    }
}

TEST_CASE("absurd string and array lengths are refused at their length field") {
    Fixture f("all_types_v3");
    const uint64_t key_at = f.kv("test.u16")["key_at"];
    auto bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, key_at, uint64_t{1} << 62);
    CHECK_THAT(parse_error(bytes, "key.gguf"),
               Catch::Contains(at(key_at)) && Catch::Contains("length"));

    const uint64_t string_at = f.kv("test.string")["value_at"];
    bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, string_at, ~uint64_t{0});
    CHECK_THAT(parse_error(bytes, "string.gguf"),
               Catch::Contains(at(string_at)) && Catch::Contains("length"));

    // An array value is: element type (u32), count (u64), elements.
    for (const std::string key : {"test.arr.u32", "test.arr.string", "test.arr.nested"}) {
        const uint64_t count_at = f.kv(key)["value_at"].get<uint64_t>() + 4;
        bytes = f.bytes;
        gguf_test::put_le<uint64_t>(bytes, count_at, uint64_t{1} << 61);
        CHECK_THAT(parse_error(bytes, "array.gguf"),
                   Catch::Contains(at(count_at)) && Catch::Contains("cannot fit"));
    }
}

TEST_CASE("unknown value types, bad bools and duplicate keys are refused at their offset") {
    Fixture f("all_types_v3");
    const uint64_t type_at = f.kv("test.u8")["type_at"];
    auto bytes = f.bytes;
    gguf_test::put_le<uint32_t>(bytes, type_at, 13);
    CHECK_THAT(parse_error(bytes, "type.gguf"),
               Catch::Contains(at(type_at)) && Catch::Contains("unknown metadata value type 13"));

    const uint64_t element_at = f.kv("test.arr.i32")["value_at"];
    bytes = f.bytes;
    gguf_test::put_le<uint32_t>(bytes, element_at, 0xdeadbeefu);
    CHECK_THAT(parse_error(bytes, "element.gguf"),
               Catch::Contains(at(element_at)) && Catch::Contains("unknown metadata value type"));

    const uint64_t bool_at = f.kv("test.bool_true")["value_at"];
    bytes = f.bytes;
    bytes[bool_at] = std::byte{2};
    CHECK_THAT(parse_error(bytes, "bool.gguf"),
               Catch::Contains(at(bool_at)) && Catch::Contains("neither 0 nor 1"));

    // "test.i8" becomes a second "test.u8" (same length, so the layout holds).
    const uint64_t dup_at = f.kv("test.i8")["key_at"];
    bytes = f.bytes;
    bytes[dup_at + 8 + 5] = std::byte{'u'};
    CHECK_THAT(parse_error(bytes, "dupkey.gguf"),
               Catch::Contains(at(dup_at)) && Catch::Contains("duplicate metadata key 'test.u8'"));
}

TEST_CASE("bad tensor ranks, dimensions and kinds are refused naming the tensor and offset") {
    Fixture f("all_types_v3");
    const json& rank4 = f.tensor("rank4.weight");
    for (uint32_t rank : {0u, 5u, 1000u}) {
        auto bytes = f.bytes;
        gguf_test::put_le<uint32_t>(bytes, rank4["n_dims_at"], rank);
        CHECK_THAT(parse_error(bytes, "rank.gguf"), Catch::Contains(at(rank4["n_dims_at"])) &&
                                                        Catch::Contains("rank4.weight") &&
                                                        Catch::Contains("dimensions"));
    }

    const uint64_t dims_at = rank4["dims_at"];
    auto bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, dims_at + 16, 0);
    CHECK_THAT(parse_error(bytes, "zero.gguf"),
               Catch::Contains(at(dims_at + 16)) && Catch::Contains("dimension 2 is 0"));

    bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, dims_at, uint64_t{1} << 40);
    gguf_test::put_le<uint64_t>(bytes, dims_at + 8, uint64_t{1} << 40);
    CHECK_THAT(parse_error(bytes, "overflow.gguf"),
               Catch::Contains(at(dims_at + 8)) && Catch::Contains("overflows"));

    const json& q4 = f.tensor("q4_0.weight");
    bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, q4["dims_at"], 48);
    CHECK_THAT(parse_error(bytes, "row.gguf"),
               Catch::Contains(at(q4["dims_at"])) && Catch::Contains("q4_0.weight") &&
                   Catch::Contains("not a multiple of the Q4_0 block size 32"));

    const json& q8 = f.tensor("q8_0.weight");
    for (uint32_t id : {4u, 5u, 31u, 42u, 0xffffffffu}) {  // retired, unassigned, future ids
        bytes = f.bytes;
        gguf_test::put_le<uint32_t>(bytes, q8["type_at"], id);
        CHECK_THAT(parse_error(bytes, "kind.gguf"),
                   Catch::Contains(at(q8["type_at"])) && Catch::Contains("q8_0.weight") &&
                       Catch::Contains(fmt::format("unknown ggml type id {}", id)));
    }

    // "f16.weight" renamed "f32.weight": same length, so only the name changes.
    const json& f16 = f.tensor("f16.weight");
    bytes = f.bytes;
    bytes[f16["name_at"].get<uint64_t>() + 8 + 1] = std::byte{'3'};
    bytes[f16["name_at"].get<uint64_t>() + 8 + 2] = std::byte{'2'};
    CHECK_THAT(parse_error(bytes, "dupname.gguf"),
               Catch::Contains(at(f16["name_at"])) &&
                   Catch::Contains("duplicate tensor name 'f32.weight'"));
}

TEST_CASE("tensors past the end, overlapping or misaligned are refused at their offset field") {
    Fixture f("all_types_v3");
    const json& last = f.tensor("rank4.weight");
    auto bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, last["offset_at"], last["offset"].get<uint64_t>() + 4096);
    CHECK_THAT(parse_error(bytes, "past.gguf"), Catch::Contains(at(last["offset_at"])) &&
                                                    Catch::Contains("rank4.weight") &&
                                                    Catch::Contains("past the end"));

    bytes = f.bytes;  // an offset whose sum with the data start wraps around
    gguf_test::put_le<uint64_t>(bytes, last["offset_at"], ~uint64_t{31});
    CHECK_THAT(parse_error(bytes, "wrap.gguf"),
               Catch::Contains(at(last["offset_at"])) && Catch::Contains("past the end"));

    const json& q4_1 = f.tensor("q4_1.weight");
    bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, q4_1["offset_at"], f.tensor("q4_0.weight")["offset"]);
    CHECK_THAT(parse_error(bytes, "overlap.gguf"),
               Catch::Contains(at(q4_1["offset_at"])) && Catch::Contains("overlaps") &&
                   Catch::Contains("q4_0.weight") && Catch::Contains("q4_1.weight"));

    bytes = f.bytes;
    gguf_test::put_le<uint64_t>(bytes, q4_1["offset_at"], q4_1["offset"].get<uint64_t>() + 4);
    CHECK_THAT(parse_error(bytes, "misaligned.gguf"),
               Catch::Contains(at(q4_1["offset_at"])) &&
                   Catch::Contains("not a multiple of the alignment 32"));
}

TEST_CASE("general.alignment must be a UINT32 power of two") {
    Fixture f("aligned64_v3");
    const json& alignment = f.kv("general.alignment");
    REQUIRE(alignment["value"] == 64);
    for (uint32_t bad : {0u, 48u, 3u}) {
        auto bytes = f.bytes;
        gguf_test::put_le<uint32_t>(bytes, alignment["value_at"], bad);
        CHECK_THAT(
            parse_error(bytes, "alignment.gguf"),
            Catch::Contains(at(alignment["value_at"])) && Catch::Contains("not a power of two"));
    }
    auto bytes = f.bytes;  // INT32 instead of UINT32: same size, wrong type
    gguf_test::put_le<uint32_t>(bytes, alignment["type_at"], 5);
    CHECK_THAT(parse_error(bytes, "alignment-type.gguf"),
               Catch::Contains(at(alignment["value_at"])) && Catch::Contains("expected UINT32"));

    // With alignment 32 instead of 64 the data section starts elsewhere and
    // the tensors no longer line up with it; the reader must notice, not misread.
    bytes = f.bytes;
    gguf_test::put_le<uint32_t>(bytes, alignment["value_at"], 128);
    CHECK_THAT(parse_error(bytes, "alignment-128.gguf"), Catch::Contains("alignment 128"));
}

namespace {

// A GGUF v3 with one key whose value is an array nested `depth` levels deep.
std::vector<std::byte> nested_array_file(uint32_t depth) {
    std::vector<std::byte> out;
    auto put = [&](auto value) {
        const auto* p = reinterpret_cast<const std::byte*>(&value);
        out.insert(out.end(), p, p + sizeof(value));
    };
    for (char c : std::string("GGUF")) out.push_back(static_cast<std::byte>(c));
    put(uint32_t{3});
    put(uint64_t{0});  // tensors
    put(uint64_t{1});  // keys
    put(uint64_t{1});
    out.push_back(std::byte{'k'});
    put(uint32_t{9});  // ARRAY
    for (uint32_t level = 1; level < depth; ++level) {
        put(uint32_t{9});  // of ARRAY
        put(uint64_t{1});  // one element
    }
    put(uint32_t{4});  // innermost: UINT32 x 1
    put(uint64_t{1});
    put(uint32_t{42});
    return out;
}

}  // namespace

TEST_CASE("arrays nest up to the depth limit and no deeper") {
    const auto ok =
        gguf_test::parse_bytes(nested_array_file(ferrox::gguf::kMaxArrayDepth), "d.gguf");
    REQUIRE(ok.has_value());
    const auto* value = &std::get<ferrox::gguf::Array>(*ok->find("k"));
    for (uint32_t level = 1; level < ferrox::gguf::kMaxArrayDepth; ++level)
        value = &value->arrays().at(0);
    CHECK(*value->as_vector<uint32_t>() == std::vector<uint32_t>{42});

    CHECK_THAT(parse_error(nested_array_file(ferrox::gguf::kMaxArrayDepth + 1), "deep.gguf"),
               Catch::Contains("nested deeper than"));
    // A million levels would overflow the stack if depth were unbounded.
    CHECK_THAT(parse_error(nested_array_file(1'000'000), "deeper.gguf"),
               Catch::Contains("nested deeper than"));
}

namespace {

// Appends little-endian scalars to a byte vector.
struct Bytes {
    std::vector<std::byte> out;
    template <class T>
    void put(T value) {
        const auto* p = reinterpret_cast<const std::byte*>(&value);
        out.insert(out.end(), p, p + sizeof(value));
    }
    void put_string(std::string_view s) {
        put(uint64_t{s.size()});
        for (char c : s) out.push_back(static_cast<std::byte>(c));
    }
    void header(uint64_t tensors, uint64_t keys) {
        for (char c : std::string("GGUF")) out.push_back(static_cast<std::byte>(c));
        put(uint32_t{3});
        put(tensors);
        put(keys);
    }
};

}  // namespace

TEST_CASE("a header whose parsed form would pass the metadata budget is refused, naming it") {
    // One key holding a million empty arrays: 12 bytes each in the file, an
    // Array object each in memory (~15x), so 12 MB of file would take ~180 MB.
    Bytes arrays;
    arrays.header(0, 1);
    arrays.put_string("k");
    arrays.put(uint32_t{9});  // ARRAY
    arrays.put(uint32_t{9});  // of ARRAY
    const uint64_t n_arrays = 1'000'000;
    arrays.put(n_arrays);
    for (uint64_t i = 0; i < n_arrays; ++i) {
        arrays.put(uint32_t{4});  // UINT32
        arrays.put(uint64_t{0});  // x 0
    }
    const std::string message = parse_error(arrays.out, "arrays.gguf");
    CHECK_THAT(message, Catch::Contains("1000000 nested arrays of key 'k'") &&
                            Catch::Contains("64 MiB") && Catch::Contains("metadata budget"));
    // The count field: 24 bytes of header, the key (8 + 1), its type and the element type.
    CHECK_THAT(message, Catch::Contains(at(24 + 9 + 4 + 4)));

    // A million keys of 21 bytes each: ~350 bytes each once parsed.
    Bytes keys;
    const uint64_t n_keys = 1'000'000;
    keys.header(0, n_keys);
    for (uint64_t i = 0; i < n_keys; ++i) {
        keys.put_string(fmt::format("k{:07}", i));
        keys.put(uint32_t{0});  // UINT8
        keys.put(uint8_t{1});
    }
    CHECK_THAT(parse_error(keys.out, "keys.gguf"),
               Catch::Contains("metadata entry #") && Catch::Contains("metadata budget"));
}

TEST_CASE("random byte corruption never crashes and every error names the file") {
    const Fixture f("all_types_v3");
    const auto seed = std::random_device{}();
    INFO("seed " << seed);
    std::printf("random corruption seed %u\n", seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> position(0, f.bytes.size() - 1);
    std::uniform_int_distribution<int> byte(1, 255);
    int refused = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        auto bytes = f.bytes;
        for (int flips = 0; flips < 1 + trial % 4; ++flips)
            bytes[position(rng)] ^= static_cast<std::byte>(byte(rng));
        auto file = gguf_test::parse_bytes(bytes, "random.gguf");
        if (!file) {
            ++refused;
            CHECK_THAT(file.error().message(), Catch::Contains("random.gguf: offset "));
        } else {
            for (const auto& t : file->tensors()) CHECK(gguf_test::fnv1a64(t.data()).size() == 16);
        }
    }
    CHECK(refused > 0);  // flips in the header region must be caught
}
