// The hybrid rows' layer kinds: qwen35moe's listed recurrent layers and MTP
// block; lfm2's short convolutions (0 KV heads) and lfm2moe's experts.
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
using ferrox::test::refused_by;
using ferrox::test::TinyGguf;

namespace {

// Qwen3.6-35B-A3B's key layout, shaped small: 4 blocks run and an MTP block,
// the recurrent layers listed as current converters write them, 8 experts of
// 32 and a gated shared expert of 48.
TinyGguf qwen35moe_like() {
    TinyGguf g = llama_like("qwen35moe");
    g.without("qwen35moe.block_count")
        .u32("qwen35moe.block_count", 5)
        .u32("qwen35moe.nextn_predict_layers", 1)
        .u32("qwen35moe.attention.key_length", 16)
        .u32("qwen35moe.attention.value_length", 16)
        .u32("qwen35moe.rope.dimension_count", 8)
        .i32_array("qwen35moe.rope.dimension_sections", {2, 1, 1, 0})
        .u32("qwen35moe.ssm.conv_kernel", 4)
        .u32("qwen35moe.ssm.state_size", 16)
        .u32("qwen35moe.ssm.inner_size", 64)
        .u32("qwen35moe.ssm.time_step_rank", 4)
        .u32("qwen35moe.ssm.group_count", 2)
        .u32("qwen35moe.full_attention_interval", 4)
        .bool_array("qwen35moe.attention.recurrent_layers", {true, false, true, true, false})
        .u32("qwen35moe.expert_count", 8)
        .u32("qwen35moe.expert_used_count", 2)
        .u32("qwen35moe.expert_feed_forward_length", 32)
        .u32("qwen35moe.expert_shared_feed_forward_length", 48);
    return g;
}

}  // namespace

TEST_CASE(
    "qwen35moe: listed recurrent layers, the MTP block kept, the gated shared expert's width") {
    auto file = qwen35moe_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->n_layer == 4);  // the MTP block is kept, not run
    CHECK(hp->n_layer_nextn == 1);
    // The list wins over full_attention_interval's pattern (RRRG), as in llama.cpp.
    CHECK(model::layer_pattern(*hp) == "RGRR");
    CHECK(hp->full_attention_interval == 0);
    CHECK(hp->n_ff_shared == 48);
    CHECK(hp->n_expert_shared == 0);
    CHECK(hp->expert_weights_norm);  // softmax, renormalised top k (llama.cpp's norm_w)
    CHECK(hp->moe_gating == model::MoeGating::Softmax);

    // Without the list: full_attention_interval's pattern.
    auto interval = qwen35moe_like().without("qwen35moe.attention.recurrent_layers").parse();
    REQUIRE(interval);
    auto hi = model::read_hparams(*interval);
    REQUIRE(hi);
    CHECK(model::layer_pattern(*hi) == "RRRG");
    // Without expert_shared_feed_forward_length: feed_forward_length, llama.cpp's fallback.
    auto fallback = qwen35moe_like().without("qwen35moe.expert_shared_feed_forward_length").parse();
    REQUIRE(fallback);
    auto hf = model::read_hparams(*fallback);
    REQUIRE(hf);
    CHECK(hf->n_ff_shared == 128);

    const std::string list = "qwen35moe.attention.recurrent_layers";
    // One entry per block (the MTP block's included), the MTP block never recurrent, bools.
    refused_by(qwen35moe_like().without(list).bool_array(list, {true, false, true, true}), list,
               "4 values for block_count 5");
    refused_by(qwen35moe_like().without(list).bool_array(list, {true, false, true, true, true}),
               list, "NextN block");
    refused_by(qwen35moe_like().without(list).i32_array(list, {1, 0, 1, 1, 0}), list,
               "ARRAY of BOOL");
    // No width for the shared expert at all.
    refused_by(qwen35moe_like()
                   .without("qwen35moe.expert_shared_feed_forward_length")
                   .without("qwen35moe.feed_forward_length"),
               "qwen35moe.feed_forward_length", "missing");
    refused_by(qwen35moe_like()
                   .without("qwen35moe.expert_shared_feed_forward_length")
                   .without("qwen35moe.feed_forward_length")
                   .u32("qwen35moe.feed_forward_length", 0),
               "qwen35moe.feed_forward_length", "width");
}

