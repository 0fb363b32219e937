// The decoder's pass over sticky-error Steps (core/src/model/sticky_steps.h):
// a fault injected at each op of a real pass in turn (the decoder's blocks
// over a small dense and a small mixture-of-experts model) leaves the first
// error as the pass's status and no op after it issued.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "decoder.h"
#include "ferrox/model/architecture.h"
#include "random_data.h"
#include "sticky_steps.h"

using namespace ferrox;
using namespace ferrox::model;

namespace {

// Steps that compute nothing: each op is logged; op number `fail_at` fails,
// and so does every op after it, with another message, so a pass that let
// a later op run, or kept a later error, shows it.
class FaultSteps final : public Steps {
  public:
    explicit FaultSteps(size_t fail_at) : fail_at_(fail_at) {}
    std::vector<std::string> log;

    bool resident() const override { return true; }
    Expected<Act> allocate(uint64_t) override { return Act{}; }
    Expected<Act> constant(std::span<const float>) override { return Act{}; }
    Expected<void> upload(std::span<const float>, Act) override { return op("upload"); }
    Expected<void> download(Act, std::span<float> dst) override {
        for (float& v : dst) v = next_value();  // router scores: something to route by
        return op("download");
    }
    Expected<void> embed(std::span<const int32_t>, float, Act) override { return op("embed"); }
    Expected<void> project(const WeightMatrix& w, std::string_view, Act, uint32_t, Act) override {
        return op("project " + w.name());
    }
    Expected<void> rms_norm(std::string_view role, Act, Act, uint64_t, uint32_t, float,
                            Act) override {
        return op("rms_norm " + std::string(role));
    }
    Expected<void> rope(Act, Act, Act, uint32_t, uint32_t, uint32_t, uint32_t, RopeStyle) override {
        return op("rope");
    }
    Expected<void> add(std::string_view role, Act, Act, uint64_t, uint32_t, uint64_t,
                       float) override {
        return op("add " + std::string(role));
    }
    Expected<void> add_rms_norm(std::string_view role, Act, Act, uint64_t, float, Act, uint64_t,
                                uint32_t, float, Act) override {
        return op("add_rms_norm " + std::string(role));
    }
    Expected<void> glu(FfnActivation, Act, Act, uint64_t) override { return op("glu"); }
    Expected<void> store_kv(Act, Act, ferrox_kind, uint64_t) override { return op("store_kv"); }
    Expected<void> attention(ferrox_attention_desc, Act, Act, Act, Act, const Act*) override {
        return op("attention");
    }
    Expected<void> delta_net(const ferrox_delta_net_desc&) override { return op("delta_net"); }
    std::string delta_net_runner() const override { return "none"; }

  private:
    Expected<void> op(std::string name) {
        const size_t i = log.size();
        log.push_back(std::move(name));
        if (i == fail_at_) return make_error("fault at op {} ({})", i, log.back());
        if (i > fail_at_) return make_error("op {} ({}) ran after the fault", i, log.back());
        return {};
    }
    float next_value() { return std::uniform_real_distribution<float>(-2, 2)(rng_); }

    size_t fail_at_;
    std::mt19937_64 rng_{ferrox::test::test_seed(33)};
};

// The context's part of attention, as the decoder calls it: a store and an attention.
struct FakeKv final : KvAttention {
    void store_and_attend(StickySteps& st, uint32_t, bool, uint32_t) override {
        st.store_kv({}, {}, FERROX_KIND_F32, 1);
        st.attention({}, {}, {}, {}, {}, nullptr);
    }
};

WeightMatrix matrix(const std::string& name, uint64_t rows, uint64_t cols) {
    auto m = WeightMatrix::owned(name, FERROX_KIND_F32, rows, cols,
                                 std::vector<std::byte>(rows * cols * sizeof(float)));
    REQUIRE(m);
    return std::move(*m);
}

struct TinyModel {
    Hparams hp;
    ModelWeights w;
    std::vector<LayerConstants> consts;
    Act output_norm;
    RopeSpec rope[2];

