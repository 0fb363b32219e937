// gemma4: per-layer geometry, shared KV layers, per-layer embeddings, experts
// beside the dense FFN.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ferrox/model/architecture.h"
#include "ferrox/model/capacity.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/hparams_summary.h"
#include "ferrox/model/rope_tables.h"
#include "hparams_fixtures.h"

using namespace ferrox;
using ferrox::test::gemma3_like;
using ferrox::test::llama_like;
using ferrox::test::TinyGguf;

namespace {

// Gemma 4 31B's attention in small: 6 layers (local, local, global, ...),
// sliding heads 32 wide over 2 KV heads, global heads 64 wide over 1.
TinyGguf gemma4_like() {
    auto g = llama_like("gemma4");
    g.without("gemma4.attention.head_count_kv")
        .i32_array("gemma4.attention.head_count_kv", {2, 2, 1, 2, 2, 1})
        .without("gemma4.block_count")
        .u32("gemma4.block_count", 6)
        .u32("gemma4.attention.key_length", 64)
        .u32("gemma4.attention.value_length", 64)
        .u32("gemma4.attention.key_length_swa", 32)
        .u32("gemma4.attention.value_length_swa", 32)
        .u32("gemma4.rope.dimension_count_swa", 32)
        .u32("gemma4.attention.sliding_window", 8)
        .bool_array("gemma4.attention.sliding_window_pattern",
                    {true, true, false, true, true, false})
        .u32("gemma4.embedding_length_per_layer_input", 0);
    return g;
}

// The error of reading gemma4_like() with `key` set to `value`.
std::string gemma4_refusal(const std::string& key, uint32_t value) {
    return test::refusal_of(gemma4_like(), key, value);
}

}  // namespace

TEST_CASE("gemma4's sliding layers have their own head size and KV heads, each refusal by key") {
    auto file = gemma4_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->head_dim_k == 64);
    CHECK(hp->n_head_kv == 2);  // the largest; each layer's own below
    for (uint32_t il : {0u, 1u, 3u, 4u}) {
        CHECK(hp->layer_head_dim_k(il) == 32);
        CHECK(hp->layer_head_dim_v(il) == 32);
        CHECK(hp->layer_n_rot(il) == 32);
        CHECK(hp->layer_n_head_kv(il) == 2);
    }
    for (uint32_t il : {2u, 5u}) {
        CHECK(hp->layer_head_dim_k(il) == 64);
        CHECK(hp->layer_n_rot(il) == 64);
        CHECK(hp->layer_n_head_kv(il) == 1);
    }
    // K and V of one position: 4 sliding layers x 2 heads x 64, 2 global x 1 x 128.
    CHECK(hp->kv_cell_elements() == 4 * 2 * 64 + 2 * 1 * 128);
    model::CapacityInputs in;
    in.cell_elements_k = hp->kv_cell_elements_k();
    in.cell_elements_v = hp->kv_cell_elements_v();
    in.context = 10;
    CHECK(model::kv_cache_bytes(in) == 10 * (4 * 2 * 64 + 2 * 1 * 128) * 4);

    // Still refused, each naming its key: a sliding head of odd size or of
    // different k and v sizes, a rotated width of the sliding heads' own
    // (partial RoPE there).
    CHECK_THAT(gemma4_refusal("gemma4.attention.key_length_swa", 31),
               Catch::Contains("gemma4.attention.key_length_swa"));
    CHECK_THAT(gemma4_refusal("gemma4.attention.value_length_swa", 16),
               Catch::Contains("gemma4.attention.key_length_swa"));
    CHECK_THAT(gemma4_refusal("gemma4.rope.dimension_count_swa", 16),
               Catch::Contains("gemma4.rope.dimension_count_swa"));

    const auto refused_by = [](TinyGguf g, const std::string& key) {
        auto f = g.parse();
        REQUIRE(f);
        auto r = model::read_hparams(*f);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message(), Catch::Contains(key));
    };
    // A KV head count per layer: one value for each layer, each dividing head_count.
    refused_by(gemma4_like()
                   .without("gemma4.attention.head_count_kv")
                   .i32_array("gemma4.attention.head_count_kv", {2, 2, 1}),
               "gemma4.attention.head_count_kv");
    refused_by(gemma4_like()
                   .without("gemma4.attention.head_count_kv")
                   .i32_array("gemma4.attention.head_count_kv", {2, 2, 3, 2, 2, 1}),
               "gemma4.attention.head_count_kv");
    // A shared layer whose KV heads differ from those of the cache it reads.
    // (Layers 4 and 5 share layers 2's and 3's caches, of their kinds.)
    refused_by(gemma4_like()
                   .without("gemma4.attention.sliding_window_pattern")
                   .bool_array("gemma4.attention.sliding_window_pattern",
                               {true, true, true, false, true, false})
                   .without("gemma4.attention.head_count_kv")
                   .i32_array("gemma4.attention.head_count_kv", {2, 2, 2, 1, 1, 1})
                   .u32("gemma4.attention.shared_kv_layers", 2),
               "gemma4.attention.head_count_kv");
    // The FFN width per layer: one value for each layer.
    refused_by(gemma4_like()
                   .without("gemma4.feed_forward_length")
                   .i32_array("gemma4.feed_forward_length", {128, 256}),
               "gemma4.feed_forward_length");
    auto wide = gemma4_like()
                    .without("gemma4.feed_forward_length")
                    .i32_array("gemma4.feed_forward_length", {128, 128, 128, 128, 256, 256})
                    .parse();
    REQUIRE(wide);
    auto wide_hp = model::read_hparams(*wide);
    REQUIRE(wide_hp);
    CHECK(wide_hp->layer_n_ff(0) == 128);
    CHECK(wide_hp->layer_n_ff(5) == 256);
    CHECK(wide_hp->n_ff == 256);
}

