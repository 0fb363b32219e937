// The many-models registry (server/model_registry.h) over a fake loader and
// a fake clock: lazy loads, 404 for an unknown id, least-recently-used
// eviction of idle models only, 503 with the arithmetic, keep-alive, a load
// that never holds up another model, Ollama's keep_alive values, a model
// under several ids, and each model's gauges on /metrics.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "model_registry.h"

using namespace ferrox;
using namespace ferrox::server;
using namespace std::chrono_literals;

namespace {

class FakeInstance final : public ModelInstance {
  public:
    FakeInstance(uint64_t bytes, std::atomic<int>& alive) : bytes_(bytes), alive_(alive) {
        ++alive_;
    }
    ~FakeInstance() override { --alive_; }
    const LoadedModel& api() const override { return model_; }
    uint64_t bytes() const override { return bytes_; }
    const LoadGauges* gauges() const override { return &gauges_; }
    LoadGauges gauges_;  // a test sets them as a scheduler would

  private:
    LoadedModel model_;
    uint64_t bytes_;
    std::atomic<int>& alive_;
};

class FakeLoader final : public ModelLoader {
  public:
    uint64_t bytes_needed(const ModelSpec& spec) const override { return spec.file_bytes; }
    Expected<std::unique_ptr<ModelInstance>> load(const ModelSpec& spec) override {
        std::unique_lock lock(m);
        ++loads[spec.id];
        entered.notify_all();
        opened.wait(lock, [&] { return !gated.count(spec.id); });
        if (failing.count(spec.id)) return make_error("{} is not a GGUF file", spec.path.string());
        // Loaded, a model takes more than its file (its KV cache and scratch).
        auto made_now = std::make_unique<FakeInstance>(spec.file_bytes + extra, alive);
        made[spec.id] = &made_now->gauges_;
        return std::unique_ptr<ModelInstance>(std::move(made_now));
    }
    int loads_of(const std::string& id) {
        std::lock_guard lock(m);
        return loads[id];
    }
    void open_gate(const std::string& id) {
        std::lock_guard lock(m);
        gated.erase(id);
        opened.notify_all();
    }
    void wait_entered(const std::string& id) {
        std::unique_lock lock(m);
        entered.wait(lock, [&] { return loads[id] > 0; });
    }
    std::mutex m;
    std::condition_variable opened, entered;
    std::map<std::string, int> loads;
    std::set<std::string> gated, failing;
    std::map<std::string, LoadGauges*> made;  // the last instance's gauges, by id
    std::atomic<int> alive{0};
    uint64_t extra = 0;
};

struct FakeClock {
    std::atomic<int64_t> seconds{1000};
    Clock::time_point now() const {
        return Clock::time_point(std::chrono::seconds(seconds.load()));
    }
};

std::vector<ModelSpec> three_models() {
    return {{"alpha", "/models/alpha.gguf", 100},
            {"beta", "/models/beta.gguf", 100},
            {"gamma", "/models/gamma.gguf", 100}};
}

RegistryOptions options(FakeClock& clock, uint64_t budget, int64_t keep_alive = 300) {
    RegistryOptions o;
    o.budget_bytes = budget;
    o.keep_alive_s = keep_alive;
    o.now = [&clock] { return clock.now(); };
    o.expire_every = 0ms;  // the test calls expire()
    return o;
}

const auto kFar = [] { return Clock::now() + 10s; };

ModelState state_of(const ModelRegistry& r, const std::string& id) {
    for (const ModelStatus& m : r.list())
        if (m.id == id) return m.state;
    FAIL("no model " << id);
    return ModelState::Unloaded;
}

}  // namespace