    explicit TinyModel(bool moe) {
        hp.arch = find_architecture(moe ? "qwen3moe" : "llama");
        hp.n_embd = 16;
        hp.n_layer = 3;
        hp.n_head = 2;
        hp.n_head_kv = 1;
        hp.head_dim_k = hp.head_dim_v = hp.n_rot = 8;
        hp.vocab = 24;
        hp.rms_eps = 1e-6f;
        if (moe) {
            hp.n_expert = 4;
            hp.n_expert_used = 2;
            hp.n_ff_expert = 8;
        } else {
            hp.n_ff = 32;
        }
        for (int local = 0; local < 2; ++local) rope[local] = rope_spec(hp, {}, local != 0);
        w.output = matrix("output", hp.vocab, hp.n_embd);
        w.layers.resize(hp.n_layer);
        for (LayerWeights& L : w.layers) {
            L.q = matrix("q", q_dim(hp), hp.n_embd);
            L.k = matrix("k", k_dim(hp), hp.n_embd);
            L.v = matrix("v", v_dim(hp), hp.n_embd);
            L.o = matrix("o", hp.n_embd, o_dim(hp));
            if (moe) {
                L.router = matrix("router", hp.n_expert, hp.n_embd);
                for (uint32_t e = 0; e < hp.n_expert; ++e) {
                    L.gate_exps.push_back(matrix("gate_exps", hp.n_ff_expert, hp.n_embd));
                    L.up_exps.push_back(matrix("up_exps", hp.n_ff_expert, hp.n_embd));
                    L.down_exps.push_back(matrix("down_exps", hp.n_embd, hp.n_ff_expert));
                }
            } else {
                L.gate = matrix("gate", hp.n_ff, hp.n_embd);
                L.up = matrix("up", hp.n_ff, hp.n_embd);
                L.down = matrix("down", hp.n_embd, hp.n_ff);
            }
        }
        consts.resize(hp.n_layer);
    }
};

// One pass of three rows (the last wants logits) over FaultSteps(fail_at).
struct PassResult {
    Expected<void> status;
    std::vector<std::string> log;
};

PassResult run_pass(const TinyModel& m, size_t fail_at) {
    const Decoder decoder(m.hp, m.w, m.consts, m.output_norm, m.rope);
    Activations a;
    a.size_host(m.hp, 4, true);
    FaultSteps steps(fail_at);
    StickySteps st(steps);
    FakeKv kv;
    const std::vector<int32_t> tokens{3, 7, 11}, positions{0, 1, 2};
    const std::vector<uint32_t> out_rows{2};
    std::vector<float> logits(m.hp.vocab, -1.0f);
    decoder.forward(st, a, kv, tokens, positions, out_rows, logits);
    return {st.status(), std::move(steps.log)};
}

}  // namespace

TEST_CASE("a fault at any op of a pass keeps the first error and issues no later op") {
    for (const bool moe : {false, true}) {
        const TinyModel m(moe);
        const PassResult clean = run_pass(m, SIZE_MAX);
        REQUIRE(clean.status);
        // Every block is in the pass: attention, FFN (experts), output.
        REQUIRE(clean.log.size() > 20);
        CHECK(clean.log.back() == "download");  // the logits, last
        for (size_t k = 0; k < clean.log.size(); ++k) {
            INFO("moe " << moe << ", fault at op " << k << " of " << clean.log.size());
            const PassResult faulted = run_pass(m, k);
            REQUIRE_FALSE(faulted.status);
            CHECK(faulted.status.error().message() ==
                  "fault at op " + std::to_string(k) + " (" + clean.log[k] + ")");
            // The ops up to the fault are the clean pass's, and none after it ran.
            CHECK(faulted.log ==
                  std::vector<std::string>(clean.log.begin(), clean.log.begin() + long(k) + 1));
        }
    }
}

TEST_CASE("sticky steps keep the first of several host and op errors") {
    FaultSteps steps(SIZE_MAX);
    StickySteps st(steps);
    st.upload({}, {});
    CHECK(st.status());
    st.fail(make_error("first"));
    st.check(make_error("second"));
    st.glu(FfnActivation::Silu, {}, {}, 1);
    CHECK(st.failed());
    CHECK(st.status().error().message() == "first");
    CHECK(steps.log == std::vector<std::string>{"upload"});
}
