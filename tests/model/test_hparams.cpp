// Hyper-parameters are named, never guessed; the capacity plan states its sum.
// The rows' own keys: test_hparams_rows.cpp, _latent (glm4moe, deepseek2),
// _gemma4, _hybrid (qwen35moe, lfm2).
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

TEST_CASE("gemma3 metadata gives its hyper-parameters and the 5-local-1-global layer pattern") {
    auto file = gemma3_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->arch == model::find_architecture("gemma3"));
    CHECK(hp->n_embd == 64);
    CHECK(hp->n_head_kv == 1);
    CHECK(hp->head_dim_k == 32);
    CHECK(hp->vocab == 10);
    CHECK(hp->arch->rope == model::RopeStyle::Neox);
    CHECK(hp->rope_base == 1e6f);
    CHECK(hp->rope_base_local == 10000.0f);
    CHECK(hp->sliding_window == 512);
    CHECK(hp->attn_scale == Approx(1.0 / std::sqrt(32.0)));
    for (uint32_t il = 0; il < 12; ++il) CHECK(hp->is_local_layer(il) == (il != 5 && il != 11));
}

TEST_CASE("a layer count past llama.cpp's 512 is refused by key before anything is sized by it") {
    auto at_limit = gemma3_like().without("gemma3.block_count").u32("gemma3.block_count", 512);
    auto file = at_limit.parse();
    REQUIRE(file);
    CHECK(model::read_hparams(*file).has_value());
    auto past = gemma3_like().without("gemma3.block_count").u32("gemma3.block_count", 4000000000u);
    auto huge = past.parse();
    REQUIRE(huge);
    auto hp = model::read_hparams(*huge);
    REQUIRE_FALSE(hp.has_value());
    CHECK_THAT(hp.error().message(),
               Catch::Contains("gemma3.block_count") &&
                   Catch::Contains("4000000000 layers; ferrox reads at most 512"));
}

TEST_CASE("a missing required key is refused and the message names the key") {
    const char* keys[] = {
        "gemma3.embedding_length",        "gemma3.block_count",
        "gemma3.attention.head_count",    "gemma3.context_length",
        "gemma3.feed_forward_length",     "gemma3.attention.layer_norm_rms_epsilon",
        "gemma3.attention.sliding_window"};
    for (const char* key : keys) {
        INFO(key);
        auto file = gemma3_like().without(key).parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE_FALSE(hp);
        CHECK_THAT(hp.error().message(), Catch::Contains(key));
    }
}

TEST_CASE("an unknown architecture and an unimplemented rope scaling are refused by key") {
    auto unknown =
        gemma3_like().without("general.architecture").str("general.architecture", "mamba").parse();
    REQUIRE(unknown);
    auto a = model::read_hparams(*unknown);
    REQUIRE_FALSE(a);
    CHECK_THAT(a.error().message(),
               Catch::Contains("general.architecture") && Catch::Contains("mamba"));

    auto ntk = gemma3_like().str("gemma3.rope.scaling.type", "dynamic_ntk").parse();
    REQUIRE(ntk);
    auto b = model::read_hparams(*ntk);
    REQUIRE_FALSE(b);
    CHECK_THAT(b.error().message(),
               Catch::Contains("gemma3.rope.scaling.type") && Catch::Contains("dynamic_ntk"));

    auto kv = gemma3_like()
                  .without("gemma3.attention.head_count_kv")
                  .u32("gemma3.attention.head_count_kv", 3)
                  .parse();
    REQUIRE(kv);
    auto c = model::read_hparams(*kv);
    REQUIRE_FALSE(c);
    CHECK_THAT(c.error().message(), Catch::Contains("gemma3.attention.head_count_kv"));
}