namespace {

// LFM2-350M's key layout, shaped small: 6 layers, attention on 2 and 5.
TinyGguf lfm2_like(std::vector<int32_t> kv_heads = {0, 0, 2, 0, 0, 2}) {
    TinyGguf g;
    g.str("general.architecture", "lfm2")
        .u32("lfm2.context_length", 4096)
        .u32("lfm2.embedding_length", 64)
        .u32("lfm2.block_count", static_cast<uint32_t>(kv_heads.size()))
        .u32("lfm2.feed_forward_length", 128)
        .u32("lfm2.attention.head_count", 4)
        .i32_array("lfm2.attention.head_count_kv", kv_heads)
        .u32("lfm2.shortconv.l_cache", 3)
        .f32("lfm2.attention.layer_norm_rms_epsilon", 1e-5f)
        .tensor("token_embd.weight", 64, 10, 0.5f);
    return g;
}

}  // namespace

TEST_CASE("lfm2: a layer with 0 KV heads is a short convolution over n_embd channels") {
    auto file = lfm2_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->arch == model::find_architecture("lfm2"));
    CHECK(model::layer_pattern(*hp) == "RRGRRG");
    CHECK(hp->n_head_kv == 2);
    CHECK(hp->head_dim_k == 16);  // embedding_length / head_count, the format's default
    CHECK(hp->ssm_conv_kernel == 3);
    CHECK(hp->ssm_conv_dim() == 64);  // the window holds b * x, n_embd wide
    CHECK(hp->ssm_v_heads == 0);      // no delta-rule state
    CHECK(hp->arch->output_norm_tensor == "token_embd_norm.weight");

    const std::string kv = "lfm2.attention.head_count_kv";
    refused_by(lfm2_like({0, 0, 2, 0, 0, 1}), kv, "one count");
    refused_by(lfm2_like({0, 0, 0, 0}), kv, "no layer attends");
    refused_by(lfm2_like({0, 0, 3, 0}), kv, "does not divide");
    refused_by(lfm2_like({0, 2, 0}).without("lfm2.block_count").u32("lfm2.block_count", 4), kv,
               "3 values for 4 layers");
    const std::string window = "lfm2.shortconv.l_cache";
    refused_by(lfm2_like().without(window), window, "missing");
    refused_by(lfm2_like().without(window).u32(window, 1), window, "not in 2..64");
    refused_by(lfm2_like().without(window).u32(window, 65), window, "not in 2..64");
}

TEST_CASE("lfm2moe: leading dense FFNs, then sigmoid-gated experts renormalised whatever the key") {
    const auto moe = [] {
        TinyGguf g;
        g.str("general.architecture", "lfm2moe")
            .u32("lfm2moe.context_length", 4096)
            .u32("lfm2moe.embedding_length", 64)
            .u32("lfm2moe.block_count", 4)
            .u32("lfm2moe.feed_forward_length", 128)
            .u32("lfm2moe.attention.head_count", 4)
            .i32_array("lfm2moe.attention.head_count_kv", {0, 0, 2, 0})
            .u32("lfm2moe.shortconv.l_cache", 3)
            .f32("lfm2moe.attention.layer_norm_rms_epsilon", 1e-5f)
            .u32("lfm2moe.expert_count", 8)
            .u32("lfm2moe.expert_used_count", 2)
            .u32("lfm2moe.expert_feed_forward_length", 32)
            .u32("lfm2moe.leading_dense_block_count", 1)
            .u32("lfm2moe.expert_gating_func", 2)
            .tensor("token_embd.weight", 64, 10, 0.5f);
        return g;
    };
    auto file = moe().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(model::layer_pattern(*hp) == "RRGR");
    CHECK(hp->n_layer_dense_lead == 1);
    CHECK_FALSE(hp->expert_layer(0));
    CHECK(hp->expert_layer(1));
    CHECK(hp->moe_gating == model::MoeGating::Sigmoid);
    CHECK(hp->expert_selection_bias);
    CHECK(hp->expert_weights_norm);
    // llama.cpp's lfm2moe graph renormalises whatever the file says.
    auto unnormed = moe().boolean("lfm2moe.expert_weights_norm", false).parse();
    REQUIRE(unnormed);
    auto hu = model::read_hparams(*unnormed);
    REQUIRE(hu);
    CHECK(hu->expert_weights_norm);
}

