// Hyper-parameters are named, never guessed; the capacity plan states its sum.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "ferrox/model/architecture.h"
#include "ferrox/model/capacity.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/hparams_summary.h"
#include "ferrox/model/rope_tables.h"
#include "tiny_gguf.h"

using namespace ferrox;
using ferrox::test::TinyGguf;

namespace {

TinyGguf gemma3_like() {
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
TinyGguf llama_like(const std::string& arch) {
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

}  // namespace

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

TEST_CASE("glm4moe: NextN blocks are kept out of the layers run, and its MoE keys are checked") {
    // GLM-4.5-Air's shape in small: 8 blocks, the last a NextN block, one
    // leading dense layer, one shared expert, a sigmoid gate scaled by 2.5.
    const auto glm = [] {
        return llama_like("glm4moe")
            .u32("glm4moe.expert_count", 8)
            .u32("glm4moe.expert_used_count", 2)
            .u32("glm4moe.expert_feed_forward_length", 32)
            .u32("glm4moe.expert_shared_count", 1)
            .u32("glm4moe.leading_dense_block_count", 1)
            .u32("glm4moe.nextn_predict_layers", 1)
            .f32("glm4moe.expert_weights_scale", 2.5f);
    };
    auto file = glm().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->n_layer == 7);  // block_count - nextn_predict_layers, as llama.cpp runs
    CHECK(hp->n_layer_nextn == 1);
    CHECK(hp->n_ff == 128);  // the leading dense layer's width
    CHECK_FALSE(hp->expert_layer(0));
    CHECK(hp->expert_layer(1));
    CHECK(hp->moe_gating == model::MoeGating::Sigmoid);
    CHECK_FALSE(hp->expert_weights_norm);  // llama.cpp's default when the key is absent
    CHECK(hp->expert_weights_scale == 2.5f);
    CHECK(hp->expert_selection_bias);  // required for glm4moe
    CHECK(hp->n_expert_groups == 0);
    CHECK(hp->n_expert_shared == 1);

    const auto refused_by = [](Expected<model::Hparams> r, const std::string& key) {
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message(), Catch::Contains(key));
    };
    // Each refused for its key: groups that do not split the 8 experts, more
    // groups used than there are, a gating ferrox does not run (sqrt-softplus),
    // NextN blocks leaving nothing to run, more dense layers than
    // layers, a shared-expert count past expert_count, no shared-expert count.
    const std::pair<std::string, uint32_t> bad[] = {
        {"expert_group_count", 3},   {"expert_group_used_count", 2},   {"expert_gating_func", 4},
        {"nextn_predict_layers", 8}, {"leading_dense_block_count", 8}, {"expert_shared_count", 9}};
    for (const auto& [key, value] : bad) {
        INFO(key);
        auto f = glm().without("glm4moe." + key).u32("glm4moe." + key, value).parse();
        REQUIRE(f);
        refused_by(model::read_hparams(*f), "glm4moe." + key);
    }
    auto no_shared = glm().without("glm4moe.expert_shared_count").parse();
    REQUIRE(no_shared);
    refused_by(model::read_hparams(*no_shared), "glm4moe.expert_shared_count");
    auto negative_scale = glm()
                              .without("glm4moe.expert_weights_scale")
                              .f32("glm4moe.expert_weights_scale", -1.0f)
                              .parse();
    REQUIRE(negative_scale);
    refused_by(model::read_hparams(*negative_scale), "glm4moe.expert_weights_scale");
}

namespace {

// DeepSeek V3's key layout, shaped small: one cached head of kv_lora_rank 64 +
// 32 rotated dims, the latent (64) as its value; 64 / 32 per head before absorption.
TinyGguf deepseek2_like() {
    auto g = llama_like("deepseek2");
    g.without("deepseek2.attention.head_count_kv")
        .u32("deepseek2.attention.head_count_kv", 1)
        .u32("deepseek2.attention.key_length", 96)
        .u32("deepseek2.attention.value_length", 64)
        .u32("deepseek2.rope.dimension_count", 32)
        .u32("deepseek2.attention.q_lora_rank", 48)
        .u32("deepseek2.attention.kv_lora_rank", 64)
        .u32("deepseek2.attention.key_length_mla", 64)
        .u32("deepseek2.attention.value_length_mla", 32)
        .u32("deepseek2.leading_dense_block_count", 8);
    return g;
}

// The error of reading deepseek2_like() with `key` set to `value`.
std::string deepseek2_refusal(const std::string& key, uint32_t value) {
    auto g = deepseek2_like();
    g.without(key).u32(key, value);
    auto file = g.parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE_FALSE(hp);
    return hp.error().message();
}

}  // namespace

