// The reader against files written by the `gguf` Python package: every key,
// value, tensor and byte must match the sidecar the package's reader produced.
#include <catch2/catch.hpp>

#include "ferrox/quant_kind.h"
#include "gguf_test_support.h"

using ferrox::gguf::Array;
using ferrox::gguf::File;
using ferrox::gguf::Value;
using ferrox::gguf::ValueType;
using nlohmann::json;

namespace {

const std::vector<std::string> kFixtures = {"all_types_v3", "aligned64_v3", "small_v2",
                                            "metadata_only_v3"};

template <class T>
void check_scalar(const Value& value, const json& want) {
    REQUIRE(std::holds_alternative<T>(value));
    if constexpr (std::is_floating_point_v<T>) {
        // The sidecar holds the exact stored value, so equality is the right test.
        CHECK(std::get<T>(value) == static_cast<T>(want.get<double>()));
    } else {
        CHECK(std::get<T>(value) == want.get<T>());
    }
}

void check_value(const Value& value, const json& want, const std::string& where) {
    INFO(where);
    const std::string type = want.at("type");
    REQUIRE(std::string(value_type_name(type_of(value))) == type);
    switch (type_of(value)) {
        case ValueType::UInt8:
            return check_scalar<uint8_t>(value, want["value"]);
        case ValueType::Int8:
            return check_scalar<int8_t>(value, want["value"]);
        case ValueType::UInt16:
            return check_scalar<uint16_t>(value, want["value"]);
        case ValueType::Int16:
            return check_scalar<int16_t>(value, want["value"]);
        case ValueType::UInt32:
            return check_scalar<uint32_t>(value, want["value"]);
        case ValueType::Int32:
            return check_scalar<int32_t>(value, want["value"]);
        case ValueType::UInt64:
            return check_scalar<uint64_t>(value, want["value"]);
        case ValueType::Int64:
            return check_scalar<int64_t>(value, want["value"]);
        case ValueType::Float32:
            return check_scalar<float>(value, want["value"]);
        case ValueType::Float64:
            return check_scalar<double>(value, want["value"]);
        case ValueType::Bool:
            return check_scalar<bool>(value, want["value"]);
        case ValueType::String:
            CHECK(std::get<std::string>(value) == want["value"].get<std::string>());
            return;
        case ValueType::Array: {
            const Array& array = std::get<Array>(value);
            CHECK(std::string(value_type_name(array.element_type())) ==
                  want["element_type"].get<std::string>());
            const json& items = want["items"];
            REQUIRE(array.size() == items.size());
            for (std::size_t i = 0; i < items.size(); ++i)
                check_value(array.at(i), items[i], where + "[" + std::to_string(i) + "]");
            return;
        }
    }
    FAIL("unknown value type");
}

}  // namespace

TEST_CASE("every metadata entry matches what the gguf package wrote, in file order") {
    for (const auto& fixture : kFixtures) {
        INFO(fixture);
        const json want = gguf_test::sidecar(fixture);
        auto file = File::open(gguf_test::fixture_dir() / (fixture + ".gguf"));
        REQUIRE(file.has_value());
        CHECK(file->version() == want["version"].get<uint32_t>());
        CHECK(file->alignment() == want["alignment"].get<uint32_t>());
        CHECK(file->data_offset() == want["data_offset"].get<uint64_t>());
        REQUIRE(file->metadata().size() == want["metadata"].size());
        for (std::size_t i = 0; i < want["metadata"].size(); ++i) {
            const json& kv = want["metadata"][i];
            CHECK(file->metadata()[i].key == kv["key"].get<std::string>());
            CHECK(file->metadata()[i].offset == kv["key_at"].get<uint64_t>());
            const Value* found = file->find(kv["key"].get<std::string>());
            REQUIRE(found != nullptr);
            check_value(*found, kv, kv["key"].get<std::string>());
        }
    }
}