namespace {

// Mamba-Codestral-7B's key layout, shaped small: head_count and
// feed_forward_length 0 as its converter writes them, 8 heads of 32 over
// 2 groups.
TinyGguf mamba2_like() {
    TinyGguf g;
    g.str("general.architecture", "mamba2")
        .u32("mamba2.context_length", 1048576)
        .u32("mamba2.embedding_length", 128)
        .u32("mamba2.feed_forward_length", 0)
        .u32("mamba2.attention.head_count", 0)
        .u32("mamba2.block_count", 3)
        .u32("mamba2.ssm.conv_kernel", 4)
        .u32("mamba2.ssm.inner_size", 256)
        .u32("mamba2.ssm.state_size", 16)
        .u32("mamba2.ssm.time_step_rank", 8)
        .u32("mamba2.ssm.group_count", 2)
        .f32("mamba2.attention.layer_norm_rms_epsilon", 1e-5f)
        .tensor("token_embd.weight", 128, 10, 0.5f);
    return g;
}

}  // namespace

TEST_CASE("mamba2: every layer a Mamba-2 block, the ssm keys bounded and cross-checked") {
    auto file = mamba2_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->arch == model::find_architecture("mamba2"));
    CHECK(model::layer_pattern(*hp) == "RRR");
    CHECK(hp->n_head == 0);  // no attention: no KV cache
    CHECK(hp->kv_cell_elements() == 0);
    CHECK(hp->n_ff == 0);
    CHECK(hp->ssm_conv_dim() == 256 + 2 * 2 * 16);  // x, then B and C per group
    CHECK(hp->ssm_head_dim() == 32);
    CHECK(hp->ssm_state_floats() == 8u * 32 * 16);  // per head [head dim][state]

    const auto bad = [](const char* key, uint32_t v, const std::string& why) {
        const std::string k = std::string("mamba2.") + key;
        refused_by(mamba2_like().without(k).u32(k, v), k, why);
    };
    for (const char* key : {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                            "ssm.time_step_rank", "ssm.group_count"}) {
        INFO(key);
        refused_by(mamba2_like().without(std::string("mamba2.") + key),
                   std::string("mamba2.") + key, "missing");
        bad(key, 0, "is not in");
    }
    bad("ssm.conv_kernel", 1, "not in 2..64");  // the window holds kernel - 1 inputs
    bad("ssm.conv_kernel", 65, "not in 2..64");
    bad("ssm.state_size", 1025, "not in 1..1024");
    bad("ssm.time_step_rank", 4097, "not in 1..4096");
    bad("ssm.inner_size", (1u << 20) + 1, "not in 1..");
    bad("ssm.inner_size", 260, "not a multiple of ssm.time_step_rank");
    bad("ssm.group_count", 3, "do not divide");
    bad("block_count", 0, "is 0");
    bad("embedding_length", 0, "is 0");
}