TEST_CASE("deepseek2's latent attention keys are read, checked against each other and bounded") {
    auto file = deepseek2_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->arch->mla);
    CHECK(hp->arch->rope == model::RopeStyle::Normal);
    CHECK(hp->mla_q_lora == 48);
    CHECK(hp->mla_kv_lora == 64);
    CHECK(hp->mla_head_k == 64);
    CHECK(hp->mla_head_v == 32);
    CHECK(hp->n_rot == 32);
    // q.k scales by the width before absorption, not the cached head's 96.
    CHECK(hp->attn_scale == Approx(1.0 / 8.0));

    const std::string p = "deepseek2.";
    for (const auto& [key, value] : std::initializer_list<std::pair<std::string, uint32_t>>{
             {"attention.head_count_kv", 2},    // not the one latent head
             {"attention.key_length", 100},     // not kv_lora_rank + rope dims
             {"attention.value_length", 32},    // not kv_lora_rank
             {"attention.key_length_mla", 32},  // nothing left unrotated
             {"attention.kv_lora_rank", 1u << 20},
             {"attention.value_length_mla", 0},
             {"expert_count", 8}}) {  // experts without expert_used_count
        INFO(key);
        CHECK_THAT(deepseek2_refusal(p + key, value),
                   Catch::Contains(p + (key == "expert_count" ? "expert_used_count" : key)));
    }
    // Without experts, every layer must be a leading dense one.
    CHECK_THAT(deepseek2_refusal(p + "leading_dense_block_count", 4),
               Catch::Contains(p + "expert_count") && Catch::Contains("4..7"));
    auto missing = deepseek2_like().without("deepseek2.attention.kv_lora_rank").parse();
    REQUIRE(missing);
    auto m = model::read_hparams(*missing);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message(), Catch::Contains("deepseek2.attention.kv_lora_rank"));
    CHECK_FALSE(hp->mla_kv_b);
    // One *_mla key without the other: llama.cpp asserts both or neither.
    auto half = deepseek2_like().without("deepseek2.attention.key_length_mla").parse();
    REQUIRE(half);
    auto h = model::read_hparams(*half);
    REQUIRE_FALSE(h);
    CHECK_THAT(h.error().message(), Catch::Contains("deepseek2.attention.key_length_mla") &&
                                        Catch::Contains("is missing"));
}

namespace {

// An older conversion's keys (attn_kv_b, no *_mla keys): a KV head per query
// head, each 32 unrotated + 32 rotated dims for q.k and 32 for v.
TinyGguf deepseek2_kv_b_like() {
    auto g = deepseek2_like();
    g.without("deepseek2.attention.key_length_mla")
        .without("deepseek2.attention.value_length_mla")
        .without("deepseek2.attention.head_count_kv")
        .without("deepseek2.attention.key_length")
        .without("deepseek2.attention.value_length")
        .u32("deepseek2.attention.head_count_kv", 4)
        .u32("deepseek2.attention.key_length", 64)
        .u32("deepseek2.attention.value_length", 32);
    return g;
}

}  // namespace

TEST_CASE("deepseek2's attention temperature takes its length from attention.temperature_length") {
    auto g = deepseek2_like();
    g.f32("deepseek2.attention.temperature_scale", 0.1f)
        .u32("deepseek2.rope.scaling.original_context_length", 4096);
    auto no_length = g.parse();
    REQUIRE(no_length);
    auto refused = model::read_hparams(*no_length);
    REQUIRE_FALSE(refused);  // llama.cpp asserts a length: not the original context, as mistral3
    CHECK_THAT(refused.error().message(),
               Catch::Contains("deepseek2.attention.temperature_length"));
    g.u32("deepseek2.attention.temperature_length", 8192);
    auto file = g.parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->attn_temp_scale == Approx(0.1));
    CHECK(hp->attn_temp_length == 8192);
}

TEST_CASE("deepseek2 without the *_mla keys reads as the un-absorbed attn_kv_b layout") {
    auto file = deepseek2_kv_b_like().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->mla_kv_b);
    CHECK(hp->n_head_kv == 4);
    CHECK(hp->mla_head_k == 64);  // key_length's widths stand for the *_mla keys
    CHECK(hp->mla_head_v == 32);
    CHECK(hp->attn_scale == Approx(1.0 / 8.0));  // 1/sqrt(key_length)

    // Every head needs its own cached key: fewer KV heads than heads is refused.
    auto g = deepseek2_kv_b_like();
    g.without("deepseek2.attention.head_count_kv").u32("deepseek2.attention.head_count_kv", 1);
    auto shared = g.parse();
    REQUIRE(shared);
    auto s = model::read_hparams(*shared);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message(), Catch::Contains("deepseek2.attention.head_count_kv") &&
                                        Catch::Contains("attn_kv_b"));
    // Nothing left unrotated in key_length.
    auto n = deepseek2_kv_b_like();
    n.without("deepseek2.attention.key_length").u32("deepseek2.attention.key_length", 32);
    auto narrow = n.parse();
    REQUIRE(narrow);
    auto r = model::read_hparams(*narrow);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains("deepseek2.attention.key_length") &&
                                        Catch::Contains("no unrotated part"));
}