TEST_CASE("the capacity plan counts weights, an f32 KV cache and scratch") {
    model::CapacityInputs in;
    in.weight_bytes = 1000;
    in.n_layer = 18;
    in.context = 4096;
    in.n_head_kv = 1;
    in.head_dim_k = 256;
    in.head_dim_v = 256;
    in.scratch_bytes = 24;
    in.available_bytes = uint64_t{1} << 40;
    auto plan = model::plan_capacity(in);
    REQUIRE(plan);
    CHECK(plan->kv_bytes == uint64_t{18} * 4096 * 1 * 512 * 4);
    CHECK(plan->total_bytes == 1000 + plan->kv_bytes + 24);

    in.k_block_bytes = in.v_block_bytes = 2;  // an f16 cache
    plan = model::plan_capacity(in);
    REQUIRE(plan);
    CHECK(plan->kv_bytes == uint64_t{18} * 4096 * 1 * 512 * 2);

    in.k_block_bytes = in.v_block_bytes = 34;  // a q8_0 cache: 34 bytes per block of 32
    in.k_block_elements = in.v_block_elements = 32;
    plan = model::plan_capacity(in);
    REQUIRE(plan);
    CHECK(plan->kv_bytes == uint64_t{18} * 4096 * 1 * (512 / 32) * 34);

    in.k_block_bytes = in.v_block_bytes = 18;  // q4_0: 18 bytes per block of 32
    plan = model::plan_capacity(in);
    REQUIRE(plan);
    CHECK(plan->kv_bytes == uint64_t{18} * 4096 * 1 * (512 / 32) * 18);

    in.k_block_bytes = 34;  // mixed: q8_0 keys over f16 values, each counted in its kind
    in.v_block_bytes = 2;
    in.v_block_elements = 1;
    plan = model::plan_capacity(in);
    REQUIRE(plan);
    CHECK(plan->kv_bytes == uint64_t{18} * 4096 * 1 * (256 / 32 * 34 + 256 * 2));
}

TEST_CASE("a model that does not fit is refused with the arithmetic spelled out") {
    model::CapacityInputs in;
    in.weight_bytes = 253113024;
    in.n_layer = 18;
    in.context = 32768;
    in.n_head_kv = 1;
    in.head_dim_k = 256;
    in.head_dim_v = 256;
    in.scratch_bytes = 1000;
    in.available_bytes = 512ull << 20;
    auto plan = model::plan_capacity(in);
    REQUIRE_FALSE(plan);
    const std::string& msg = plan.error().message();
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("253113024") && Catch::Contains("1207959552") &&
                        Catch::Contains("18 layers x 32768 positions x 1 kv heads") &&
                        Catch::Contains("1461073576") && Catch::Contains("536870912") &&
                        Catch::Contains("--kv-type f16"));
}

TEST_CASE(
    "Gemma 3 27B (62 layers) scales attention by 1/sqrt(n_embd / n_head), others by head_dim") {
    // n_embd / n_head = 16 differs from head_dim 32, so the two rules differ.
    auto g27 = gemma3_like().without("gemma3.block_count").u32("gemma3.block_count", 62).parse();
    REQUIRE(g27);
    auto hp = model::read_hparams(*g27);
    REQUIRE(hp);
    CHECK(hp->attn_scale == Approx(1.0 / std::sqrt(16.0)));
    auto g61 = gemma3_like().without("gemma3.block_count").u32("gemma3.block_count", 61).parse();
    REQUIRE(g61);
    auto other = model::read_hparams(*g61);
    REQUIRE(other);
    CHECK(other->attn_scale == Approx(1.0 / std::sqrt(32.0)));
}