namespace {

// Granite 4.0 H's key layout, shaped small: Mamba-2 blocks where
// head_count_kv lists 0, attention on layer 1, granite's scales, RoPE off
// (rope.scaling.finetuned false, as its converter writes).
TinyGguf granitehybrid_like(std::vector<int32_t> kv_heads = {0, 2, 0, 0}) {
    TinyGguf g;
    g.str("general.architecture", "granitehybrid")
        .u32("granitehybrid.context_length", 4096)
        .u32("granitehybrid.embedding_length", 128)
        .u32("granitehybrid.block_count", static_cast<uint32_t>(kv_heads.size()))
        .u32("granitehybrid.feed_forward_length", 256)
        .u32("granitehybrid.attention.head_count", 4)
        .i32_array("granitehybrid.attention.head_count_kv", kv_heads)
        .u32("granitehybrid.ssm.conv_kernel", 4)
        .u32("granitehybrid.ssm.inner_size", 256)
        .u32("granitehybrid.ssm.state_size", 16)
        .u32("granitehybrid.ssm.time_step_rank", 8)
        .u32("granitehybrid.ssm.group_count", 2)
        .f32("granitehybrid.attention.layer_norm_rms_epsilon", 1e-5f)
        .f32("granitehybrid.embedding_scale", 12.0f)
        .f32("granitehybrid.residual_scale", 0.22f)
        .f32("granitehybrid.attention.scale", 0.0078125f)
        .boolean("granitehybrid.rope.scaling.finetuned", false)
        .tensor("token_embd.weight", 128, 10, 0.5f);
    return g;
}

// Nemotron-H's key layout, shaped small: head_count_kv and
// feed_forward_length one per layer (M - M * -), only layer_norm_epsilon.
TinyGguf nemotron_h_like(std::vector<int32_t> kv_heads = {0, 0, 0, 2, 0},
                         std::vector<int32_t> ff = {0, 256, 0, 0, 256}) {
    TinyGguf g;
    g.str("general.architecture", "nemotron_h")
        .u32("nemotron_h.context_length", 4096)
        .u32("nemotron_h.embedding_length", 128)
        .u32("nemotron_h.block_count", static_cast<uint32_t>(kv_heads.size()))
        .i32_array("nemotron_h.feed_forward_length", ff)
        .u32("nemotron_h.attention.head_count", 4)
        .i32_array("nemotron_h.attention.head_count_kv", kv_heads)
        .u32("nemotron_h.attention.key_length", 32)
        .u32("nemotron_h.attention.value_length", 32)
        .u32("nemotron_h.ssm.conv_kernel", 4)
        .u32("nemotron_h.ssm.inner_size", 256)
        .u32("nemotron_h.ssm.state_size", 16)
        .u32("nemotron_h.ssm.time_step_rank", 8)
        .u32("nemotron_h.ssm.group_count", 2)
        .f32("nemotron_h.attention.layer_norm_epsilon", 1e-5f)
        .tensor("token_embd.weight", 128, 10, 0.5f);
    return g;
}

}  // namespace

TEST_CASE("granitehybrid: Mamba-2 blocks where head_count_kv lists 0, granite's scales") {
    auto file = granitehybrid_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->arch == model::find_architecture("granitehybrid"));
    CHECK(model::layer_pattern(*hp) == "RgRR");  // no RoPE: finetuned is false
    CHECK(hp->n_head_kv == 2);
    CHECK(hp->kv_cache_layers() == 1);  // KV cells for the attention layer alone
    CHECK(hp->ssm_state_floats() == 8u * 32 * 16);
    CHECK(hp->embedding_scale == 12.0f);
    CHECK(hp->residual_scale == 0.22f);
    CHECK(hp->attn_scale == 0.0078125f);
    CHECK(hp->logit_scale == 1.0f);  // optional here (llama.cpp's granitehybrid)
    CHECK(hp->n_ff == 256);          // an FFN on every layer
    auto rope = granitehybrid_like()
                    .without("granitehybrid.rope.scaling.finetuned")
                    .f32("granitehybrid.logit_scale", 6.0f)
                    .parse();
    REQUIRE(rope);
    auto hr = model::read_hparams(*rope);
    REQUIRE(hr);
    CHECK(model::layer_pattern(*hr) == "RGRR");
    CHECK(hr->logit_scale == 6.0f);

    const std::string kv = "granitehybrid.attention.head_count_kv";
    refused_by(granitehybrid_like({0, 0, 0, 0}), kv, "no layer attends");
    refused_by(granitehybrid_like({0, 2, 0, 1}), kv, "one count");
    refused_by(granitehybrid_like({0, 2, 0})
                   .without("granitehybrid.block_count")
                   .u32("granitehybrid.block_count", 4),
               kv, "3 values for 4 layers");
    refused_by(granitehybrid_like().without(kv), kv, "missing");
    for (const char* key : {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                            "ssm.time_step_rank", "ssm.group_count"}) {
        INFO(key);
        refused_by(granitehybrid_like().without(std::string("granitehybrid.") + key),
                   std::string("granitehybrid.") + key, "missing");
    }
}