namespace {

// DeepSeek V3's MoE keys, shaped small: 8 experts in 4 groups (2 used), top 2,
// one shared expert, the first layer dense.
TinyGguf deepseek2_moe() {
    auto g = deepseek2_like();
    g.without("deepseek2.leading_dense_block_count")
        .u32("deepseek2.leading_dense_block_count", 1)
        .u32("deepseek2.expert_count", 8)
        .u32("deepseek2.expert_used_count", 2)
        .u32("deepseek2.expert_feed_forward_length", 32)
        .u32("deepseek2.expert_shared_count", 1)
        .u32("deepseek2.expert_group_count", 4)
        .u32("deepseek2.expert_group_used_count", 2);
    return g;
}

}  // namespace

TEST_CASE("deepseek2's experts: gating from the file, group-limited routing, every count bounded") {
    auto file = deepseek2_moe().parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->n_expert == 8);
    CHECK(hp->n_layer_dense_lead == 1);
    CHECK(hp->n_ff == 128);
    CHECK(hp->n_expert_groups == 4);
    CHECK(hp->n_expert_groups_used == 2);
    CHECK(hp->moe_gating == model::MoeGating::Softmax);  // V2's files have no gating key
    CHECK_FALSE(hp->expert_weights_norm);                // llama.cpp's default
    CHECK_FALSE(hp->expert_selection_bias);              // no exp_probs_b in the file
    CHECK(hp->expert_layer(1));
    CHECK_FALSE(hp->expert_layer(0));

    auto with = [](const std::string& key, uint32_t v) {
        auto g = deepseek2_moe();
        g.without("deepseek2." + key).u32("deepseek2." + key, v);
        auto f = g.parse();
        REQUIRE(f);
        return model::read_hparams(*f);
    };
    auto sigmoid = with("expert_gating_func", 2);
    REQUIRE(sigmoid);
    CHECK(sigmoid->moe_gating == model::MoeGating::Sigmoid);
    // Kimi K2 / V2-Lite: one group, one used -- no group choice.
    auto one = deepseek2_moe()
                   .without("deepseek2.expert_group_count")
                   .without("deepseek2.expert_group_used_count")
                   .u32("deepseek2.expert_group_count", 1)
                   .u32("deepseek2.expert_group_used_count", 1)
                   .parse();
    REQUIRE(one);
    auto o = model::read_hparams(*one);
    REQUIRE(o);
    CHECK(o->n_expert_groups == 1);

    // Each refused naming its key: groups that do not divide the experts, or
    // of one expert (a group scores by its two best), none or more groups
    // used than there are, more experts used than the used groups hold, a
    // gating ferrox does not run.
    const std::tuple<std::string, uint32_t, std::string> bad[] = {
        {"expert_group_count", 3, "expert_group_count"},
        {"expert_group_count", 8, "expert_group_count"},
        {"expert_group_used_count", 0, "expert_group_used_count"},
        {"expert_group_used_count", 5, "expert_group_used_count"},
        {"expert_used_count", 5, "expert_used_count"},  // 2 groups of 2 = 4 eligible
        {"expert_used_count", 9, "expert_used_count"},
        {"expert_gating_func", 3, "expert_gating_func"}};
    for (const auto& [key, value, named] : bad) {
        INFO(key << " = " << value);
        auto r = with(key, value);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message(), Catch::Contains("deepseek2." + named));
    }
}

