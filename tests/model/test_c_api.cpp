// ferrox.h without a model: argument checks, versioned structs, the sampler
// through the C API. (With a model: examples/batched run by ctest.)
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "c_api_status.h"
#include "ferrox/ferrox.h"
#include "ferrox/sampler_chain.h"
#include "tiny_gguf.h"

using ferrox::test::fresh_status;

TEST_CASE("NULL arguments are refused with a message, never dereferenced") {
    auto st = fresh_status();
    ferrox_model* model = nullptr;
    CHECK(ferrox_model_load(nullptr, nullptr, &model, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(std::strlen(st.message) > 0);
    CHECK(ferrox_decode(nullptr, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(ferrox_logits(nullptr, 0, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(ferrox_context_new(nullptr, nullptr, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(ferrox_sampler_sample(nullptr, nullptr, 0, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT);
    // A NULL status is allowed: the code alone comes back.
    CHECK(ferrox_seq_remove(nullptr, 0, 0, -1, nullptr) == FERROX_CODE_INVALID_ARGUMENT);
    ferrox_model_free(nullptr);
    ferrox_context_free(nullptr);
    ferrox_sampler_free(nullptr);
}

TEST_CASE("API 0.2's reports refuse NULL with a message and answer empty for a NULL model") {
    auto st = fresh_status();
    const char* text = nullptr;
    CHECK(ferrox_model_capacity_summary(nullptr, &text, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(std::string(st.message), Catch::Contains("ferrox_model_capacity_summary"));
    ferrox_residency r{};
    r.struct_size = sizeof r;
    CHECK(ferrox_model_residency(nullptr, &r, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(std::string(st.message), Catch::Contains("ferrox_model_residency"));
    uint64_t calls = 7;
    CHECK(ferrox_model_kernel_calls(nullptr, &calls, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(calls == 7);
    char buf[16];
    size_t needed = 0;
    CHECK(ferrox_model_kernel_report(nullptr, buf, sizeof buf, &needed, &st) ==
          FERROX_CODE_INVALID_ARGUMENT);
    CHECK(ferrox_token_text(nullptr, 0, buf, sizeof buf, &needed, &st) ==
          FERROX_CODE_INVALID_ARGUMENT);
    CHECK(ferrox_context_profile(nullptr, &text, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(std::string(st.message), Catch::Contains("context is NULL"));
    CHECK(ferrox_context_profile_reset(nullptr, nullptr) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(std::string(ferrox_model_arch(nullptr)).empty());
    CHECK(ferrox_model_n_layer(nullptr) == 0);
    CHECK(ferrox_model_n_embd(nullptr) == 0);
    CHECK(ferrox_model_n_ctx(nullptr) == 0);
    CHECK(ferrox_model_n_batch(nullptr) == 0);
    CHECK(ferrox_api_version() == (FERROX_API_VERSION_MAJOR << 16 | FERROX_API_VERSION_MINOR));
    CHECK(FERROX_API_VERSION_MINOR == 9u);
    CHECK(ferrox_checkpoint_size(nullptr) == 0);
    CHECK(ferrox_model_is_recurrent(nullptr) == 0);
}

TEST_CASE("API 0.9: kv_value_kind defaults to kv_kind's, and an unknown one is refused by name") {
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    CHECK(mp.kv_value_kind == FERROX_KV_SAME);
    // Checked before the file is opened: the message names the member.
    auto st = fresh_status();
    mp.kv_kind = FERROX_KV_Q8_0;
    mp.kv_value_kind = static_cast<ferrox_kv_kind>(-2);  // none of the kinds
    ferrox_model* model = nullptr;
    CHECK(ferrox_model_load("/nonexistent.gguf", &mp, &model, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(std::string(st.message), Catch::Contains("kv_value_kind -2"));
    // A known pair passes that check (the missing file is the error then).
    mp.kv_value_kind = FERROX_KV_F16;
    st = fresh_status();
    CHECK(ferrox_model_load("/nonexistent.gguf", &mp, &model, &st) != FERROX_CODE_OK);
    CHECK_THAT(std::string(st.message), !Catch::Contains("kv_value_kind"));
    CHECK(model == nullptr);
}

TEST_CASE("a struct_size larger than the library knows, or too small, is refused") {
    auto st = fresh_status();
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    mp.struct_size = sizeof mp + 8;
    ferrox_model* model = nullptr;
    CHECK(ferrox_model_load("/nonexistent.gguf", &mp, &model, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(std::string(st.message).find("struct_size") != std::string::npos);
    ferrox_sampler_params sp;
    ferrox_sampler_params_default(&sp);
    sp.struct_size = 2;
    ferrox_sampler* s = nullptr;
    CHECK(ferrox_sampler_new(&sp, &s, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(s == nullptr);
}

TEST_CASE("an older, shorter status struct gets only the fields it has") {
    // A caller that knows only struct_size and code: the message is not written.
    struct Old {
        uint32_t struct_size;
        ferrox_code code;
        char guard[8];
    } old{};
    old.struct_size = offsetof(ferrox_call_status, message);
    std::memset(old.guard, 'x', sizeof old.guard);
    ferrox_model* model = nullptr;
    CHECK(
        ferrox_model_load(nullptr, nullptr, &model, reinterpret_cast<ferrox_call_status*>(&old)) ==
        FERROX_CODE_INVALID_ARGUMENT);
    CHECK(old.code == FERROX_CODE_INVALID_ARGUMENT);
    for (char c : old.guard) CHECK(c == 'x');
}

TEST_CASE("a missing model file is an i/o error naming the file") {
    auto st = fresh_status();
    ferrox_model* model = nullptr;
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    const auto code = ferrox_model_load("/nonexistent/model.gguf", &mp, &model, &st);
    CHECK(code != FERROX_CODE_OK);
    CHECK(model == nullptr);
    CHECK(std::string(st.message).find("/nonexistent/model.gguf") != std::string::npos);
}

TEST_CASE("a LoRA adapter is refused for what it is, not for its missing tokenizer") {
    // As convert_lora_to_gguf.py marks one: the base model's architecture, no tokenizer.
    const auto path = (std::filesystem::temp_directory_path() /
                       ("ferrox-c-api-adapter-" + std::to_string(::getpid()) + ".gguf"))
                          .string();
    REQUIRE(ferrox::test::TinyGguf{}
                .str("general.architecture", "llama")
                .str("general.type", "adapter")
                .str("adapter.type", "lora")
                .f32("adapter.lora.alpha", 16.0f)
                .tensor("blk.0.attn_q.weight.lora_a", 64, 8, 0.5f)
                .write(path));
    auto st = fresh_status();
    ferrox_model* model = nullptr;
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    const auto code = ferrox_model_load(path.c_str(), &mp, &model, &st);
    std::filesystem::remove(path);
    CHECK(code == FERROX_CODE_INVALID_ARGUMENT);
    CHECK(model == nullptr);
    const std::string message = st.message;
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("'general.type'") &&
                            Catch::Contains("LoRA adapter") &&
                            Catch::Contains("does not apply yet"));
    CHECK_THAT(message, !Catch::Contains("tokenizer"));
}

TEST_CASE("the C sampler draws what the C++ chain with the same stages draws") {
    std::vector<float> logits(200);
    for (size_t i = 0; i < logits.size(); ++i)
        logits[i] = std::sin(static_cast<float>(i) * 0.37f) * 4.0f;
    ferrox_sampler_params sp;
    ferrox_sampler_params_default(&sp);
    sp.seed = 77;
    sp.temperature = 0.9f;
    sp.frequency_penalty = 0.3f;
    auto st = fresh_status();
    ferrox_sampler* s = nullptr;
    REQUIRE(ferrox_sampler_new(&sp, &s, &st) == FERROX_CODE_OK);
    ferrox::SamplerChain chain(77);
    chain.add(ferrox::penalties_stage(sp.repeat_last_n, 1.0f, 0.3f, 0.0f))
        .add(ferrox::top_k_stage(sp.top_k))
        .add(ferrox::temperature_stage(0.9f))
        .add(ferrox::top_p_stage(sp.top_p))
        .add(ferrox::min_p_stage(sp.min_p))
        .add(ferrox::distribution_stage());
    for (int i = 0; i < 30; ++i) {
        int32_t a = -1;
        REQUIRE(ferrox_sampler_sample(s, logits.data(), 200, &a, &st) == FERROX_CODE_OK);
        const int32_t b = chain.sample(logits);
        REQUIRE(a == b);
        ferrox_sampler_accept(s, &a, 1, &st);
        chain.accept(b);
    }
    ferrox_sampler_free(s);
    sp.top_p = 1.5f;
    CHECK(ferrox_sampler_new(&sp, &s, &st) == FERROX_CODE_INVALID_ARGUMENT);
}

TEST_CASE("API 0.7's embeddings refuse NULL, and a model without pooling, with a message") {
    auto st = fresh_status();
    CHECK(ferrox_model_pooling(nullptr) == FERROX_POOLING_NONE);
    const int32_t tokens[] = {1, 2};
    const int32_t* inputs[] = {tokens};
    const size_t lengths[] = {2};
    float out[4];
    CHECK(ferrox_embed(nullptr, 1, inputs, lengths, 1, out, 4, &st) ==
          FERROX_CODE_INVALID_ARGUMENT);
    // A plain decoder loads with `embeddings` set, and ferrox_embed says why it cannot pool.
    const char* home = std::getenv("HOME");
    const std::filesystem::path tiny =
        std::filesystem::path(home ? home : "/root") / ".cache/ferrox/tiny-models/tiny-qwen3.gguf";
    if (!std::filesystem::exists(tiny)) {
        WARN("skipped the model half: " << tiny << " is absent (tests/model/make_tiny_models.py)");
        return;
    }
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    mp.embeddings = 1;
    mp.n_ctx_max = 64;
    ferrox_model* model = nullptr;
    REQUIRE(ferrox_model_load(tiny.c_str(), &mp, &model, &st) == FERROX_CODE_OK);
    CHECK(ferrox_model_pooling(model) == FERROX_POOLING_NONE);
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    ferrox_context* ctx = nullptr;
    REQUIRE(ferrox_context_new(model, &cp, &ctx, &st) == FERROX_CODE_OK);
    std::vector<float> vec(ferrox_model_n_embd(model));
    CHECK(ferrox_embed(ctx, 1, inputs, lengths, 1, vec.data(), vec.size(), &st) ==
          FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(st.message,
               Catch::Contains("not an embedding model") && Catch::Contains("qwen3.pooling_type"));
    ferrox_context_free(ctx);
    ferrox_model_free(model);
}

TEST_CASE("API 0.8: ferrox_model_is_recurrent says which models cannot drop a tail") {
    const char* home = std::getenv("HOME");
    const std::filesystem::path dir =
        std::filesystem::path(home ? home : "/root") / ".cache/ferrox/tiny-models";
    for (const auto& [name, recurrent] :
         {std::pair{"tiny-qwen35.gguf", 1}, std::pair{"tiny-qwen3.gguf", 0}}) {
        const std::filesystem::path path = dir / name;
        if (!std::filesystem::exists(path)) {
            WARN("skipped: " << path << " is absent (tests/model/make_tiny_models.py)");
            continue;
        }
        auto st = fresh_status();
        ferrox_model_params mp;
        ferrox_model_params_default(&mp);
        mp.n_ctx_max = 64;
        ferrox_model* model = nullptr;
        REQUIRE(ferrox_model_load(path.c_str(), &mp, &model, &st) == FERROX_CODE_OK);
        CHECK(ferrox_model_is_recurrent(model) == recurrent);
        ferrox_context_params cp;
        ferrox_context_params_default(&cp);
        ferrox_context* ctx = nullptr;
        REQUIRE(ferrox_context_new(model, &cp, &ctx, &st) == FERROX_CODE_OK);
        // What the answer promises: a recurrent model refuses to drop a tail.
        const int32_t tokens[] = {5, 6, 7, 8}, positions[] = {0, 1, 2, 3}, seqs[] = {0, 0, 0, 0};
        ferrox_batch batch{};
        batch.struct_size = sizeof batch;
        batch.n_tokens = 4;
        batch.tokens = tokens;
        batch.positions = positions;
        batch.seq_ids = seqs;
        REQUIRE(ferrox_decode(ctx, &batch, &st) == FERROX_CODE_OK);
        const ferrox_code removed = ferrox_seq_remove(ctx, 0, 2, -1, &st);
        CHECK((removed == FERROX_CODE_OK) == (recurrent == 0));
        ferrox_context_free(ctx);
        ferrox_model_free(model);
    }
}

namespace {

// Decodes tokens[from, to) on sequence 0 in one call; the last row's logits.
std::vector<float> decode_range(ferrox_context* ctx, const std::vector<int32_t>& tokens,
                                int32_t from, int32_t to, uint32_t vocab) {
    std::vector<int32_t> pos, seq(size_t(to - from), 0);
    for (int32_t p = from; p < to; ++p) pos.push_back(p);
    ferrox_batch batch{};
    batch.struct_size = sizeof batch;
    batch.n_tokens = uint32_t(to - from);
    batch.tokens = tokens.data() + from;
    batch.positions = pos.data();
    batch.seq_ids = seq.data();
    auto st = fresh_status();
    REQUIRE(ferrox_decode(ctx, &batch, &st) == FERROX_CODE_OK);
    const float* logits = nullptr;
    REQUIRE(ferrox_logits(ctx, batch.n_tokens - 1, &logits, &st) == FERROX_CODE_OK);
    return {logits, logits + vocab};
}

}  // namespace

TEST_CASE("API 0.9: a rewound checkpoint continues as the uninterrupted run, bit for bit") {
    const char* home = std::getenv("HOME");
    const char* tiny = std::getenv("FERROX_TINY_MODELS");
    const std::filesystem::path dir =
        tiny && *tiny ? std::filesystem::path(tiny)
                      : std::filesystem::path(home ? home : "/root") / ".cache/ferrox/tiny-models";
    for (const auto& [name, recurrent] :
         {std::pair{"tiny-qwen35.gguf", true}, std::pair{"tiny-qwen3.gguf", false}}) {
        const std::filesystem::path path = dir / name;
        if (!std::filesystem::exists(path)) {
            WARN("skipped: " << path << " is absent (tests/model/make_tiny_models.py)");
            continue;
        }
        auto st = fresh_status();
        ferrox_model_params mp;
        ferrox_model_params_default(&mp);
        mp.n_ctx_max = 128;
        ferrox_model* model = nullptr;
        REQUIRE(ferrox_model_load(path.c_str(), &mp, &model, &st) == FERROX_CODE_OK);
        ferrox_context_params cp;
        ferrox_context_params_default(&cp);
        ferrox_context* ctx = nullptr;
        REQUIRE(ferrox_context_new(model, &cp, &ctx, &st) == FERROX_CODE_OK);
        const uint32_t vocab = ferrox_model_vocab(model);
        std::vector<int32_t> prompt(60), branch(60), other(60);
        for (size_t i = 0; i < prompt.size(); ++i) {  // arbitrary, non-zero, distinct histories
            prompt[i] = int32_t(7 + i * 37 % 200);
            branch[i] = int32_t(11 + i * 53 % 190);
            other[i] = i == 5 ? prompt[i] + 1 : prompt[i];
        }
        const size_t size = ferrox_checkpoint_size(ctx);
        size_t needed = 0;
        std::vector<unsigned char> ckpt;
        if (!recurrent) {
            CHECK(size == 0);
            (void)decode_range(ctx, prompt, 0, 20, vocab);
            CHECK(ferrox_seq_checkpoint(ctx, 0, nullptr, 0, &needed, &st) ==
                  FERROX_CODE_INVALID_ARGUMENT);
        } else {
            REQUIRE(size > 0);
            // The uninterrupted run: 20 tokens, then 40 (calls of more than 16 rows).
            (void)decode_range(ctx, prompt, 0, 20, vocab);
            const auto want = decode_range(ctx, prompt, 20, 60, vocab);
            // 20 tokens, a checkpoint (the size asked first), another branch, the rewind.
            REQUIRE(ferrox_kv_clear(ctx, &st) == FERROX_CODE_OK);
            (void)decode_range(ctx, prompt, 0, 20, vocab);
            CHECK(ferrox_seq_checkpoint(ctx, 0, nullptr, 0, &needed, &st) ==
                  FERROX_CODE_BUFFER_TOO_SMALL);
            CHECK(needed == size);
            ckpt.resize(needed);
            REQUIRE(ferrox_seq_checkpoint(ctx, 0, ckpt.data(), ckpt.size(), &needed, &st) ==
                    FERROX_CODE_OK);
            std::vector<int32_t> taken = prompt;
            std::copy(branch.begin() + 20, branch.end(), taken.begin() + 20);
            (void)decode_range(ctx, taken, 20, 50, vocab);
            CHECK(ferrox_seq_rewind(ctx, 0, ckpt.data(), ckpt.size() - 1, &st) ==
                  FERROX_CODE_INVALID_ARGUMENT);  // truncated: refused, nothing changed
            int32_t lo = 0, hi = 0;
            REQUIRE(ferrox_seq_pos_range(ctx, 0, &lo, &hi, &st) == FERROX_CODE_OK);
            CHECK(hi == 49);
            REQUIRE(ferrox_seq_rewind(ctx, 0, ckpt.data(), ckpt.size(), &st) == FERROX_CODE_OK);
            REQUIRE(ferrox_seq_pos_range(ctx, 0, &lo, &hi, &st) == FERROX_CODE_OK);
            CHECK(hi == 19);
            const auto got = decode_range(ctx, prompt, 20, 60, vocab);
            CHECK(std::memcmp(got.data(), want.data(), vocab * sizeof(float)) == 0);
            // The comparison sees a wrong state: the checkpoint of a history
            // that differs at position 5, rewound onto the prompt's cells.
            REQUIRE(ferrox_kv_clear(ctx, &st) == FERROX_CODE_OK);
            (void)decode_range(ctx, other, 0, 20, vocab);
            REQUIRE(ferrox_seq_checkpoint(ctx, 0, ckpt.data(), ckpt.size(), &needed, &st) ==
                    FERROX_CODE_OK);
            REQUIRE(ferrox_kv_clear(ctx, &st) == FERROX_CODE_OK);
            (void)decode_range(ctx, prompt, 0, 20, vocab);
            REQUIRE(ferrox_seq_rewind(ctx, 0, ckpt.data(), ckpt.size(), &st) == FERROX_CODE_OK);
            const auto wrong = decode_range(ctx, prompt, 20, 60, vocab);
            CHECK(std::memcmp(wrong.data(), want.data(), vocab * sizeof(float)) != 0);
        }
        CHECK(ferrox_seq_rewind(ctx, 0, nullptr, 0, &st) == FERROX_CODE_INVALID_ARGUMENT);
        ferrox_context_free(ctx);
        ferrox_model_free(model);
    }
}

TEST_CASE("a non-causal encoder loads for embeddings only, embeds, and refuses decode by name") {
    const char* dir = std::getenv("FERROX_TINY_MODELS");
    const char* home = std::getenv("HOME");
    const std::filesystem::path tiny =
        (dir && *dir ? std::filesystem::path(dir)
                     : std::filesystem::path(home ? home : "/root") / ".cache/ferrox/tiny-models") /
        "tiny-gemma-embedding.gguf";
    if (!std::filesystem::exists(tiny)) {
        WARN("skipped: " << tiny << " is absent (tests/model/make_tiny_models.py)");
        return;
    }
    auto st = fresh_status();
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    mp.n_ctx_max = 64;
    ferrox_model* model = nullptr;
    // Not for generation: refused naming the architecture.
    CHECK(ferrox_model_load(tiny.c_str(), &mp, &model, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(st.message, Catch::Contains("is 'gemma-embedding': non-causal"));
    mp.embeddings = 1;
    REQUIRE(ferrox_model_load(tiny.c_str(), &mp, &model, &st) == FERROX_CODE_OK);
    CHECK(ferrox_model_pooling(model) == FERROX_POOLING_MEAN);
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    cp.n_seq = 2;
    ferrox_context* ctx = nullptr;
    REQUIRE(ferrox_context_new(model, &cp, &ctx, &st) == FERROX_CODE_OK);
    const int32_t a[] = {2, 100, 200, 300}, b[] = {2, 400};
    const int32_t* inputs[] = {a, b};
    const size_t lengths[] = {4, 2};
    const uint32_t n_embd = ferrox_model_n_embd(model);
    std::vector<float> out(2 * size_t{n_embd});
    REQUIRE(ferrox_embed(ctx, 2, inputs, lengths, 1, out.data(), out.size(), &st) ==
            FERROX_CODE_OK);
    double norm = 0;
    for (uint32_t i = 0; i < n_embd; ++i) norm += double{out[i]} * double{out[i]};
    CHECK(norm == Approx(1.0).epsilon(1e-5));
    // Logits are not a non-causal model's output.
    const int32_t positions[] = {0, 1, 2, 3}, seqs[] = {0, 0, 0, 0};
    const uint8_t want[] = {0, 0, 0, 1};
    ferrox_batch batch{sizeof(ferrox_batch), 4, a, positions, seqs, want};
    CHECK(ferrox_decode(ctx, &batch, &st) == FERROX_CODE_INVALID_ARGUMENT);
    CHECK_THAT(st.message,
               Catch::Contains("attends non-causally") && Catch::Contains("never logits"));
    ferrox_context_free(ctx);
    ferrox_model_free(model);
}