TEST_CASE("a model loads on its first request, once, and an unknown id is a 404") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 1000));
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);
    {
        auto a = r.acquire("alpha", std::nullopt, kFar());
        REQUIRE(a.lease);
        CHECK(a.lease->id() == "alpha");
        CHECK(state_of(r, "alpha") == ModelState::Loaded);
        CHECK(state_of(r, "beta") == ModelState::Unloaded);
        auto again = r.acquire("alpha", std::nullopt, kFar());
        REQUIRE(again.lease);
    }
    CHECK(loader.loads_of("alpha") == 1);
    for (const std::string id :
         {"delta", "../models/alpha.gguf", "/models/alpha.gguf", "alpha.gguf", ""}) {
        auto missing = r.acquire(id, std::nullopt, kFar());
        CHECK_FALSE(missing.lease);
        CHECK(missing.refusal.status == 404);
        CHECK(missing.refusal.param == "model");
        CHECK(missing.refusal.message.find("does not exist") != std::string::npos);
    }
    CHECK(loader.loads.size() == 1);  // nothing but alpha was ever loaded
}

TEST_CASE("one model's load holds up no request on another model") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 1000));
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    loader.gated.insert("beta");
    std::optional<ModelRegistry::Lease> beta;
    std::thread waiter([&] {
        auto got = r.acquire("beta", std::nullopt, kFar());
        if (got.lease) beta.emplace(std::move(*got.lease));
    });
    loader.wait_entered("beta");
    CHECK(state_of(r, "beta") == ModelState::Loading);
    // While beta loads, alpha is leased and released at once, many times over.
    for (int i = 0; i < 50; ++i) {
        auto a = r.acquire("alpha", std::nullopt, Clock::now() + 100ms);
        REQUIRE(a.lease);
    }
    CHECK(state_of(r, "beta") == ModelState::Loading);
    // A second request for beta waits for the same load; at its deadline it gets 503.
    auto early = r.acquire("beta", std::nullopt, Clock::now() + 50ms);
    CHECK_FALSE(early.lease);
    CHECK(early.refusal.status == 503);
    loader.open_gate("beta");
    waiter.join();
    REQUIRE(beta);
    CHECK(beta->id() == "beta");
    CHECK(loader.loads_of("beta") == 1);
}

TEST_CASE("no room: the least recently used idle model is unloaded, never a busy one") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 250));
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    clock.seconds += 1;
    REQUIRE(r.acquire("beta", std::nullopt, kFar()).lease);
    clock.seconds += 1;
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);  // alpha is now the more recent
    clock.seconds += 1;
    {
        auto g = r.acquire("gamma", std::nullopt, kFar());
        REQUIRE(g.lease);
        CHECK(state_of(r, "beta") == ModelState::Unloaded);
        CHECK(state_of(r, "alpha") == ModelState::Loaded);
        // alpha idle, gamma busy: beta evicts alpha, and then nothing idle is left.
        auto b = r.acquire("beta", std::nullopt, kFar());
        REQUIRE(b.lease);
        CHECK(state_of(r, "alpha") == ModelState::Unloaded);
        auto a = r.acquire("alpha", std::nullopt, kFar());
        CHECK_FALSE(a.lease);
        CHECK(a.refusal.status == 503);
        const std::string& m = a.refusal.message;
        INFO(m);
        CHECK(m.find("needs 100 bytes") != std::string::npos);
        CHECK(m.find("50 of the 250-byte budget") != std::string::npos);
        CHECK(m.find("0 more in idle models") != std::string::npos);
        CHECK(m.find("'gamma' (100 bytes, loaded, 1 in flight)") != std::string::npos);
        CHECK(m.find("'beta' (100 bytes, loaded, 1 in flight)") != std::string::npos);
    }
    r.wait_worker_idle();
    CHECK(loader.alive == 2);  // the unloaded ones were destroyed
}

TEST_CASE("a model larger than the whole budget is refused with the numbers") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 99));
    auto a = r.acquire("alpha", std::nullopt, kFar());
    CHECK_FALSE(a.lease);
    CHECK(a.refusal.status == 503);
    CHECK(a.refusal.message.find("needs 100 bytes and 99 of the 99-byte budget") !=
          std::string::npos);
    CHECK(a.refusal.message.find("held: nothing") != std::string::npos);
    CHECK(loader.loads.empty());
}