TEST_CASE("DeepSeek V3's key set loads, and its YaRN scales q.k by mscale^2, not the pairs") {
    // DeepSeek V3's keys as the converter writes them, shaped small: 256
    // experts in 8 groups (4 used), top 8, sigmoid by key, YaRN factor 40 over
    // 4096 with betas 32 and 1, mscale_all_dim 1 (the file says 0.1).
    const auto v3 = [](float log_mul_key) {
        auto g = deepseek2_moe();
        for (const auto& [key, v] : {std::pair<std::string, uint32_t>{"expert_count", 256},
                                     {"expert_used_count", 8},
                                     {"expert_group_count", 8},
                                     {"expert_group_used_count", 4}})
            g.without("deepseek2." + key).u32("deepseek2." + key, v);
        g.u32("deepseek2.expert_gating_func", 2)
            .f32("deepseek2.expert_weights_scale", 2.5f)
            .boolean("deepseek2.expert_weights_norm", true)
            .str("deepseek2.rope.scaling.type", "yarn")
            .f32("deepseek2.rope.scaling.factor", 40.0f)
            .u32("deepseek2.rope.scaling.original_context_length", 4096)
            .f32("deepseek2.rope.scaling.yarn_beta_fast", 32.0f)
            .f32("deepseek2.rope.scaling.yarn_beta_slow", 1.0f);
        if (log_mul_key >= 0) g.f32("deepseek2.rope.scaling.yarn_log_multiplier", log_mul_key);
        return g;
    };
    const double ln40 = std::log(40.0);
    for (const float key : {0.1f, 0.0707f, -1.0f}) {  // -1: the key absent
        INFO(key);
        auto file = v3(key).parse();
        REQUIRE(file);
        auto hp = model::read_hparams(*file);
        REQUIRE(hp);
        CHECK(hp->n_expert_groups == 8);
        CHECK(hp->moe_gating == model::MoeGating::Sigmoid);
        const double m =
            key < 0 ? 0.0 : static_cast<double>(key) / 0.1;  // llama.cpp undoes the converter's 0.1
        CHECK(hp->rope_yarn_log_mul == Approx(m));
        // The rope kernel's magnitude (1 + 0.1 ln 40) times the spec's factor: 1
        // with a log multiplier (llama.cpp's mscale = mscale_all_dim), and
        // 1 + 0.1 ln 40 without one.
        const auto spec = model::rope_spec(*hp, {}, false);
        const double magnitude = static_cast<double>(spec.attn_factor) * (1.0 + 0.1 * ln40);
        CHECK(magnitude == Approx(key < 0 ? 1.0 + 0.1 * ln40 : 1.0).epsilon(1e-6));
        const double mscale = magnitude * (1.0 + 0.1 * m * ln40);
        CHECK(hp->attn_scale == Approx(mscale * mscale / 8.0).epsilon(1e-6));
    }
    // The betas llama.cpp does not read for deepseek2 (it keeps 32 and 1):
    // Kimi K2's config says 1 and 1, refused by key rather than run otherwise.
    auto kimi = v3(0.1f)
                    .without("deepseek2.rope.scaling.yarn_beta_fast")
                    .f32("deepseek2.rope.scaling.yarn_beta_fast", 1.0f)
                    .parse();
    REQUIRE(kimi);
    auto k = model::read_hparams(*kimi);
    REQUIRE_FALSE(k);
    CHECK_THAT(k.error().message(),
               Catch::Contains("deepseek2.rope.scaling.yarn_beta_fast") && Catch::Contains("32"));
}

TEST_CASE("GLM-4.7-Flash's key set: NextN kept, sigmoid gating guessed by shape as llama.cpp") {
    // 48 blocks, the last a NextN block, vocabulary 154880, one group, no
    // expert_gating_func (its early conversions lack it).
    const auto flash = [](uint32_t blocks) {
        auto g = deepseek2_moe();
        g.without("deepseek2.block_count")
            .u32("deepseek2.block_count", blocks)
            .u32("deepseek2.nextn_predict_layers", 1)
            .without("deepseek2.expert_group_count")
            .without("deepseek2.expert_group_used_count")
            .u32("deepseek2.expert_group_count", 1)
            .u32("deepseek2.expert_group_used_count", 1)
            .without_tensor("token_embd.weight")
            .tensor("token_embd.weight", 1, 154880, 0.5f);
        return g;
    };
    auto file = flash(48).parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE(hp);
    CHECK(hp->n_layer == 47);
    CHECK(hp->n_layer_nextn == 1);
    CHECK(hp->vocab == 154880);
    CHECK(hp->moe_gating == model::MoeGating::Sigmoid);
    // Another shape without the key: softmax, llama.cpp's default for deepseek2.
    auto other = flash(40).parse();
    REQUIRE(other);
    auto h = model::read_hparams(*other);
    REQUIRE(h);
    CHECK(h->moe_gating == model::MoeGating::Softmax);
}

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
    auto g = gemma4_like();
    g.without(key).u32(key, value);
    auto file = g.parse();
    REQUIRE(file);
    auto hp = model::read_hparams(*file);
    REQUIRE_FALSE(hp);
    return hp.error().message();
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

    const auto refused_by = [](TinyGguf g, const std::string& key, const std::string& why) {
        auto f = g.parse();
        REQUIRE(f);
        auto r = model::read_hparams(*f);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message(), Catch::Contains(key) && Catch::Contains(why));
    };
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
