// Small GGUF headers the hyper-parameter tests start from (test_hparams*.cpp):
// each test adds, removes or changes the keys it is about.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "ferrox/model/hparams.h"
#include "tiny_gguf.h"

namespace ferrox::test {

inline TinyGguf gemma3_like() {
    TinyGguf g;
    g.str("general.architecture", "gemma3")
        .u32("gemma3.context_length", 32768)
        .u32("gemma3.embedding_length", 64)
        .u32("gemma3.block_count", 12)
        .u32("gemma3.feed_forward_length", 128)
        .u32("gemma3.attention.head_count", 4)
        .u32("gemma3.attention.head_count_kv", 1)
        .u32("gemma3.attention.key_length", 32)
        .u32("gemma3.attention.value_length", 32)
        .f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f)
        .f32("gemma3.rope.freq_base", 1e6f)
        .u32("gemma3.attention.sliding_window", 512)
        .tensor("token_embd.weight", 64, 10, 0.5f);
    return g;
}

// A llama-shaped header under another architecture's prefix.
inline TinyGguf llama_like(const std::string& arch) {
    TinyGguf g;
    g.str("general.architecture", arch)
        .u32(arch + ".context_length", 4096)
        .u32(arch + ".embedding_length", 64)
        .u32(arch + ".block_count", 8)
        .u32(arch + ".feed_forward_length", 128)
        .u32(arch + ".attention.head_count", 4)
        .u32(arch + ".attention.head_count_kv", 2)
        .f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f)
        .tensor("token_embd.weight", 64, 10, 0.5f);
    return g;
}

// The error read_hparams gives for `g` (the test fails where it reads).
inline std::string refusal_of(const TinyGguf& g) {
    auto file = g.parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE_FALSE(hp);
    return hp.error().message();
}

// The same, with `key` set to `value`.
inline std::string refusal_of(TinyGguf g, const std::string& key, uint32_t value) {
    g.without(key).u32(key, value);
    return refusal_of(g);
}

// `g` is refused with a message naming `key` and saying `why`.
inline void refused_by(const TinyGguf& g, const std::string& key, const std::string& why) {
    CHECK_THAT(refusal_of(g), Catch::Contains(key) && Catch::Contains(why));
}

}  // namespace ferrox::test