TEST_CASE("once loaded, a model is counted at what it took, and its next load too") {
    FakeLoader loader;
    loader.extra = 60;  // 100 bytes of file, 160 loaded
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 250));
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    CHECK(r.list()[0].bytes == 160);
    REQUIRE(r.acquire("beta", std::nullopt, kFar()).lease);  // 160 + 100 > 250: alpha goes
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);
}

TEST_CASE("keep-alive: idle past it unloads, 0 unloads at once, negative keeps") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 1000, 300));
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    clock.seconds += 299;
    r.expire();
    CHECK(state_of(r, "alpha") == ModelState::Loaded);
    clock.seconds += 2;
    r.expire();
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);

    {  // in flight: never expires
        auto a = r.acquire("alpha", std::nullopt, kFar());
        REQUIRE(a.lease);
        clock.seconds += 100000;
        r.expire();
        CHECK(state_of(r, "alpha") == ModelState::Loaded);
    }
    REQUIRE(r.acquire("beta", 0, kFar()).lease);
    CHECK(state_of(r, "beta") == ModelState::Unloaded);  // right after its request
    REQUIRE(r.acquire("gamma", -1, kFar()).lease);
    clock.seconds += 1000000;
    r.expire();
    CHECK(state_of(r, "gamma") == ModelState::Loaded);
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);  // its 300 s ran out meanwhile
    REQUIRE(r.acquire("gamma", 10, kFar()).lease);        // the last request's keep_alive counts
    clock.seconds += 11;
    r.expire();
    CHECK(state_of(r, "gamma") == ModelState::Unloaded);
    r.wait_worker_idle();
    CHECK(loader.alive == 0);  // every instance destroyed once unloaded
}

TEST_CASE("keep-alive: a model's own default, and a request's for that request only") {
    FakeLoader loader;
    FakeClock clock;
    auto specs = three_models();
    specs[0].keep_alive_s = 30;  // a server.models entry's keep_alive
    specs[1].keep_alive_s = -1;
    ModelRegistry r(std::move(specs), loader, options(clock, 1000, 300));
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    REQUIRE(r.acquire("beta", std::nullopt, kFar()).lease);
    REQUIRE(r.acquire("gamma", std::nullopt, kFar()).lease);
    clock.seconds += 31;
    r.expire();
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);  // its own 30 s
    CHECK(state_of(r, "gamma") == ModelState::Loaded);    // the server's 300 s
    clock.seconds += 1000;
    r.expire();
    CHECK(state_of(r, "beta") == ModelState::Loaded);  // kept
    CHECK(state_of(r, "gamma") == ModelState::Unloaded);

    // A request's keep_alive holds after that request; the next one without
    // keep_alive goes back to the model's own (Ollama's rule).
    REQUIRE(r.acquire("alpha", 5000, kFar()).lease);
    clock.seconds += 1000;
    r.expire();
    CHECK(state_of(r, "alpha") == ModelState::Loaded);
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    clock.seconds += 31;
    r.expire();
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);
}

TEST_CASE("a load that fails answers 500 with why, and the next request tries again") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 1000));
    loader.failing.insert("beta");
    auto b = r.acquire("beta", std::nullopt, kFar());
    CHECK_FALSE(b.lease);
    CHECK(b.refusal.status == 500);
    CHECK(b.refusal.message.find("/models/beta.gguf is not a GGUF file") != std::string::npos);
    CHECK(state_of(r, "beta") == ModelState::Unloaded);
    CHECK(r.list()[1].bytes == 0);
    loader.failing.clear();
    CHECK(r.acquire("beta", std::nullopt, kFar()).lease);
    CHECK(loader.loads_of("beta") == 2);
    const std::string text = r.render_metrics();
    INFO(text);
    CHECK(text.find("ferrox:model_load_failures_total{model=\"beta\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_loads_total{model=\"beta\"} 1\n") != std::string::npos);
}

