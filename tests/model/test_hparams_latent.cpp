// glm4moe's NextN blocks and experts; deepseek2's latent attention (both
// layouts), its experts, YaRN and attention temperature.
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
    return test::refusal_of(deepseek2_like(), key, value);
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