TEST_CASE("granitehybrid: experts where expert_count says, an optional shared expert") {
    const auto moe = [] {
        return granitehybrid_like()
            .u32("granitehybrid.expert_count", 8)
            .u32("granitehybrid.expert_used_count", 2)
            .without("granitehybrid.feed_forward_length")
            .u32("granitehybrid.feed_forward_length", 64);
    };
    auto file = moe().u32("granitehybrid.expert_shared_feed_forward_length", 128).parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->n_expert == 8);
    CHECK(hp->n_ff_expert == 64);  // each expert feed_forward_length wide
    CHECK(hp->n_ff == 0);          // no dense FFN
    CHECK(hp->expert_layer(0));
    CHECK(hp->expert_layer(1));  // after the Mamba-2 blocks and the attention alike
    CHECK(hp->expert_weights_norm);
    CHECK(hp->moe_gating == model::MoeGating::Softmax);
    CHECK(hp->expert_weights_scale == 1.0f);
    CHECK(hp->n_ff_shared == 128);
    CHECK(hp->n_expert_shared == 1);
    // Renormalised whatever expert_weights_norm says (llama.cpp's granitehybrid graph).
    auto unnormed = moe().boolean("granitehybrid.expert_weights_norm", false).parse();
    REQUIRE(unnormed);
    auto hu = model::read_hparams(*unnormed);
    REQUIRE(hu);
    CHECK(hu->expert_weights_norm);
    CHECK(hu->n_ff_shared == 0);  // absent: no shared expert
    refused_by(moe().u32("granitehybrid.expert_shared_feed_forward_length", 1u << 21),
               "granitehybrid.expert_shared_feed_forward_length", "not a shared expert's width");
    refused_by(moe().without("granitehybrid.expert_used_count"), "granitehybrid.expert_used_count",
               "missing");
    refused_by(
        moe().without("granitehybrid.expert_used_count").u32("granitehybrid.expert_used_count", 9),
        "granitehybrid.expert_used_count", "not in 1..expert_count");
}