TEST_CASE("rope scaling keys are read as llama.cpp reads them") {
    SECTION("no keys: linear with factor 1, the original context is the trained one") {
        auto hp = model::read_hparams(*gemma3_like().parse());
        REQUIRE(hp);
        CHECK(hp->rope_scaling == model::RopeScaling::Linear);
        CHECK(hp->rope_freq_scale == 1.0f);
        CHECK(hp->rope_n_ctx_orig == 32768);
        CHECK(hp->n_rot == 32);
    }
    SECTION("a factor without a type is linear; the older rope.scale_linear counts too") {
        auto f = gemma3_like().f32("gemma3.rope.scaling.factor", 8.0f).parse();
        REQUIRE(f);
        auto hp = model::read_hparams(*f);
        REQUIRE(hp);
        CHECK(hp->rope_freq_scale == 0.125f);
        auto old = gemma3_like().f32("gemma3.rope.scale_linear", 4.0f).parse();
        REQUIRE(old);
        auto hp2 = model::read_hparams(*old);
        REQUIRE(hp2);
        CHECK(hp2->rope_freq_scale == 0.25f);
    }
    SECTION("'none' never scales") {
        auto f = gemma3_like()
                     .str("gemma3.rope.scaling.type", "none")
                     .f32("gemma3.rope.scaling.factor", 8.0f)
                     .parse();
        REQUIRE(f);
        auto hp = model::read_hparams(*f);
        REQUIRE(hp);
        CHECK(hp->rope_freq_scale == 1.0f);
    }
    SECTION("yarn: factor, original context and attention factor") {
        auto f = gemma3_like()
                     .str("gemma3.rope.scaling.type", "yarn")
                     .f32("gemma3.rope.scaling.factor", 4.0f)
                     .u32("gemma3.rope.scaling.original_context_length", 8192)
                     .f32("gemma3.rope.scaling.attn_factor", 0.5f)
                     .f32("gemma3.rope.scaling.yarn_beta_fast", 32.0f)  // llama.cpp's own value
                     .parse();
        REQUIRE(f);
        auto hp = model::read_hparams(*f);
        REQUIRE(hp);
        CHECK(hp->rope_scaling == model::RopeScaling::Yarn);
        CHECK(hp->rope_freq_scale == 0.25f);
        CHECK(hp->rope_n_ctx_orig == 8192);
        CHECK(hp->rope_attn_factor == 0.5f);
    }
    SECTION("a YaRN tuning key llama.cpp does not read here is refused, not half-honoured") {
        for (const char* key :
             {"gemma3.rope.scaling.yarn_beta_fast", "gemma3.rope.scaling.yarn_beta_slow",
              "gemma3.rope.scaling.yarn_log_multiplier", "gemma3.rope.scaling.yarn_attn_factor"}) {
            INFO(key);
            auto f = gemma3_like().str("gemma3.rope.scaling.type", "yarn").f32(key, 7.0f).parse();
            REQUIRE(f);
            auto hp = model::read_hparams(*f);
            REQUIRE_FALSE(hp);
            CHECK_THAT(hp.error().message(),
                       Catch::Contains(key) && Catch::Contains("does not read the key"));
        }
        // The ramp weight llama.cpp derives (1 for YaRN, 0 otherwise) is accepted.
        auto same = gemma3_like()
                        .str("gemma3.rope.scaling.type", "yarn")
                        .f32("gemma3.rope.scaling.yarn_ext_factor", 1.0f)
                        .parse();
        REQUIRE(same);
        CHECK(model::read_hparams(*same));
        auto other = gemma3_like()
                         .str("gemma3.rope.scaling.type", "yarn")
                         .f32("gemma3.rope.scaling.yarn_ext_factor", 0.5f)
                         .parse();
        REQUIRE(other);
        auto hp = model::read_hparams(*other);
        REQUIRE_FALSE(hp);
        CHECK_THAT(hp.error().message(), Catch::Contains("gemma3.rope.scaling.yarn_ext_factor"));
    }
    SECTION("a YaRN tuning key out of range is refused by key, whatever the architecture") {
        const std::pair<const char*, float> bad[] = {
            {"gemma3.rope.scaling.yarn_beta_fast", 0.0f},
            {"gemma3.rope.scaling.yarn_beta_slow", -1.0f},
            {"gemma3.rope.scaling.yarn_ext_factor", 1.5f},
            {"gemma3.rope.scaling.yarn_attn_factor", 0.0f},
            {"gemma3.rope.scaling.yarn_log_multiplier", -0.1f},
            {"gemma3.rope.scaling.yarn_beta_fast", std::numeric_limits<float>::infinity()}};
        for (const auto& [key, value] : bad) {
            INFO(key << " = " << value);
            auto f = gemma3_like().str("gemma3.rope.scaling.type", "yarn").f32(key, value).parse();
            REQUIRE(f);
            auto hp = model::read_hparams(*f);
            REQUIRE_FALSE(hp);
            CHECK_THAT(hp.error().message(),
                       Catch::Contains(key) && Catch::Contains("out of range"));
        }
    }
    SECTION("a negative factor is refused by key") {
        auto f = gemma3_like().f32("gemma3.rope.scaling.factor", -2.0f).parse();
        REQUIRE(f);
        auto hp = model::read_hparams(*f);
        REQUIRE_FALSE(hp);
        CHECK_THAT(hp.error().message(), Catch::Contains("gemma3.rope.scaling.factor"));
    }
    SECTION("partial rotary: gemma3 rotates a prefix, as llama.cpp's gemma3 graph does") {
        auto f = gemma3_like().u32("gemma3.rope.dimension_count", 16).parse();
        REQUIRE(f);
        auto hp = model::read_hparams(*f);
        REQUIRE(hp);
        CHECK(hp->n_rot == 16);
        CHECK(hp->head_dim_k == 32);
        // One rotated width for every layer, as llama.cpp's graphs take it.
        auto same = gemma3_like()
                        .u32("gemma3.rope.dimension_count", 16)
                        .u32("gemma3.rope.dimension_count_swa", 16)
                        .parse();
        REQUIRE(same);
        CHECK(model::read_hparams(*same));
        auto swa = gemma3_like()
                       .u32("gemma3.rope.dimension_count", 16)
                       .u32("gemma3.rope.dimension_count_swa", 24)
                       .parse();
        REQUIRE(swa);
        auto s = model::read_hparams(*swa);
        REQUIRE_FALSE(s);
        CHECK_THAT(s.error().message(),
                   Catch::Contains("gemma3.rope.dimension_count_swa") && Catch::Contains("24"));
    }
    SECTION("a rotated width that is odd, zero or wider than the head is refused by key") {
        for (uint32_t n_rot : {0u, 15u, 34u}) {
            INFO(n_rot);
            auto f = gemma3_like().u32("gemma3.rope.dimension_count", n_rot).parse();
            REQUIRE(f);
            auto hp = model::read_hparams(*f);
            REQUIRE_FALSE(hp);
            CHECK_THAT(hp.error().message(), Catch::Contains("gemma3.rope.dimension_count") &&
                                                 Catch::Contains(std::to_string(n_rot)));
        }
    }
    SECTION("partial rotary on an architecture llama.cpp runs whole-head only is refused") {
        TinyGguf g;
        g.str("general.architecture", "llama")
            .u32("llama.context_length", 256)
            .u32("llama.embedding_length", 64)
            .u32("llama.block_count", 2)
            .u32("llama.feed_forward_length", 128)
            .u32("llama.attention.head_count", 2)
            .f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
            .u32("llama.rope.dimension_count", 16)
            .tensor("token_embd.weight", 64, 10, 0.5f);
        auto f = g.parse();
        REQUIRE(f);
        auto hp = model::read_hparams(*f);
        REQUIRE_FALSE(hp);
        CHECK_THAT(hp.error().message(),
                   Catch::Contains("llama.rope.dimension_count") && Catch::Contains("16 of 32"));
    }
}