TEST_CASE("every tensor's kind, shape, offset and bytes match what the gguf package wrote") {
    for (const auto& fixture : kFixtures) {
        INFO(fixture);
        const json want = gguf_test::sidecar(fixture);
        auto file = File::open(gguf_test::fixture_dir() / (fixture + ".gguf"));
        REQUIRE(file.has_value());
        REQUIRE(file->tensors().size() == want["tensors"].size());
        const auto mapped = file->mapping()->bytes();
        for (std::size_t i = 0; i < want["tensors"].size(); ++i) {
            const json& t = want["tensors"][i];
            const auto& tensor = file->tensors()[i];
            INFO(t["name"].get<std::string>());
            CHECK(tensor.name() == t["name"].get<std::string>());
            CHECK(static_cast<uint32_t>(tensor.kind()) == t["type_id"].get<uint32_t>());
            CHECK(std::string(ferrox::kind_name(tensor.kind())) == t["type"].get<std::string>());
            const auto shape = t["shape"].get<std::vector<uint64_t>>();
            CHECK(std::vector<uint64_t>(tensor.shape().begin(), tensor.shape().end()) == shape);
            CHECK(tensor.element_count() == t["n_elements"].get<uint64_t>());
            CHECK(tensor.byte_size() == t["byte_size"].get<uint64_t>());
            CHECK(tensor.file_offset() == t["file_offset"].get<uint64_t>());
            CHECK(gguf_test::fnv1a64(tensor.data()) == t["fnv1a64"].get<std::string>());
            // Zero-copy: the span points into the mapping itself.
            CHECK(tensor.data().data() == mapped.data() + t["file_offset"].get<uint64_t>());
            CHECK(tensor.mapping() == file->mapping());
            CHECK(file->find_tensor(tensor.name()) == &tensor);
        }
        CHECK(file->find_tensor("no.such.tensor") == nullptr);
    }
}

TEST_CASE("tensor data of a real mapping is aligned to the file's alignment") {
    auto file = File::open(gguf_test::fixture_dir() / "aligned64_v3.gguf");
    REQUIRE(file.has_value());
    REQUIRE(file->mapping()->is_file_mapping());
    for (const auto& tensor : file->tensors())
        CHECK(reinterpret_cast<uintptr_t>(tensor.data().data()) % 64 == 0);
}

TEST_CASE("typed getters return the value, convert integers that fit, and name key and file") {
    auto file = File::open(gguf_test::fixture_dir() / "all_types_v3.gguf");
    REQUIRE(file.has_value());
    CHECK(*file->get_u32("ferroxtest.context_length") == 4096u);
    CHECK(*file->get_u32("test.u8") == 200u);  // any integer that fits
    CHECK(*file->get_i64("test.i64") == -(int64_t{1} << 62) - 3);
    CHECK(*file->get_u64("test.u64") == (uint64_t{1} << 63) + 5);
    CHECK(*file->get_i32("test.i16") == -30000);
    CHECK(*file->get_f32("ferroxtest.rope.freq_base") == 10000.0f);
    CHECK(*file->get_f32("test.f64") == static_cast<float>(0.1));
    CHECK(*file->get_bool("test.bool_true"));
    CHECK_FALSE(*file->get_bool("test.bool_false"));
    CHECK(*file->get_string("general.architecture") == "ferroxtest");
    CHECK(*file->get_string_array("tokenizer.ggml.tokens") ==
          std::vector<std::string>{"<s>", "</s>", "hello", " world"});
    CHECK(*file->get_f32_array("tokenizer.ggml.scores") ==
          std::vector<float>{0.0f, -1.0f, -2.5f, -3.75f});
    CHECK(*file->get_i32_array("tokenizer.ggml.token_type") == std::vector<int32_t>{3, 3, 1, 1});
    CHECK(*file->get_u32_array("test.arr.u16") == std::vector<uint32_t>{1, 65535});

    const auto negative = file->get_u32("test.i32");
    REQUIRE_FALSE(negative.has_value());
    CHECK_THAT(negative.error().message(), Catch::Contains("test.i32") &&
                                               Catch::Contains("all_types_v3.gguf") &&
                                               Catch::Contains("INT32"));
    const auto absent = file->get_string("no.such.key");
    REQUIRE_FALSE(absent.has_value());
    CHECK_THAT(absent.error().message(),
               Catch::Contains("no.such.key") && Catch::Contains("missing"));
    CHECK_FALSE(file->get_string("test.u32").has_value());
    CHECK_FALSE(file->get_f32_array("test.arr.string").has_value());
    CHECK_FALSE(file->get_i32_array("test.arr.u64").has_value());  // 2^64-1 does not fit

    CHECK(*file->get_u32_or("no.such.key", 7) == 7u);
    CHECK(*file->get_f32_or("no.such.key", 0.5f) == 0.5f);
    CHECK(*file->get_bool_or("no.such.key", true));
    CHECK(*file->get_string_or("no.such.key", "x") == "x");
    CHECK(*file->get_u32_or("ferroxtest.context_length", 7) == 4096u);
    CHECK_FALSE(file->get_u32_or("test.string", 7).has_value());  // present, wrong type
}