TEST_CASE("gemma4's experts run beside its dense FFN, each size read by key and bounded") {
    const auto with_experts = [] {
        return gemma4_like()
            .u32("gemma4.expert_count", 8)
            .u32("gemma4.expert_used_count", 2)
            .u32("gemma4.expert_feed_forward_length", 64);
    };
    auto file = with_experts().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->n_expert == 8);
    CHECK(hp->n_expert_used == 2);
    CHECK(hp->n_ff_expert == 64);
    CHECK(hp->n_ff > 0);  // the dense branch keeps its width beside the experts
    CHECK(hp->expert_weights_norm);
    for (uint32_t il = 0; il < hp->n_layer; ++il) CHECK(hp->expert_layer(il));
    // llama.cpp's gemma4 graph renormalises whatever the key says.
    auto unnormed = with_experts().boolean("gemma4.expert_weights_norm", false).parse();
    REQUIRE(unnormed);
    auto unnormed_hp = model::read_hparams(*unnormed);
    REQUIRE(unnormed_hp);
    CHECK(unnormed_hp->expert_weights_norm);

    const auto refused_by = [](TinyGguf g, const std::string& key) {
        auto f = g.parse();
        REQUIRE(f);
        auto r = model::read_hparams(*f);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message(), Catch::Contains(key));
    };
    refused_by(with_experts().without("gemma4.expert_count").u32("gemma4.expert_count", 5000),
               "gemma4.expert_count");
    refused_by(
        with_experts().without("gemma4.expert_used_count").u32("gemma4.expert_used_count", 9),
        "gemma4.expert_used_count");
    refused_by(with_experts().without("gemma4.expert_used_count"), "gemma4.expert_used_count");
    refused_by(with_experts()
                   .without("gemma4.expert_feed_forward_length")
                   .u32("gemma4.expert_feed_forward_length", 0),
               "gemma4.expert_feed_forward_length");
    refused_by(with_experts().without("gemma4.expert_feed_forward_length"),
               "gemma4.expert_feed_forward_length");
    // expert_count 0: the dense layers alone, as before.
    auto dense = gemma4_like().u32("gemma4.expert_count", 0).parse();
    REQUIRE(dense);
    auto dense_hp = model::read_hparams(*dense);
    REQUIRE(dense_hp);
    CHECK(dense_hp->n_expert == 0);
}
