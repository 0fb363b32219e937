// llama4's row: iRoPE (chunked rotated layers, every fourth without RoPE and
// with the attention temperature), the q/k L2 norm, experts on the input and
// Maverick's dense layers between the expert ones; its bad keys.
#include <catch2/catch.hpp>
#include <string>

#include "ferrox/model/architecture.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/hparams_summary.h"
#include "hparams_fixtures.h"

using namespace ferrox;
using ferrox::test::llama_like;
using ferrox::test::refusal_of;
using ferrox::test::refused_by;
using ferrox::test::TinyGguf;

namespace {

// Scout-shaped: 8 layers, 16 experts, every layer with experts.
TinyGguf scout() {
    return llama_like("llama4")
        .u32("llama4.expert_count", 16)
        .u32("llama4.expert_used_count", 1)
        .u32("llama4.expert_feed_forward_length", 32)
        .u32("llama4.interleave_moe_layer_step", 1);
}

}  // namespace

TEST_CASE("llama4: chunks of 8192 on the rotated layers, the temperature on the others") {
    auto file = scout().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->attn_chunk == 8192);  // llama.cpp's constant: no key states it
    for (uint32_t il = 0; il < 8; ++il) {
        CHECK(hp->has_rope(il) == ((il + 1) % 4 != 0));
        CHECK(hp->is_chunked_layer(il) == hp->has_rope(il));
        CHECK(hp->expert_layer(il));
    }
    CHECK(model::layer_pattern(*hp) == "CCCgCCCg");
    CHECK(hp->attn_temp_nope);
    CHECK(hp->attn_temp_scale == 0.1f);
    CHECK(hp->attn_temp_length == 8192);
    CHECK(hp->attn_temp_offset == 1.0f);
    CHECK(hp->qk_l2_norm);  // 16 experts: Scout
    CHECK(hp->moe_gating == model::MoeGating::Sigmoid);
    CHECK_FALSE(hp->expert_weights_norm);
    CHECK(hp->n_ff_shared == 32);  // one shared expert, a routed one's width
    CHECK(hp->n_ff == 0);          // no dense layer
}

TEST_CASE("llama4: Maverick's dense layers between the expert ones, and no L2 norm at 128") {
    auto file = scout()
                    .without("llama4.expert_count")
                    .u32("llama4.expert_count", 128)
                    .without("llama4.interleave_moe_layer_step")
                    .u32("llama4.interleave_moe_layer_step", 2)
                    .parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    for (uint32_t il = 0; il < 8; ++il) CHECK(hp->expert_layer(il) == (il % 2 == 1));
    CHECK(hp->n_ff == 128);       // the dense layers' feed_forward_length
    CHECK_FALSE(hp->qk_l2_norm);  // llama.cpp knows Maverick by its 128 experts
}

TEST_CASE("llama4: a chunk, pattern or interleave other than llama.cpp's is refused by key") {
    // 0: MobileLLM-R1's layout (no chunks); any other value llama.cpp would replace by 8192.
    refused_by(scout().u32("llama4.attention.sliding_window", 0), "llama4.attention.sliding_window",
               "is 0");
    refused_by(scout().u32("llama4.attention.sliding_window", 16),
               "llama4.attention.sliding_window", "16 is not 8192");
    refused_by(scout().u32("llama4.attention.sliding_window", 0xffffffffu),
               "llama4.attention.sliding_window", "is not 8192");
    // The file may state llama.cpp's own value.
    auto same = scout().u32("llama4.attention.sliding_window", 8192).parse();
    REQUIRE(same);
    CHECK(model::read_hparams(*same));
    refused_by(scout().u32("llama4.attention.sliding_window_pattern", 2),
               "llama4.attention.sliding_window_pattern", "2 is not 4");
    CHECK_THAT(refusal_of(scout(), "llama4.interleave_moe_layer_step", 0),
               Catch::Contains("llama4.interleave_moe_layer_step") &&
                   Catch::Contains("no layer would run experts"));
    CHECK_THAT(refusal_of(scout(), "llama4.interleave_moe_layer_step", 9),
               Catch::Contains("llama4.interleave_moe_layer_step"));
    refused_by(scout()
                   .without("llama4.feed_forward_length")
                   .without("llama4.interleave_moe_layer_step")
                   .u32("llama4.interleave_moe_layer_step", 2),
               "llama4.feed_forward_length", "dense");
    refused_by(scout().without("llama4.interleave_moe_layer_step"),
               "llama4.interleave_moe_layer_step", "");
}