TEST_CASE("draining refuses new leases") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 1000));
    REQUIRE(r.acquire("alpha", std::nullopt, kFar()).lease);
    CHECK(r.drain(Clock::now() + 1s));
    auto a = r.acquire("alpha", std::nullopt, kFar());
    CHECK_FALSE(a.lease);
    CHECK(a.refusal.status == 503);
}

TEST_CASE("keep_alive reads as Ollama's: seconds or a duration") {
    using J = nlohmann::ordered_json;
    CHECK(parse_keep_alive(J(300)) == 300);
    CHECK(parse_keep_alive(J(0)) == 0);
    CHECK(parse_keep_alive(J(-5)) == -1);
    CHECK(parse_keep_alive(J(2.5)) == 3);
    CHECK(parse_keep_alive(J("5m")) == 300);
    CHECK(parse_keep_alive(J("1h30m")) == 5400);
    CHECK(parse_keep_alive(J("90s")) == 90);
    CHECK(parse_keep_alive(J("1.5m")) == 90);
    CHECK(parse_keep_alive(J("250ms")) == 1);
    CHECK(parse_keep_alive(J("-1")) == -1);
    CHECK(parse_keep_alive(J("-1m")) == -1);
    CHECK(parse_keep_alive(J("0")) == 0);
    CHECK(parse_keep_alive(J("45")) == 45);
    CHECK(parse_keep_alive(J(1e300)) == -1);  // beyond any lifetime: kept
    for (const J& bad : {J("5x"), J(""), J("m"), J("1..2s"), J(true), J(nullptr),
                         J(std::string(40, '1')), J::array()}) {
        INFO(bad.dump());
        try {
            (void)parse_keep_alive(bad);
            FAIL("accepted");
        } catch (const ApiError& e) {
            CHECK(e.status == 400);
            CHECK(e.param == "keep_alive");
        }
    }
}

TEST_CASE("the per-model series carry a model label, escaped") {
    FakeLoader loader;
    FakeClock clock;
    std::vector<ModelSpec> specs = three_models();
    specs[2].id = "ga\"m\\ma\n";
    ModelRegistry r(std::move(specs), loader, options(clock, 1000));
    for (int i = 0; i < 3; ++i) {
        auto a = r.acquire("alpha", std::nullopt, kFar());
        REQUIRE(a.lease);
        a.lease->count(11, 7);
    }
    {
        auto b = r.acquire("beta", 0, kFar());
        REQUIRE(b.lease);
        b.lease->count(5, 2);
    }
    const std::string text = r.render_metrics();
    INFO(text);
    CHECK(text.find("# TYPE ferrox:model_requests_total counter\n") != std::string::npos);
    CHECK(text.find("ferrox:model_requests_total{model=\"alpha\"} 3\n") != std::string::npos);
    CHECK(text.find("ferrox:model_prompt_tokens_total{model=\"alpha\"} 33\n") != std::string::npos);
    CHECK(text.find("ferrox:model_generation_tokens_total{model=\"alpha\"} 21\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:model_generation_tokens_total{model=\"beta\"} 2\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:model_loaded{model=\"alpha\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_loaded{model=\"beta\"} 0\n") != std::string::npos);
    // alpha loaded once for its three requests; beta (keep_alive 0) loaded and unloaded.
    CHECK(text.find("# TYPE ferrox:model_loads_total counter\n") != std::string::npos);
    CHECK(text.find("ferrox:model_loads_total{model=\"alpha\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_unloads_total{model=\"alpha\"} 0\n") != std::string::npos);
    CHECK(text.find("ferrox:model_loads_total{model=\"beta\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_unloads_total{model=\"beta\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_load_failures_total{model=\"alpha\"} 0\n") != std::string::npos);
    CHECK(text.find("ferrox:model_requests_total{model=\"ga\\\"m\\\\ma\\n\"} 0\n") !=
          std::string::npos);
}