TEST_CASE("adapters, vision projectors and embedding models are refused for what they are") {
    struct Case {
        ferrox::test::TinyGguf file;
        const char* key;
        const char* says;
    };
    Case cases[] = {
        {gemma3_like().str("general.type", "adapter").str("adapter.type", "lora"), "general.type",
         "LoRA adapter"},
        {gemma3_like().str("general.type", "mmproj"), "general.type", "vision projector"},
        {gemma3_like().without("general.architecture").str("general.architecture", "clip"),
         "general.architecture", "vision projector"},
        {gemma3_like().u32("gemma3.pooling_type", 4), "gemma3.pooling_type", "classifier head"},
        {gemma3_like().u32("gemma3.pooling_type", 7), "gemma3.pooling_type", "not a pooling"},
        {gemma3_like().u32("gemma3.pooling_type", 1).boolean("gemma3.attention.causal", false),
         "gemma3.attention.causal", "non-causal"},
    };
    for (auto& c : cases) {
        INFO(c.says);
        auto file = c.file.parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE_FALSE(hp);
        CHECK_THAT(hp.error().message(), Catch::Contains(c.key) && Catch::Contains(c.says));
    }
    // pooling_type 0 (none) is a plain decoder.
    auto none = gemma3_like().u32("gemma3.pooling_type", 0).parse();
    REQUIRE(none);
    CHECK(model::read_hparams(*none));
    // A decoder's embedding model is read (its pooling kept); only the
    // loader's purpose refuses it for generation.
    auto mean = gemma3_like().u32("gemma3.pooling_type", 1).parse();
    REQUIRE(mean);
    auto hp = model::read_hparams(*mean);
    REQUIRE(hp);
    CHECK(hp->pooling == model::Pooling::Mean);
    auto generation = model::refuse_non_decoder(*mean);
    REQUIRE_FALSE(generation);
    CHECK_THAT(generation.error().message(),
               Catch::Contains("gemma3.pooling_type") && Catch::Contains("ferrox embed"));
    CHECK(model::refuse_non_decoder(*mean, true));
}