TEST_CASE("nemotron_h_moe: the FFN layers run sigmoid-gated experts and a shared expert") {
    const auto moe = [] {
        TinyGguf m;
        m.str("general.architecture", "nemotron_h_moe")
            .u32("nemotron_h_moe.context_length", 4096)
            .u32("nemotron_h_moe.embedding_length", 128)
            .u32("nemotron_h_moe.block_count", 5)
            .i32_array("nemotron_h_moe.feed_forward_length", {0, 64, 0, 0, 64})
            .u32("nemotron_h_moe.attention.head_count", 4)
            .i32_array("nemotron_h_moe.attention.head_count_kv", {0, 0, 0, 2, 0})
            .u32("nemotron_h_moe.attention.key_length", 32)
            .u32("nemotron_h_moe.attention.value_length", 32)
            .u32("nemotron_h_moe.ssm.conv_kernel", 4)
            .u32("nemotron_h_moe.ssm.inner_size", 256)
            .u32("nemotron_h_moe.ssm.state_size", 16)
            .u32("nemotron_h_moe.ssm.time_step_rank", 8)
            .u32("nemotron_h_moe.ssm.group_count", 2)
            .f32("nemotron_h_moe.attention.layer_norm_epsilon", 1e-5f)
            .u32("nemotron_h_moe.expert_count", 8)
            .u32("nemotron_h_moe.expert_used_count", 2)
            .u32("nemotron_h_moe.expert_feed_forward_length", 64)
            .u32("nemotron_h_moe.expert_shared_feed_forward_length", 128)
            .boolean("nemotron_h_moe.expert_weights_norm", true)
            .f32("nemotron_h_moe.expert_weights_scale", 2.5f)
            .tensor("token_embd.weight", 128, 10, 0.5f);
        return m;
    };
    auto file = moe().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(model::layer_pattern(*hp) == "RFRgF");
    CHECK_FALSE(hp->expert_layer(0));  // a Mamba-2 block
    CHECK(hp->expert_layer(1));        // an FFN layer: experts
    CHECK_FALSE(hp->expert_layer(3));  // attention
    CHECK(hp->moe_gating == model::MoeGating::Sigmoid);
    CHECK(hp->expert_selection_bias);
    CHECK(hp->expert_weights_norm);
    CHECK(hp->expert_weights_scale == 2.5f);
    CHECK(hp->n_ff_expert == 64);
    CHECK(hp->n_ff_shared == 128);
    // Sigmoid whatever expert_gating_func says (llama.cpp's graph does not read it).
    auto softmax = moe().u32("nemotron_h_moe.expert_gating_func", 1).parse();
    REQUIRE(softmax);
    auto hs = model::read_hparams(*softmax);
    REQUIRE(hs);
    CHECK(hs->moe_gating == model::MoeGating::Sigmoid);
    refused_by(moe().u32("nemotron_h_moe.moe_latent_size", 32), "nemotron_h_moe.moe_latent_size",
               "not implemented");
    refused_by(moe().u32("nemotron_h_moe.nextn_predict_layers", 1),
               "nemotron_h_moe.nextn_predict_layers", "not implemented");
    refused_by(moe().without("nemotron_h_moe.expert_feed_forward_length"),
               "nemotron_h_moe.expert_feed_forward_length", "missing");
    refused_by(moe()
                   .without("nemotron_h_moe.expert_weights_scale")
                   .f32("nemotron_h_moe.expert_weights_scale", -1.0f),
               "nemotron_h_moe.expert_weights_scale", "not a scale");
}

TEST_CASE("nemotron_h: each layer one block, told apart by head_count_kv and feed_forward_length") {
    auto file = nemotron_h_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->arch == model::find_architecture("nemotron_h"));
    // R: Mamba-2 (both 0), F: an FFN alone (a width), g: attention, never rotated.
    CHECK(model::layer_pattern(*hp) == "RFRgF");
    CHECK(hp->kv_cache_layers() == 1);  // not the FFN layers
    CHECK_FALSE(hp->owns_kv(1));
    CHECK(hp->owns_kv(3));
    CHECK(hp->n_ff == 256);
    CHECK(hp->layer_n_ff(1) == 256);
    CHECK(hp->rms_eps == 1e-5f);  // layer_norm_epsilon stands in for the RMS one
    auto own = nemotron_h_like().f32("nemotron_h.attention.layer_norm_rms_epsilon", 1e-6f).parse();
    REQUIRE(own);
    auto ho = model::read_hparams(*own);
    REQUIRE(ho);
    CHECK(ho->rms_eps == 1e-6f);

    const std::string ff = "nemotron_h.feed_forward_length";
    const std::string kv = "nemotron_h.attention.head_count_kv";
    // A layer listing KV heads and a width is of no kind.
    refused_by(nemotron_h_like({0, 0, 0, 2, 0}, {0, 256, 0, 256, 256}), ff,
               "not attention and an FFN");
    refused_by(nemotron_h_like({0, 0, 0, 2, 0}, {0, 256, 0, 256}), ff, "4 values for 5 layers");
    refused_by(nemotron_h_like({0, 0, 0, 2}, {0, 256, 0, 0, 256})
                   .without("nemotron_h.block_count")
                   .u32("nemotron_h.block_count", 5),
               kv, "4 values for 5 layers");
    refused_by(nemotron_h_like({0, 0, 0, 0, 0}), kv, "no layer attends");
    refused_by(nemotron_h_like().without(ff), ff, "missing");
    refused_by(nemotron_h_like().without("nemotron_h.attention.layer_norm_epsilon"),
               "nemotron_h.attention.layer_norm_epsilon", "missing");
}
