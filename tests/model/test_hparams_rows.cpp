// The architecture rows' own keys: granite's scales, smollm3's layers without
// RoPE, olmo2's norms and the other dense rows.
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

TEST_CASE("the architecture rows: granite's scales, smollm3's layers without RoPE, olmo2's norms") {
    SECTION("granite reads its four scales; logit_scale is required") {
        auto file = llama_like("granite")
                        .f32("granite.logit_scale", 8.0f)
                        .f32("granite.embedding_scale", 12.0f)
                        .f32("granite.residual_scale", 0.22f)
                        .f32("granite.attention.scale", 0.015625f)
                        .parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK(hp->arch->rope == model::RopeStyle::Normal);
        CHECK(hp->logit_scale == 8.0f);
        CHECK(hp->embedding_scale == 12.0f);
        CHECK(hp->residual_scale == 0.22f);
        CHECK(hp->attn_scale == 0.015625f);
        for (uint32_t il = 0; il < 8; ++il) CHECK(hp->has_rope(il));

        auto unset = llama_like("granite").f32("granite.logit_scale", 8.0f).parse();
        REQUIRE(unset);
        auto plain = model::read_hparams(*unset);
        REQUIRE(plain);  // the optional three at 0 or absent: not scaled, 1/sqrt(head_dim)
        CHECK(plain->embedding_scale == 1.0f);
        CHECK(plain->residual_scale == 1.0f);
        CHECK(plain->attn_scale == Approx(1.0 / std::sqrt(16.0)));

        auto missing = llama_like("granite").parse();
        REQUIRE(missing);
        auto m = model::read_hparams(*missing);
        REQUIRE_FALSE(m);
        CHECK_THAT(m.error().message(), Catch::Contains("granite.logit_scale"));
        auto negative = llama_like("granite")
                            .f32("granite.logit_scale", 8.0f)
                            .f32("granite.residual_scale", -1.0f)
                            .parse();
        REQUIRE(negative);
        auto n = model::read_hparams(*negative);
        REQUIRE_FALSE(n);
        CHECK_THAT(n.error().message(), Catch::Contains("granite.residual_scale"));
    }
    SECTION("granite with rope.scaling.finetuned false rotates no layer") {
        auto file = llama_like("granite")
                        .f32("granite.logit_scale", 8.0f)
                        .boolean("granite.rope.scaling.finetuned", false)
                        .parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        for (uint32_t il = 0; il < 8; ++il) CHECK_FALSE(hp->has_rope(il));
    }
    SECTION("smollm3: every fourth layer attends without RoPE") {
        auto file = llama_like("smollm3").parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        for (uint32_t il = 0; il < 8; ++il) CHECK(hp->has_rope(il) == (il != 3 && il != 7));
    }
    SECTION(
        "olmo2: post-norms only, q/k norms over the whole projection, NeoX, a window "
        "when the file has one") {
        auto file = llama_like("olmo2").parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK_FALSE(hp->arch->pre_norms);
        CHECK(hp->arch->post_norms);
        CHECK(hp->arch->qk_norm == model::QkNorm::Whole);
        CHECK(hp->arch->rope == model::RopeStyle::Neox);
        CHECK(hp->sliding_window == 0);  // OLMo 2: no window, every layer global
        for (uint32_t il = 0; il < 8; ++il) CHECK_FALSE(hp->is_local_layer(il));
        // OLMo 3 (same architecture): three local layers, then one global.
        auto windowed = llama_like("olmo2").u32("olmo2.attention.sliding_window", 4096).parse();
        REQUIRE(windowed);
        auto w = model::read_hparams(*windowed);
        REQUIRE(w);
        CHECK(w->sliding_window == 4096);
        for (uint32_t il = 0; il < 8; ++il) CHECK(w->is_local_layer(il) == (il % 4 != 3));
        CHECK(w->rope_base_local == w->rope_base);
        CHECK(w->arch->local_rope == model::LocalRope::Plain);
    }
    SECTION("qwen2vl and qwen3vl need rope.dimension_sections, checked") {
        for (const std::string arch : {"qwen2vl", "qwen3vl"}) {
            INFO(arch);
            auto ok = llama_like(arch).i32_array(arch + ".rope.dimension_sections", {4, 2, 2, 0});
            auto file = ok.parse();
            REQUIRE(file);
            auto hp = model::read_hparams(*file);
            REQUIRE(hp);
            CHECK(hp->arch->rope == model::RopeStyle::Neox);
            auto missing = llama_like(arch).parse();
            REQUIRE(missing);
            auto m = model::read_hparams(*missing);
            REQUIRE_FALSE(m);
            CHECK_THAT(m.error().message(), Catch::Contains(arch + ".rope.dimension_sections"));
            for (const std::vector<int32_t>& bad :
                 {std::vector<int32_t>{0, 0, 0, 0}, {4, -2, 2, 0}, {1, 1, 1, 1, 1}}) {
                auto f = llama_like(arch).i32_array(arch + ".rope.dimension_sections", bad).parse();
                REQUIRE(f);
                auto b = model::read_hparams(*f);
                REQUIRE_FALSE(b);
                CHECK_THAT(b.error().message(), Catch::Contains("rope.dimension_sections"));
            }
        }
    }
    SECTION("phi3 reads attention.sliding_window and does not apply it, as llama.cpp") {
        auto file = llama_like("phi3").u32("phi3.attention.sliding_window", 2047).parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK(hp->sliding_window == 0);
        CHECK(hp->arch->rope == model::RopeStyle::Neox);
    }
    SECTION("mistral3 reads the attention temperature and three of YaRN's keys") {
        const auto yarn = [] {
            return llama_like("mistral3")
                .str("mistral3.rope.scaling.type", "yarn")
                .f32("mistral3.rope.scaling.factor", 16.0f)
                .u32("mistral3.rope.scaling.original_context_length", 16384)
                .f32("mistral3.rope.scaling.yarn_log_multiplier", 1.0f)
                .f32("mistral3.rope.scaling.yarn_beta_fast", 16.0f)
                .f32("mistral3.attention.temperature_scale", 0.1f);
        };
        auto file = yarn().parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK(hp->attn_temp_scale == 0.1f);
        CHECK(hp->attn_temp_length == 16384);
        CHECK(hp->rope_yarn_log_mul == 1.0f);
        CHECK(hp->rope_yarn_beta_fast == 16.0f);
        // llama.cpp's mistral3 graph does not read yarn_ext_factor: refused, not guessed.
        auto ext = yarn().f32("mistral3.rope.scaling.yarn_ext_factor", 0.5f).parse();
        REQUIRE(ext);
        auto e = model::read_hparams(*ext);
        REQUIRE_FALSE(e);
        CHECK_THAT(e.error().message(), Catch::Contains("mistral3.rope.scaling.yarn_ext_factor"));
        auto negative = yarn()
                            .without("mistral3.attention.temperature_scale")
                            .f32("mistral3.attention.temperature_scale", -1.0f)
                            .parse();
        REQUIRE(negative);
        auto n = model::read_hparams(*negative);
        REQUIRE_FALSE(n);
        CHECK_THAT(n.error().message(), Catch::Contains("mistral3.attention.temperature_scale"));
    }
    SECTION("gemma2: one local layer, one global; its window, caps and 27B scale") {
        auto file = llama_like("gemma2").parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK(hp->sliding_window == 4096);  // llama.cpp's default for the architecture
        for (uint32_t il = 0; il < 8; ++il) CHECK(hp->is_local_layer(il) == (il % 2 == 0));
        CHECK(hp->rope_base_local == hp->rope_base);
        CHECK(hp->attn_softcap == 50.0f);
        CHECK(hp->final_softcap == 30.0f);
        CHECK(hp->embedding_scale == Approx(8.0));  // sqrt(64)
        CHECK(hp->attn_scale == Approx(1.0 / std::sqrt(16.0)));
        auto wide = llama_like("gemma2")
                        .without("gemma2.block_count")
                        .u32("gemma2.block_count", 46)
                        .u32("gemma2.attention.key_length", 32)
                        .parse();
        REQUIRE(wide);
        auto w = model::read_hparams(*wide);
        REQUIRE(w);
        CHECK(w->attn_scale == Approx(1.0 / std::sqrt(16.0)));  // n_embd / n_head, not 32
        auto zero = llama_like("gemma2").f32("gemma2.attn_logit_softcapping", 0.0f).parse();
        REQUIRE(zero);
        auto z = model::read_hparams(*zero);
        REQUIRE_FALSE(z);
        CHECK_THAT(z.error().message(), Catch::Contains("gemma2.attn_logit_softcapping"));
    }
    SECTION("gpt-oss: its window is required, the gating and biases come from the row") {
        const auto gpt_oss = [] {
            return llama_like("gpt-oss")
                .u32("gpt-oss.expert_count", 4)
                .u32("gpt-oss.expert_used_count", 2)
                .u32("gpt-oss.expert_feed_forward_length", 32);
        };
        auto no_window = gpt_oss().parse();
        REQUIRE(no_window);
        auto nw = model::read_hparams(*no_window);
        REQUIRE_FALSE(nw);  // llama.cpp reads it as required for gpt-oss
        CHECK_THAT(nw.error().message(), Catch::Contains("gpt-oss.attention.sliding_window"));
        // expert_weights_norm is qwen3moe's key: a softmax over the chosen k needs none.
        auto file = gpt_oss()
                        .u32("gpt-oss.attention.sliding_window", 128)
                        .boolean("gpt-oss.expert_weights_norm", true)
                        .parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        for (uint32_t il = 0; il < 8; ++il) CHECK(hp->is_local_layer(il) == (il % 2 == 0));
        CHECK(hp->sliding_window == 128);
        CHECK(hp->arch->moe_gating == model::MoeGating::SoftmaxWeight);
        CHECK_FALSE(hp->expert_weights_norm);
        CHECK(hp->arch->activation == model::FfnActivation::SwigluOai);
        CHECK((hp->arch->attention_sinks && hp->attn_output_bias && hp->arch->expert_biases));
        CHECK(hp->n_ff == 0);
        auto qwen = llama_like("qwen3moe")
                        .u32("qwen3moe.expert_count", 4)
                        .u32("qwen3moe.expert_used_count", 2)
                        .u32("qwen3moe.expert_feed_forward_length", 32)
                        .parse();
        REQUIRE(qwen);
        auto q = model::read_hparams(*qwen);
        REQUIRE(q);
        CHECK(q->arch->moe_gating == model::MoeGating::Softmax);
        CHECK(q->expert_weights_norm);  // llama.cpp's default when the key is absent
        CHECK_FALSE((q->arch->attention_sinks || q->attn_output_bias || q->arch->expert_biases));
    }
    SECTION("experts on an architecture ferrox runs dense are refused by key") {
        auto file = llama_like("qwen2").u32("qwen2.expert_count", 8).parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE_FALSE(hp);
        CHECK_THAT(hp.error().message(), Catch::Contains("qwen2.expert_count"));
    }
    SECTION("llama takes Mixtral's experts, each feed_forward_length wide") {
        auto file = llama_like("llama")
                        .u32("llama.expert_count", 8)
                        .u32("llama.expert_used_count", 2)
                        .parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK(hp->n_expert == 8);
        CHECK(hp->n_expert_used == 2);
        CHECK(hp->n_ff_expert == 128);
        CHECK(hp->arch->moe_gating == model::MoeGating::Softmax);
        CHECK(hp->expert_weights_norm);
        auto dense = llama_like("llama").u32("llama.expert_count", 0).parse();
        REQUIRE(dense);
        auto d = model::read_hparams(*dense);
        REQUIRE(d);
        CHECK(d->n_expert == 0);
        CHECK(d->n_ff == 128);
        auto no_used = llama_like("llama").u32("llama.expert_count", 8).parse();
        REQUIRE(no_used);
        auto u = model::read_hparams(*no_used);
        REQUIRE_FALSE(u);
        CHECK_THAT(u.error().message(), Catch::Contains("llama.expert_used_count"));
    }
    SECTION("the refusal of an unknown architecture lists every row") {
        auto file = llama_like("mamba").parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE_FALSE(hp);
        for (const auto& a : model::architectures())
            CHECK_THAT(hp.error().message(), Catch::Contains(std::string(a.name)));
    }
}
