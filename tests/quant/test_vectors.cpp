// The reference against gguf's numpy dequantizers, bit for bit, and ferrox's
// kind table and grids against the gguf package's.
#include <bit>
#include <catch2/catch.hpp>
#include <string>

#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "iq_grids.h"
#include "vector_files.h"

using namespace ferrox;
using namespace ferrox::quant::testing;

TEST_CASE("every kind dequantizes gguf's golden blocks to the same float32 bits") {
    for (const KindTraits& kind : kAllKinds) {
        DYNAMIC_SECTION(kind.name) {
            const VectorFile file = read_dequantize_vectors(std::string(kind.name));
            REQUIRE(file.kind_id == static_cast<uint32_t>(kind.id));
            REQUIRE(file.block_elements == kind.block_elements);
            REQUIRE(file.block_bytes == kind.block_bytes);
            std::vector<float> actual(file.elements(), -12345.0f);
            REQUIRE(
                quant::dequantize_row(kind.id, file.blocks.data(), actual.data(), file.elements()));
            size_t mismatches = 0;
            for (size_t i = 0; i < actual.size(); ++i) {
                if (same_float(file.floats[i], actual[i])) continue;
                if (++mismatches <= 5)
                    UNSCOPED_INFO("element " << i << " (block " << i / kind.block_elements
                                             << "): expected bits 0x" << std::hex
                                             << std::bit_cast<uint32_t>(file.floats[i]) << " got 0x"
                                             << std::bit_cast<uint32_t>(actual[i]) << std::dec);
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("the golden data covers every kind and records where it came from") {
    const auto manifest = read_manifest();
    INFO("gguf " << manifest.at("gguf_version").get<std::string>() << ", numpy "
                 << manifest.at("numpy_version").get<std::string>());
    CHECK(manifest.at("dequantize").size() == kAllKinds.size());
    for (const KindTraits& kind : kAllKinds) {
        INFO(kind.name);
        CHECK(manifest.at("dequantize").contains(std::string(kind.name)));
    }
}

TEST_CASE(
    "kAllKinds block shapes equal gguf's GGML_QUANT_SIZES (and llama.cpp's, where it decoded)") {
    const auto manifest = read_manifest();
    const auto& sizes = manifest.at("gguf_quant_sizes");
    // The kinds whose vectors llama.cpp decoded (Q1_0): gen_vectors.py
    // recorded that library's ggml_type_traits block and type size too.
    for (const auto& [name, shape] : manifest.at("llama_cpp_type_sizes").items()) {
        INFO(name << " as llama.cpp's traits give it");
        const KindTraits* kind = kind_traits(name);
        REQUIRE(kind != nullptr);
        CHECK(shape.at(0).get<uint32_t>() == kind->block_elements);
        CHECK(shape.at(1).get<uint32_t>() == kind->block_bytes);
    }
    for (const KindTraits& kind : kAllKinds) {
        INFO(kind.name);
        const auto& gguf = sizes.at(std::string(kind.name));
        CHECK(gguf.at(0).get<uint32_t>() == kind.block_elements);
        // gguf-py lists Q8_1 with the old float32 d/s layout (40 bytes); ggml's
        // block_q8_1 has been f16 d + f16 s + 32 int8 = 36 bytes for years.
        if (kind.id == FERROX_KIND_Q8_1)
            CHECK(gguf.at(1).get<uint32_t>() == 40);
        else
            CHECK(gguf.at(1).get<uint32_t>() == kind.block_bytes);
    }
}

// Random blocks touch only some grid rows; this checks all of them.
template <class Row, size_t N>
void check_grid(const std::array<Row, N>& table, const std::string& name) {
    const auto entry = read_manifest().at("grids").at(name);
    const std::vector<uint8_t> grids = read_file(quant_data_dir() / "grids.bin");
    const auto rows = entry.at("rows").get<size_t>();
    const auto cols = entry.at("cols").get<size_t>();
    const auto offset = entry.at("offset").get<size_t>();
    INFO(name);
    REQUIRE(rows == N);
    REQUIRE(cols == sizeof(Row));
    REQUIRE(offset + rows * cols <= grids.size());
    size_t mismatches = 0;
    for (size_t r = 0; r < rows; ++r)
        for (unsigned c = 0; c < cols; ++c)
            if (quant::grids::grid_byte(table[r], c) != grids[offset + r * cols + c]) ++mismatches;
    CHECK(mismatches == 0);
}

TEST_CASE("the i-quant grid tables equal gguf's, every row") {
    check_grid(quant::grids::kIq2xxsGrid, "IQ2_XXS");
    check_grid(quant::grids::kIq2xsGrid, "IQ2_XS");
    check_grid(quant::grids::kIq2sGrid, "IQ2_S");
    check_grid(quant::grids::kIq3xxsGrid, "IQ3_XXS");
    check_grid(quant::grids::kIq3sGrid, "IQ3_S");
    check_grid(quant::grids::kIq1sGrid, "IQ1_S");
}
