// Engine::open, the one load sequence (ferrox/engine.h), on a real model:
// the context, sequences and batch it decides (the rule of
// ferrox/model/defaults.h), a context made from them that decodes, each
// refusal with the step it came from, and the C API's load giving the same
// logits as the engine it wraps.
//
//   engine_open MODEL.gguf   (tiny-llama, trained on 256 positions; exit 77
//                             when the file is absent: skipped)
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "c_api_status.h"
#include "ferrox/engine.h"
#include "ferrox/ferrox.h"
#include "ferrox/model/defaults.h"
#include "tiny_gguf.h"

namespace {

using ferrox::Engine;
using ferrox::EngineOptions;
using ferrox::OpenFailure;

int failures = 0;

void expect(bool ok, const std::string& what) {
    if (ok) return;
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

EngineOptions options_with(uint32_t context, uint32_t sequences, uint32_t batch) {
    EngineOptions o;
    o.context = context;
    o.sequences = sequences;
    o.batch = batch;
    return o;
}

// What the engine decides for each way of asking, on a model trained on
// `train` positions.
void decided_numbers(const std::filesystem::path& path, uint32_t train) {
    struct Case {
        uint32_t context, sequences, batch;  // asked
        uint32_t want_context, want_batch;
    };
    const uint32_t per_seq = std::min(ferrox::model::kContextPerSequence, train);
    const Case cases[] = {
        {0, 1, 0, per_seq, std::min(ferrox::model::kDefaultBatch, per_seq)},
        {0, 4, 0, 4 * per_seq, ferrox::model::kDefaultBatch},
        // serve's batch of 512 on a context shorter than it: derived, not refused.
        {0, 1, 512, per_seq, std::min(512u, per_seq)},
        {100, 1, 512, 100, 100},
        {600, 3, 512, 600, 512},
    };
    for (const Case& c : cases) {
        const std::string what = "context " + std::to_string(c.context) + ", sequences " +
                                 std::to_string(c.sequences) + ", batch " + std::to_string(c.batch);
        auto e = Engine::open(path, options_with(c.context, c.sequences, c.batch));
        if (!e) {
            expect(false, what + ": " + e.error().message());
            continue;
        }
        const Engine& engine = **e;
        expect(engine.context() == c.want_context, what + ": context " +
                                                       std::to_string(engine.context()) +
                                                       ", want " + std::to_string(c.want_context));
        expect(engine.batch() == c.want_batch, what + ": batch " + std::to_string(engine.batch()) +
                                                   ", want " + std::to_string(c.want_batch));
        expect(engine.sequences() == c.sequences, what + ": sequences");
        const auto co = engine.context_options();
        expect(co.context == engine.context() && co.sequences == engine.sequences() &&
                   co.batch == engine.batch(),
               what + ": context_options carries the decided numbers");
        // The context a server would make from them is made, and takes a
        // whole batch of random tokens in its last sequence.
        auto ctx = ferrox::model::Context::create(engine.model(), co);
        if (!ctx) {
            expect(false, what + ": Context::create: " + ctx.error().message());
            continue;
        }
        std::mt19937 rng(static_cast<unsigned>(c.context * 31 + c.sequences * 7 + c.batch));
        std::uniform_int_distribution<int32_t> token(
            3, static_cast<int32_t>(engine.model().vocab() - 1));
        ferrox::model::Batch batch;
        const int32_t seq = static_cast<int32_t>(c.sequences - 1);
        for (uint32_t i = 0; i < engine.batch(); ++i)
            batch.add(token(rng), static_cast<int32_t>(i), {seq}, i + 1 == engine.batch());
        const auto st = (*ctx)->decode(batch);
        expect(st.ok(), what + ": a full batch decodes: " + st.message);
    }
}

void refusals(const std::filesystem::path& path, const std::filesystem::path& adapter) {
    OpenFailure why = OpenFailure::None;
    auto missing = Engine::open("/nonexistent/model.gguf", {}, &why);
    expect(!missing && why == OpenFailure::Io &&
               contains(missing.error().message(), "/nonexistent/model.gguf"),
           "a missing file is an i/o failure naming the file");

    auto lora = Engine::open(adapter, {}, &why);
    expect(!lora && why == OpenFailure::BadModel && contains(lora.error().message(), "adapter"),
           "a LoRA adapter is refused for what it is: " +
               (lora ? std::string("opened") : lora.error().message()));

    for (uint32_t sequences : {0u, 65u}) {
        auto e = Engine::open(path, options_with(0, sequences, 0), &why);
        expect(!e && why == OpenFailure::BadModel && contains(e.error().message(), "1..64"),
               "sequences " + std::to_string(sequences) + " is refused with the range");
    }

    EngineOptions odd_cache;
    odd_cache.kv_kinds = {FERROX_KIND_F16, FERROX_KIND_Q4_K};  // V's kind is checked too
    auto k4 = Engine::open(path, odd_cache, &why);
    expect(!k4 && why == OpenFailure::BadModel &&
               contains(k4.error().message(),
                        "KV cache kind Q4_K is not supported (F32, F16, Q8_0, Q4_0)"),
           "a KV cache kind outside the cache kinds is refused, naming them: " +
               (k4 ? std::string("opened") : k4.error().message()));

    EngineOptions nothing_ready;
    nothing_ready.backend_order = {"nosuch"};
    auto none = Engine::open(path, nothing_ready, &why);
    expect(!none && why == OpenFailure::Backend &&
               contains(none.error().message(), "no backend of backends.order [nosuch] is ready"),
           "no ready backend is refused at open, naming the order");

    for (const float cancel_at : {0.0f, 1.0f}) {
        EngineOptions cancelling;
        std::vector<float> seen;
        cancelling.progress = [&](float f) {
            seen.push_back(f);
            return f == cancel_at;
        };
        auto e = Engine::open(path, std::move(cancelling), &why);
        expect(!e && why == OpenFailure::Cancelled && !seen.empty() && seen.back() == cancel_at,
               "progress returning true at " + std::to_string(cancel_at) + " cancels");
    }
}

// ferrox_model_load is an adapter over Engine::open: the same numbers and,
// on the same random tokens, the same logits bit for bit.
void c_api_agrees(const std::filesystem::path& path) {
    auto opened = Engine::open(path, {});
    if (!opened) return expect(false, "Engine::open: " + opened.error().message());
    Engine& engine = **opened;
    ferrox_call_status st = ferrox::test::fresh_status();
    ferrox_model* model = nullptr;
    if (ferrox_model_load(path.c_str(), nullptr, &model, &st) != FERROX_CODE_OK)
        return expect(false, std::string("ferrox_model_load: ") + st.message);
    expect(ferrox_model_n_ctx(model) == engine.context() &&
               ferrox_model_n_batch(model) == engine.batch(),
           "the C API reports the engine's context and batch");

    const uint64_t seed = std::getenv("FERROX_TEST_SEED")
                              ? std::strtoull(std::getenv("FERROX_TEST_SEED"), nullptr, 10)
                              : 33;
    std::printf("seed %llu (set FERROX_TEST_SEED to replay)\n",
                static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    const auto vocab = static_cast<uint32_t>(engine.model().vocab());
    std::uniform_int_distribution<int32_t> token(3, static_cast<int32_t>(vocab - 1));
    std::vector<int32_t> tokens(24);
    for (auto& t : tokens) t = token(rng);

    std::vector<float> want(vocab);
    if (auto r = engine.model().forward(tokens, 0, want); !r)
        expect(false, "forward: " + r.error().message());

    ferrox_context* ctx = nullptr;
    std::vector<int32_t> positions(tokens.size()), seqs(tokens.size(), 0);
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = static_cast<int32_t>(i);
    ferrox_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = static_cast<uint32_t>(tokens.size());
    b.tokens = tokens.data();
    b.positions = positions.data();
    b.seq_ids = seqs.data();
    const float* got = nullptr;
    if (ferrox_context_new(model, nullptr, &ctx, &st) != FERROX_CODE_OK ||
        ferrox_decode(ctx, &b, &st) != FERROX_CODE_OK ||
        ferrox_logits(ctx, b.n_tokens - 1, &got, &st) != FERROX_CODE_OK) {
        expect(false, std::string("C API decode: ") + st.message);
    } else {
        bool same = true, finite = true;
        for (uint32_t i = 0; i < vocab; ++i) {
            same = same && got[i] == want[i];
            finite = finite && std::isfinite(want[i]);
        }
        expect(finite, "the engine's logits are finite");
        expect(same, "the C API's logits equal the engine's, bit for bit");
    }
    ferrox_context_free(ctx);
    ferrox_model_free(model);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: engine_open MODEL.gguf\n");
        return 2;
    }
    const std::filesystem::path path = argv[1];
    if (!std::filesystem::exists(path)) {
        std::printf("SKIP: %s is absent\n", path.c_str());
        return 77;
    }
    auto probe = Engine::open(path, {});
    if (!probe) {
        std::fprintf(stderr, "FAIL: Engine::open: %s\n", probe.error().message().c_str());
        return 1;
    }
    const uint32_t train = (*probe)->model().hparams().n_ctx_train;
    probe = ferrox::Error("released");  // one model at a time
    decided_numbers(path, train);
    // As convert_lora_to_gguf.py marks one: the base model's architecture, no tokenizer.
    const auto adapter = std::filesystem::temp_directory_path() /
                         ("ferrox-engine-adapter-" + std::to_string(::getpid()) + ".gguf");
    const bool written = ferrox::test::TinyGguf{}
                             .str("general.architecture", "llama")
                             .str("general.type", "adapter")
                             .str("adapter.type", "lora")
                             .f32("adapter.lora.alpha", 16.0f)
                             .tensor("blk.0.attn_q.weight.lora_a", 64, 8, 0.5f)
                             .write(adapter.string());
    expect(written, "the adapter file is written");
    refusals(path, adapter);
    std::filesystem::remove(adapter);
    c_api_agrees(path);
    if (failures == 0) std::printf("ok: Engine::open on %s\n", path.c_str());
    return failures ? 1 : 0;
}