TEST_CASE("scalar arrays decode through as_vector and refuse a mismatched element type") {
    auto file = File::open(gguf_test::fixture_dir() / "all_types_v3.gguf");
    REQUIRE(file.has_value());
    const auto& i64s = std::get<Array>(*file->find("test.arr.i64"));
    CHECK(*i64s.as_vector<int64_t>() == std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                             std::numeric_limits<int64_t>::max()});
    CHECK_FALSE(i64s.as_vector<uint64_t>().has_value());
    const auto& bools = std::get<Array>(*file->find("test.arr.bool"));
    CHECK(*bools.as_vector<bool>() == std::vector<bool>{true, false, true});
    const auto& nested = std::get<Array>(*file->find("test.arr.nested3"));
    REQUIRE(nested.arrays().size() == 2);
    CHECK(*nested.arrays()[0].arrays()[1].as_vector<int32_t>() == std::vector<int32_t>{2, 3});
    CHECK(ferrox::gguf::to_display_string(*file->find("test.arr.u8")) == "[UINT8 x 3: 0, 1, 255]");
}

TEST_CASE("a tensor keeps its mapping alive after the File that parsed it is gone") {
    const json want = gguf_test::sidecar("all_types_v3");
    std::optional<ferrox::gguf::Tensor> kept;
    {
        auto file = File::open(gguf_test::fixture_dir() / "all_types_v3.gguf");
        REQUIRE(file.has_value());
        kept = *file->find_tensor("q8_0.weight");
    }
    const auto& t = want["tensors"][7];
    REQUIRE(t["name"] == "q8_0.weight");
    CHECK(gguf_test::fnv1a64(kept->data()) == t["fnv1a64"].get<std::string>());
}

TEST_CASE("metadata arrays read in place keep their mapping alive after the File is gone") {
    // Arrays (strings, scalars, nested) view the mapping rather than copy it:
    // a Value copied out must still read what the gguf package wrote once the
    // File and every other holder of the mapping are gone (ASan would see a
    // dangling view).
    const json want = gguf_test::sidecar("all_types_v3");
    std::vector<std::pair<Value, json>> kept;
    {
        auto file = File::open(gguf_test::fixture_dir() / "all_types_v3.gguf");
        REQUIRE(file.has_value());
        for (const json& kv : want["metadata"])
            if (const Value* v = file->find(kv["key"].get<std::string>());
                v && std::holds_alternative<Array>(*v))
                kept.emplace_back(*v, kv);
    }
    REQUIRE(kept.size() >= 5);
    for (const auto& [value, kv] : kept) check_value(value, kv, kv["key"].get<std::string>());
}

TEST_CASE("an in-memory copy parses exactly like the mapped file") {
    const auto path = gguf_test::fixture_dir() / "small_v2.gguf";
    auto mapped = File::open(path);
    auto copied = gguf_test::parse_bytes(gguf_test::read_bytes(path), "in-memory.gguf");
    REQUIRE(mapped.has_value());
    REQUIRE(copied.has_value());
    CHECK_FALSE(copied->mapping()->is_file_mapping());
    REQUIRE(mapped->tensors().size() == copied->tensors().size());
    for (std::size_t i = 0; i < mapped->tensors().size(); ++i)
        CHECK(gguf_test::fnv1a64(mapped->tensors()[i].data()) ==
              gguf_test::fnv1a64(copied->tensors()[i].data()));
}