TEST_CASE("a model answers to each of its ids, and /v1/models lists each") {
    FakeLoader loader;
    FakeClock clock;
    std::vector<ModelSpec> specs = three_models();
    specs[1].aliases = {"b", "bee"};
    ModelRegistry r(std::move(specs), loader, options(clock, 1000));
    {
        auto by_alias = r.acquire("bee", std::nullopt, kFar());
        REQUIRE(by_alias.lease);
        CHECK(by_alias.lease->id() == "beta");  // its metrics label
        auto by_id = r.acquire("beta", std::nullopt, kFar());
        REQUIRE(by_id.lease);
        CHECK(&by_id.lease->model() == &by_alias.lease->model());  // one model, loaded once
    }
    CHECK(loader.loads_of("beta") == 1);
    CHECK(loader.loads_of("bee") == 0);
    std::vector<std::string> ids;
    for (const ModelStatus& m : r.list()) ids.push_back(m.id);
    CHECK(ids == std::vector<std::string>{"alpha", "beta", "b", "bee", "gamma"});
    CHECK(state_of(r, "b") == ModelState::Loaded);
    CHECK(state_of(r, "alpha") == ModelState::Unloaded);
    auto missing = r.acquire("be", std::nullopt, kFar());
    CHECK(missing.refusal.status == 404);
}

TEST_CASE("each model's running, waiting and KV gauges carry its label, and the sums are totals") {
    FakeLoader loader;
    FakeClock clock;
    ModelRegistry r(three_models(), loader, options(clock, 1000, -1));
    auto a = r.acquire("alpha", std::nullopt, kFar());
    auto b = r.acquire("beta", std::nullopt, kFar());
    REQUIRE(a.lease);
    REQUIRE(b.lease);
    // Set each model's gauges as its scheduler would.
    LoadGauges& ga = *loader.made.at("alpha");
    LoadGauges& gb = *loader.made.at("beta");
    ga.running = 2;
    ga.waiting = 1;
    ga.kv_used = 128;
    ga.kv_total = 512;
    gb.running = 1;
    gb.waiting = 0;
    gb.kv_used = 256;
    gb.kv_total = 256;
    const std::string text = r.render_metrics();
    INFO(text);
    CHECK(text.find("# TYPE ferrox:model_num_requests_running gauge\n") != std::string::npos);
    CHECK(text.find("ferrox:model_num_requests_running{model=\"alpha\"} 2\n") != std::string::npos);
    CHECK(text.find("ferrox:model_num_requests_running{model=\"beta\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_num_requests_waiting{model=\"alpha\"} 1\n") != std::string::npos);
    CHECK(text.find("ferrox:model_kv_cache_usage_perc{model=\"alpha\"} 0.25\n") !=
          std::string::npos);
    CHECK(text.find("ferrox:model_kv_cache_usage_perc{model=\"beta\"} 1\n") != std::string::npos);
    // Not loaded: zeros.
    CHECK(text.find("ferrox:model_num_requests_running{model=\"gamma\"} 0\n") != std::string::npos);
    CHECK(text.find("ferrox:model_kv_cache_usage_perc{model=\"gamma\"} 0\n") != std::string::npos);
    const LoadTotals t = r.load_totals();
    CHECK(t.running == 3);
    CHECK(t.waiting == 1);
    CHECK(t.kv_used == 384);
    CHECK(t.kv_total == 768);
    // The unlabelled series read the sums with many models.
    Metrics m;
    m.running = 99;  // the one-model gauges, unused here
    const std::string top = m.render(&t);
    CHECK(top.find("ferrox:num_requests_running 3\n") != std::string::npos);
    CHECK(top.find("ferrox:kv_cache_usage_perc 0.5\n") != std::string::npos);
}
