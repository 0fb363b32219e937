// The one table of quant kinds ferrox knows: GGML id, GGUF name, block shape.
// Everything else (name lookup, row sizes, "is this a known kind") derives from it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ferrox/backend_abi.h"

namespace ferrox {

struct KindTraits {
    ferrox_kind id;
    std::string_view name;    // as GGUF and llama.cpp print it
    uint32_t block_elements;  // weights per block (1 for plain floats)
    uint32_t block_bytes;     // bytes per block
};

inline constexpr std::array<KindTraits, 29> kAllKinds{{
    {FERROX_KIND_F32, "F32", 1, 4},           {FERROX_KIND_F16, "F16", 1, 2},
    {FERROX_KIND_BF16, "BF16", 1, 2},         {FERROX_KIND_Q4_0, "Q4_0", 32, 18},
    {FERROX_KIND_Q4_1, "Q4_1", 32, 20},       {FERROX_KIND_Q5_0, "Q5_0", 32, 22},
    {FERROX_KIND_Q5_1, "Q5_1", 32, 24},       {FERROX_KIND_Q8_0, "Q8_0", 32, 34},
    {FERROX_KIND_Q8_1, "Q8_1", 32, 36},       {FERROX_KIND_Q2_K, "Q2_K", 256, 84},
    {FERROX_KIND_Q3_K, "Q3_K", 256, 110},     {FERROX_KIND_Q4_K, "Q4_K", 256, 144},
    {FERROX_KIND_Q5_K, "Q5_K", 256, 176},     {FERROX_KIND_Q6_K, "Q6_K", 256, 210},
    {FERROX_KIND_Q8_K, "Q8_K", 256, 292},     {FERROX_KIND_IQ2_XXS, "IQ2_XXS", 256, 66},
    {FERROX_KIND_IQ2_XS, "IQ2_XS", 256, 74},  {FERROX_KIND_IQ3_XXS, "IQ3_XXS", 256, 98},
    {FERROX_KIND_IQ1_S, "IQ1_S", 256, 50},    {FERROX_KIND_IQ4_NL, "IQ4_NL", 32, 18},
    {FERROX_KIND_IQ3_S, "IQ3_S", 256, 110},   {FERROX_KIND_IQ2_S, "IQ2_S", 256, 82},
    {FERROX_KIND_IQ4_XS, "IQ4_XS", 256, 136}, {FERROX_KIND_IQ1_M, "IQ1_M", 256, 56},
    {FERROX_KIND_MXFP4, "MXFP4", 32, 17},     {FERROX_KIND_TQ1_0, "TQ1_0", 256, 54},
    {FERROX_KIND_TQ2_0, "TQ2_0", 256, 66},    {FERROX_KIND_NVFP4, "NVFP4", 64, 36},
    {FERROX_KIND_Q1_0, "Q1_0", 128, 18},
}};

// nullptr for an id ferrox does not know (a retired or future GGML type).
constexpr const KindTraits* kind_traits(uint32_t id) {
    for (const auto& k : kAllKinds)
        if (static_cast<uint32_t>(k.id) == id) return &k;
    return nullptr;
}

// By name, ignoring ASCII case: "q4_k" is Q4_K, as llama.cpp's tools spell it.
constexpr const KindTraits* kind_traits(std::string_view name) {
    const auto lower = [](char c) {
        return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    for (const auto& k : kAllKinds) {
        if (k.name.size() != name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < name.size() && same; ++i) same = lower(k.name[i]) == lower(name[i]);
        if (same) return &k;
    }
    return nullptr;
}

// A kind's block shape as compile-time constants, for kernels written as
// templates over it (int: they index with it). A kind the table lacks does
// not compile.
template <ferrox_kind Kind>
struct KindBlock {
    static constexpr ferrox_kind kKind = Kind;
    static constexpr int kElements =
        static_cast<int>(kind_traits(static_cast<uint32_t>(Kind))->block_elements);
    static constexpr int kBytes =
        static_cast<int>(kind_traits(static_cast<uint32_t>(Kind))->block_bytes);
};

constexpr std::string_view kind_name(ferrox_kind kind) {
    const KindTraits* k = kind_traits(static_cast<uint32_t>(kind));
    return k ? k->name : std::string_view{"?"};
}

constexpr bool is_float_kind(ferrox_kind kind) {
    return kind == FERROX_KIND_F32 || kind == FERROX_KIND_F16 || kind == FERROX_KIND_BF16;
}

// Bytes of one row of `elements` weights, or nullopt when the row is not a
// whole number of blocks (or the kind is unknown).
constexpr std::optional<uint64_t> row_bytes(ferrox_kind kind, uint64_t elements) {
    const KindTraits* k = kind_traits(static_cast<uint32_t>(kind));
    if (!k || elements % k->block_elements != 0) return std::nullopt;
    return elements / k->block_elements * k->block_bytes;
}

}  // namespace ferrox