TEST_CASE("non-causal attention: by key or by row, pooled output only, windows symmetric") {
    // A decoder's row made non-causal by its key: read, and refused for generation by the key.
    auto by_key = llama_like("qwen3")
                      .u32("qwen3.pooling_type", 1)
                      .boolean("qwen3.attention.causal", false)
                      .parse();
    REQUIRE(by_key);
    auto hp = model::read_hparams(*by_key);
    REQUIRE(hp);
    CHECK_FALSE(hp->causal);
    CHECK(hp->attention_ahead(false) == UINT32_MAX);
    auto generation = model::refuse_non_decoder(*by_key);
    REQUIRE_FALSE(generation);
    CHECK_THAT(generation.error().message(),
               Catch::Contains("qwen3.attention.causal") && Catch::Contains("pooled output only"));
    CHECK(model::refuse_non_decoder(*by_key, true));

    // gemma-embedding is non-causal whatever its key says (as llama.cpp), its window
    // symmetric: a window of 8 sees p-4..p+4 on the local layers, every position on the
    // global ones; q.k scaled by 1/sqrt(head_dim) at any depth.
    const auto gemma_embedding = [](uint32_t layers) {
        TinyGguf g;
        g.str("general.architecture", "gemma-embedding")
            .u32("gemma-embedding.context_length", 2048)
            .u32("gemma-embedding.embedding_length", 64)
            .u32("gemma-embedding.block_count", layers)
            .u32("gemma-embedding.feed_forward_length", 128)
            .u32("gemma-embedding.attention.head_count", 4)
            .u32("gemma-embedding.attention.head_count_kv", 1)
            .u32("gemma-embedding.attention.key_length", 32)
            .u32("gemma-embedding.attention.value_length", 32)
            .f32("gemma-embedding.attention.layer_norm_rms_epsilon", 1e-6f)
            .u32("gemma-embedding.attention.sliding_window", 8)
            .u32("gemma-embedding.pooling_type", 1)
            .boolean("gemma-embedding.attention.causal", true)
            .tensor("token_embd.weight", 64, 10, 0.5f);
        return g;
    };
    auto file = gemma_embedding(62).parse();
    REQUIRE(file);
    auto ge = model::read_hparams(*file);
    REQUIRE(ge);
    CHECK_FALSE(ge->causal);
    CHECK(ge->is_local_layer(0));
    CHECK_FALSE(ge->is_local_layer(5));
    CHECK(ge->attention_behind(true) == 5);  // the last 5 positions up to p: p-4..p
    CHECK(ge->attention_ahead(true) == 4);
    CHECK(ge->attention_behind(false) == 0);
    CHECK(ge->attention_ahead(false) == UINT32_MAX);
    CHECK(ge->attn_scale == Approx(1.0 / std::sqrt(32.0)));  // not gemma3 27B's at 62 layers
    CHECK(ge->dense_feat == 0);
    CHECK_FALSE(model::refuse_non_decoder(*file));
    CHECK(model::refuse_non_decoder(*file, true));

    // The dense projections' widths, checked as llama.cpp checks them.
    auto dense = gemma_embedding(6)
                     .u32("gemma-embedding.dense_2_feat_in", 64)
                     .u32("gemma-embedding.dense_2_feat_out", 256)
                     .u32("gemma-embedding.dense_3_feat_in", 256)
                     .u32("gemma-embedding.dense_3_feat_out", 64)
                     .parse();
    REQUIRE(dense);
    auto with_dense = model::read_hparams(*dense);
    REQUIRE(with_dense);
    CHECK(with_dense->dense_feat == 256);
    auto wrong = gemma_embedding(6)
                     .u32("gemma-embedding.dense_2_feat_out", 256)
                     .u32("gemma-embedding.dense_3_feat_in", 128)
                     .parse();
    REQUIRE(wrong);
    auto refused = model::read_hparams(*wrong);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message(), Catch::Contains("gemma-embedding.dense_3_feat_in") &&
                                              Catch::Contains("dense_2_feat_out 256"));
}

TEST_CASE("a qwen3 reranker reads its labels, and rank pooling elsewhere stays refused") {
    auto rank = llama_like("qwen3")
                    .u32("qwen3.pooling_type", 4)
                    .str_array("qwen3.classifier.output_labels", {"yes", "no"})
                    .parse();
    REQUIRE(rank);
    auto hp = model::read_hparams(*rank);
    REQUIRE(hp);
    CHECK(hp->pooling == model::Pooling::Rank);
    CHECK(hp->n_cls_out == 2);
    auto generation = model::refuse_non_decoder(*rank);
    REQUIRE_FALSE(generation);
    CHECK_THAT(generation.error().message(), Catch::Contains("/v1/rerank"));
    // Without labels the head has one output, as llama.cpp's n_cls_out.
    auto one = llama_like("qwen3").u32("qwen3.pooling_type", 4).parse();
    REQUIRE(one);
    auto hp_one = model::read_hparams(*one);
    REQUIRE(hp_one);
    CHECK(hp_one->n_cls_out == 1);
    auto empty = llama_like("qwen3")
                     .u32("qwen3.pooling_type", 4)
                     .str_array("qwen3.classifier.output_labels", {})
                     .parse();
    REQUIRE(empty);
    auto refused = model::read_hparams(*empty);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message(), Catch::Contains("qwen3.classifier.output_labels"));
    auto qwen2 = llama_like("qwen2").u32("qwen2.pooling_type", 4).parse();
    REQUIRE(qwen2);
    auto no_head = model::read_hparams(*qwen2);
    REQUIRE_FALSE(no_head);
    CHECK_THAT(no_head.error().message(),
               Catch::Contains("qwen2.pooling_type") && Catch::Contains("classifier head"));
}
