// Attention through the dispatcher (ABI 1.1): the CPU plugin's kernel against
// the core's own loop, and the core's fallback when a backend has no entry.
#include <algorithm>
#include <optional>
#include <random>

#include "cpu_rig.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

struct Shape {
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v;
};

// The cache in `kind` (empty for f32, read in place): f16 rounded, q8_0 and
// q4_0 quantized by the reference block quantizer; `values` becomes what the
// reference dequantizer reads back, so the reference sees exactly what the
// kernel should read.
std::vector<std::byte> to_kind(std::vector<float>& values, ferrox_kind kind) {
    std::vector<std::byte> stored;
    if (kind == FERROX_KIND_F32) return stored;
    stored.resize(*row_bytes(kind, values.size()));
    REQUIRE(quant::quantize_row(kind, values.data(), stored.data(), values.size()));
    REQUIRE(quant::dequantize_row(kind, stored.data(), values.data(), values.size()));
    return stored;
}

// Query rows, caches and an output buffer for one attention call.
struct Case {
    ferrox_attention_desc desc{};
    std::vector<float> q, keys, values, out;
    std::vector<std::byte> stored_keys, stored_values;

    // Values of `value_kind` (ABI 1.8), by default the keys' kind.
    Case(const Shape& s, uint32_t n_query, uint32_t pos0, uint32_t window, std::mt19937_64& rng,
         ferrox_kind kv_kind = FERROX_KIND_F32, std::optional<ferrox_kind> value_kind = {})
        : q(gaussian(size_t{n_query} * s.n_head * s.head_dim_k, rng)),
          keys(gaussian(size_t{pos0 + n_query} * s.n_head_kv * s.head_dim_k, rng)),
          values(gaussian(size_t{pos0 + n_query} * s.n_head_kv * s.head_dim_v, rng)),
          out(size_t{n_query} * s.n_head * s.head_dim_v, -7.0f),
          stored_keys(to_kind(keys, kv_kind)),
          stored_values(to_kind(values, value_kind.value_or(kv_kind))) {
        const ferrox_kind v_kind = value_kind.value_or(kv_kind);
        desc.struct_size = sizeof desc;
        desc.abi_version = FERROX_ABI_VERSION;
        desc.n_query = n_query;
        desc.pos0 = pos0;
        desc.window = window;
        desc.n_head = s.n_head;
        desc.n_head_kv = s.n_head_kv;
        desc.head_dim_k = s.head_dim_k;
        desc.head_dim_v = s.head_dim_v;
        desc.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim_k));
        desc.kv_kind = kv_kind;
        desc.value_kind = v_kind;
        desc.q = q.data();
        desc.keys = kv_kind == FERROX_KIND_F32 ? static_cast<const void*>(keys.data())
                                               : static_cast<const void*>(stored_keys.data());
        desc.values = v_kind == FERROX_KIND_F32 ? static_cast<const void*>(values.data())
                                                : static_cast<const void*>(stored_values.data());
        desc.out = out.data();
    }

    // The core's loop (ops::attend), row by row: the reference.
    std::vector<float> reference() const {
        const model::ops::AttentionShape shape{desc.n_head,     desc.n_head_kv, desc.head_dim_k,
                                               desc.head_dim_v, desc.scale,     desc.softcap,
                                               desc.sinks};
        const size_t q_row = size_t{desc.n_head} * desc.head_dim_k;
        const size_t o_row = size_t{desc.n_head} * desc.head_dim_v;
        std::vector<float> want(out.size()), scores(desc.pos0 + desc.n_query);
        const uint32_t end = desc.pos0 + desc.n_query - 1;
        for (uint32_t i = 0; i < desc.n_query; ++i) {
            const uint32_t pos = desc.pos0 + i;
            const uint32_t first = desc.window && pos + 1 > desc.window ? pos + 1 - desc.window : 0;
            // ABI 1.7: up to `lookahead` later positions, never past the call's last row.
            const uint32_t last = end - pos > desc.lookahead ? pos + desc.lookahead : end;
            model::ops::attend(shape, {q.data() + i * q_row, q_row}, keys.data(), values.data(),
                               first, last, scores, {want.data() + i * o_row, o_row});
        }
        return want;
    }
};

}  // namespace

TEST_CASE("the cpu plugin's attention matches the core's loop on every isa path") {
    std::mt19937_64 rng(test_seed(0xa77e));
    // Grouped heads in passes of 4 with every remainder, head sizes with and
    // without a 16-float tail, keys and values of different widths.
    const Shape shapes[] = {{4, 1, 256, 256}, {8, 1, 64, 64}, {7, 1, 33, 17},
                            {6, 2, 20, 20},   {5, 5, 16, 8},  {3, 1, 48, 48}};
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        for (const Shape& s : shapes)
            for (uint32_t n_query : {1u, 5u, 9u})
                for (uint32_t pos0 : {0u, 13u})
                    for (uint32_t window : {0u, 4u})
                        for (ferrox_kind kv : {FERROX_KIND_F32, FERROX_KIND_F16, FERROX_KIND_Q8_0,
                                               FERROX_KIND_Q4_0}) {
                            // Block kinds only where heads are whole blocks.
                            if (!is_float_kind(kv) &&
                                (s.head_dim_k % 32 != 0 || s.head_dim_v % 32 != 0))
                                continue;
                            Case c(s, n_query, pos0, window, rng, kv);
                            bool host_ran = false;
                            auto r = rig.dispatch->attention(c.desc, "attention",
                                                             [&] { host_ran = true; });
                            INFO("isa " << isa << " kv " << kind_name(kv) << " heads " << s.n_head
                                        << "/" << s.n_head_kv << " dims " << s.head_dim_k << "/"
                                        << s.head_dim_v << " n " << n_query << " pos0 " << pos0
                                        << " window " << window);
                            REQUIRE(r.has_value());
                            CHECK_FALSE(host_ran);
                            CHECK(nmse(c.out, c.reference()) < 1e-10);
                        }
    }
}

TEST_CASE("keys of one kind over values of another (ABI 1.8) match the core's loop on every isa") {
    std::mt19937_64 rng(test_seed(0x6b76));
    constexpr ferrox_kind kinds[] = {FERROX_KIND_F32, FERROX_KIND_F16, FERROX_KIND_Q8_0,
                                     FERROX_KIND_Q4_0};
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        for (ferrox_kind k : kinds)
            for (ferrox_kind v : kinds) {
                if (k == v) continue;
                // Grouped heads with a remainder; 700, one row: positions split across threads.
                for (const auto& [shape, n_query, pos0] :
                     {std::tuple{Shape{6, 2, 64, 32}, 5u, 13u},
                      std::tuple{Shape{4, 1, 32, 64}, 1u, 700u}}) {
                    Case c(shape, n_query, pos0, 0, rng, k, v);
                    bool host_ran = false;
                    auto r = rig.dispatch->attention(c.desc, "attention", [&] { host_ran = true; });
                    INFO("isa " << isa << " K " << kind_name(k) << " V " << kind_name(v) << " n "
                                << n_query << " pos0 " << pos0);
                    REQUIRE(r.has_value());
                    CHECK_FALSE(host_ran);
                    CHECK(nmse(c.out, c.reference()) < 1e-10);
                }
            }
    }
    // Recorded under K's kind, the kernel naming the pair.
    CpuRig rig(1);
    Case c({2, 1, 32, 32}, 3, 0, 0, rng, FERROX_KIND_Q8_0, FERROX_KIND_F16);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    REQUIRE(report.entries.size() == 1);
    CHECK(report.entries[0].outcome == Outcome::Hit);
    CHECK(report.entries[0].key.kind == FERROX_KIND_Q8_0);
    CHECK(report.entries[0].detail == "cpu.attention.k_q8_0.v_f16");
}

TEST_CASE("values read as the keys' kind (an injected fault) fail the mixed-kind check") {
    std::mt19937_64 rng(test_seed(0x6b77));
    CpuRig rig(1);
    // f16 keys over f32 values: read as f16, the values' bytes stay inside
    // their buffer (half of it) but are the wrong numbers.
    Case c({4, 2, 32, 32}, 3, 5, 0, rng, FERROX_KIND_F16, FERROX_KIND_F32);
    c.desc.value_kind = c.desc.kv_kind;
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    CHECK(nmse(c.out, c.reference()) > 1e-2);
    // And a 1.7-sized descriptor (no value_kind) reads values as the keys' kind: the same fault.
    c.desc.value_kind = FERROX_KIND_F32;
    c.desc.struct_size = offsetof(ferrox_attention_desc, value_kind);
    std::fill(c.out.begin(), c.out.end(), -7.0f);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    CHECK(nmse(c.out, c.reference()) > 1e-2);
}

TEST_CASE("a plugin without 1.8's attention_kinds is never handed mixed kinds: the core attends") {
    std::mt19937_64 rng(test_seed(0x6b78));
    CpuRig rig(1);
    // The cpu plugin's own table, cut to a 1.7 build's length and label.
    auto& table = const_cast<ferrox_backend&>(rig.plugins.selected().front()->raw());
    table.abi_version = (1u << 16) | 7u;
    table.struct_size = offsetof(ferrox_backend, attention_kinds);
    Case c({4, 2, 32, 32}, 3, 5, 0, rng, FERROX_KIND_Q8_0, FERROX_KIND_F16);
    bool host_ran = false;
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [&] { host_ran = true; }).has_value());
    CHECK(host_ran);
    rig.dispatch->probe_attention(FERROX_KIND_Q8_0, FERROX_KIND_F16, "attention");
    // One kind for K and V: the same table runs it.
    Case same({4, 2, 32, 32}, 3, 5, 0, rng, FERROX_KIND_Q8_0);
    host_ran = false;
    REQUIRE(rig.dispatch->attention(same.desc, "plain", [&] { host_ran = true; }).has_value());
    CHECK_FALSE(host_ran);
    table.abi_version = FERROX_ABI_VERSION;
    table.struct_size = sizeof table;
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    int mixed = 0;
    for (const auto& e : report.entries) {
        if (e.key.role == "plain") {
            CHECK(e.outcome == Outcome::Hit);
            continue;
        }
        ++mixed;  // the dispatch and the probe
        CHECK(e.outcome == Outcome::ByDesign);
        CHECK_THAT(e.detail, Catch::Contains("predates ABI 1.8"));
    }
    CHECK(mixed == 2);
}

TEST_CASE(
    "decode attention over a long context, its positions split across threads, matches the core "
    "loop") {
    std::mt19937_64 rng(test_seed(0x5911));
    // One query row and one KV head: too few tasks for the pool, so the
    // plugin splits the positions and merges the parts.
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        for (uint32_t n_query : {1u, 2u})
            for (uint32_t window : {0u, 300u, 1000u}) {
                for (ferrox_kind kv : {window == 300 ? FERROX_KIND_F16 : FERROX_KIND_F32,
                                       n_query == 1 ? FERROX_KIND_Q8_0 : FERROX_KIND_Q4_0}) {
                    Case c({4, 1, 64, 64}, n_query, 700, window, rng, kv);
                    auto r = rig.dispatch->attention(c.desc, "attention", [] {});
                    INFO("isa " << isa << " n " << n_query << " window " << window << " kv "
                                << kind_name(kv));
                    REQUIRE(r.has_value());
                    CHECK(nmse(c.out, c.reference()) < 1e-10);
                }
            }
    }
}

TEST_CASE("soft-capped attention (ABI 1.4) matches the core's capped loop, split or not") {
    std::mt19937_64 rng(test_seed(0x50f7));
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        for (float cap : {0.5f, 3.0f})
            for (uint32_t pos0 : {0u, 13u, 700u})  // 700, one row: positions split across threads
                for (uint32_t n_query : {1u, 5u}) {
                    Case c({4, 2, 64, 64}, n_query, pos0, 0, rng);
                    // Scores of a few units, so a cap of 0.5 or 3 changes them.
                    c.desc.scale = 0.5f;
                    c.desc.softcap = cap;
                    auto r = rig.dispatch->attention(c.desc, "attention", [] {});
                    INFO("isa " << isa << " cap " << cap << " pos0 " << pos0 << " n " << n_query);
                    REQUIRE(r.has_value());
                    const std::vector<float> want = c.reference();
                    CHECK(nmse(c.out, want) < 1e-10);
                    c.desc.softcap = 0.0f;
                    // The cap matters here (one position alone has weight 1 either way).
                    if (pos0 + n_query > 1) CHECK(nmse(want, c.reference()) > 1e-4);
                }
    }
}

TEST_CASE("attention sinks (ABI 1.5) match the core's loop with sinks, split or not") {
    std::mt19937_64 rng(test_seed(0x5141));
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        for (uint32_t pos0 : {0u, 13u, 700u})  // 700, one row: positions split across threads
            for (uint32_t n_query : {1u, 5u})
                for (uint32_t window : {0u, 8u}) {
                    Case c({4, 2, 64, 64}, n_query, pos0, window, rng);
                    // Sinks around the scores' size, one far above them (that
                    // head's output shrinks towards 0), one far below (no effect).
                    std::vector<float> sinks = gaussian(4, rng, 2.0f);
                    sinks[1] = 30.0f;
                    sinks[2] = -30.0f;
                    c.desc.sinks = sinks.data();
                    auto r = rig.dispatch->attention(c.desc, "attention", [] {});
                    INFO("isa " << isa << " pos0 " << pos0 << " n " << n_query << " window "
                                << window);
                    REQUIRE(r.has_value());
                    const std::vector<float> want = c.reference();
                    CHECK(nmse(c.out, want) < 1e-10);
                    // The sinks really change the result (the test could not pass without them).
                    c.desc.sinks = nullptr;
                    CHECK(nmse(want, c.reference()) > 1e-3);
                }
    }
}

TEST_CASE("non-causal attention (ABI 1.7 lookahead) matches the core's loop, split or not") {
    std::mt19937_64 rng(test_seed(0x1007));
    for (const std::string& isa : runnable_isas()) {
        CpuRig rig(2, isa);
        // UINT32_MAX: the whole call (a global layer); 4 with a window of 5:
        // the symmetric window p-4..p+4 (gemma-embedding's local layers).
        for (const auto& [lookahead, window] :
             {std::pair{UINT32_MAX, 0u}, std::pair{4u, 5u}, std::pair{1u, 0u}})
            for (uint32_t pos0 : {0u, 13u})
                for (uint32_t n_query : {1u, 9u, 300u})  // 1 row of 300: positions split
                    for (ferrox_kind kv : {FERROX_KIND_F32, FERROX_KIND_Q8_0}) {
                        Case c({4, 2, 64, 64}, n_query, pos0, window, rng, kv);
                        c.desc.lookahead = lookahead;
                        bool host_ran = false;
                        auto r =
                            rig.dispatch->attention(c.desc, "attention", [&] { host_ran = true; });
                        INFO("isa " << isa << " lookahead " << lookahead << " window " << window
                                    << " pos0 " << pos0 << " n " << n_query);
                        REQUIRE(r.has_value());
                        CHECK_FALSE(host_ran);
                        const std::vector<float> want = c.reference();
                        CHECK(nmse(c.out, want) < 1e-10);
                        // Later positions really change the rows (not for a single row).
                        c.desc.lookahead = 0;
                        if (n_query > 1) CHECK(nmse(want, c.reference()) > 1e-4);
                    }
    }
}

TEST_CASE("a plugin built before 1.7 is never handed a lookahead: the core attends itself") {
    std::mt19937_64 rng(test_seed(0x1008));
    CpuRig rig(1);
    Case c({4, 2, 32, 32}, 6, 0, 0, rng);
    c.desc.lookahead = UINT32_MAX;
    auto& table = const_cast<ferrox_backend&>(rig.plugins.selected().front()->raw());
    table.abi_version = (1u << 16) | 6u;
    bool host_ran = false;
    REQUIRE(rig.dispatch->attention(c.desc, "bidirectional", [&] { host_ran = true; }).has_value());
    CHECK(host_ran);
    table.abi_version = FERROX_ABI_VERSION;
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    REQUIRE(report.entries.size() == 1);
    CHECK(report.entries[0].outcome == Outcome::ByDesign);
    CHECK_THAT(report.entries[0].detail,
               Catch::Contains("is ABI 1.6: its attention entries cannot be told a lookahead "
                               "(non-causal attention) (ABI 1.7)"));
    // A 1.6 descriptor ends before the field: causal.
    const std::vector<float> causal = [&] {
        Case d = c;
        d.desc.lookahead = 0;
        return d.reference();
    }();
    c.desc.struct_size = offsetof(ferrox_attention_desc, lookahead);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    CHECK(nmse(c.out, causal) < 1e-10);
}

TEST_CASE("a plugin built before 1.5 is never handed sinks, and a 1.4 descriptor has none") {
    std::mt19937_64 rng(test_seed(0x5142));
    CpuRig rig(1);
    Case c({4, 2, 32, 32}, 3, 5, 0, rng);
    const std::vector<float> plain = c.reference();
    std::vector<float> sinks = gaussian(4, rng, 2.0f);
    c.desc.sinks = sinks.data();  // past a 1.4 descriptor's end: never read
    c.desc.struct_size = offsetof(ferrox_attention_desc, sinks);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    CHECK(nmse(c.out, plain) < 1e-10);
    c.desc.struct_size = sizeof c.desc;

    auto& table = const_cast<ferrox_backend&>(rig.plugins.selected().front()->raw());
    table.abi_version = (1u << 16) | 4u;
    bool host_ran = false;
    REQUIRE(rig.dispatch->attention(c.desc, "sinks", [&] { host_ran = true; }).has_value());
    CHECK(host_ran);
    table.abi_version = FERROX_ABI_VERSION;
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    REQUIRE(report.entries.size() == 2);
    for (const auto& e : report.entries) {
        if (e.key.role != "sinks") continue;
        CHECK(e.outcome == Outcome::ByDesign);
        CHECK_THAT(e.detail, Catch::Contains("is ABI 1.4: its attention entries cannot be told "
                                             "attention sinks (ABI 1.5)"));
    }
}

TEST_CASE("a descriptor from a core before 1.4 is uncapped, and a negative cap is refused") {
    std::mt19937_64 rng(test_seed(0x50f8));
    CpuRig rig(1);
    Case c({4, 2, 32, 32}, 3, 5, 0, rng);
    c.desc.scale = 0.5f;
    const std::vector<float> uncapped = c.reference();
    c.desc.softcap = 0.5f;  // past a 1.3 descriptor's end: never read
    c.desc.struct_size = offsetof(ferrox_attention_desc, softcap);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    CHECK(nmse(c.out, uncapped) < 1e-10);
    c.desc.struct_size = sizeof c.desc;
    c.desc.softcap = -1.0f;
    auto r = rig.dispatch->attention(c.desc, "attention", [] {});
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message(), Catch::Contains("softcap"));
}

TEST_CASE("a plugin built before 1.4 is never handed a cap: the core attends itself, by design") {
    std::mt19937_64 rng(test_seed(0x50f9));
    CpuRig rig(1);
    // The cpu plugin's own table, relabelled as a 1.3 build's: same entries,
    // no promise to read softcap.
    auto& table = const_cast<ferrox_backend&>(rig.plugins.selected().front()->raw());
    table.abi_version = (1u << 16) | 3u;
    Case c({4, 2, 32, 32}, 3, 5, 0, rng);
    c.desc.softcap = 0.5f;
    bool host_ran = false;
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [&] { host_ran = true; }).has_value());
    CHECK(host_ran);
    rig.dispatch->probe_attention(FERROX_KIND_F32, FERROX_KIND_F32, "attention", {.softcap = true});
    c.desc.softcap = 0.0f;  // uncapped, the same plugin runs it
    host_ran = false;
    REQUIRE(rig.dispatch->attention(c.desc, "plain", [&] { host_ran = true; }).has_value());
    CHECK_FALSE(host_ran);
    table.abi_version = FERROX_ABI_VERSION;
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    int capped = 0;
    for (const auto& e : report.entries) {
        if (e.key.role == "plain") {
            CHECK(e.outcome == Outcome::Hit);
            continue;
        }
        ++capped;  // the dispatch and the probe
        CHECK(e.outcome == Outcome::ByDesign);
        CHECK_THAT(e.detail, Catch::Contains("is ABI 1.3: its attention entries cannot be told a "
                                             "soft cap (ABI 1.4)"));
    }
    CHECK(capped == 2);
}

TEST_CASE("attention on the cpu plugin is recorded as a hit on its named kernel") {
    std::mt19937_64 rng(test_seed(7));
    CpuRig rig(1);
    Case c({2, 1, 32, 32}, 3, 0, 0, rng);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    REQUIRE(report.entries.size() == 1);
    CHECK(report.entries[0].key.op == FERROX_OP_ATTENTION);
    CHECK(report.entries[0].outcome == Outcome::Hit);
    CHECK(report.entries[0].detail == "cpu.attention.f32");
}

TEST_CASE("an f16 cache is recorded under its own kernel, and another kind is refused") {
    std::mt19937_64 rng(test_seed(8));
    CpuRig rig(1);
    Case c({2, 1, 32, 32}, 3, 0, 0, rng, FERROX_KIND_F16);
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [] {}).has_value());
    c.desc.kv_kind = c.desc.value_kind = FERROX_KIND_Q4_1;
    bool host_ran = false;
    // No backend claims a Q4_1 cache: the core's loop is asked (and records a miss).
    REQUIRE(rig.dispatch->attention(c.desc, "attention", [&] { host_ran = true; }).has_value());
    CHECK(host_ran);
    const RegistryReport report = rig.registry.seal();
    INFO(report.render());
    REQUIRE(report.entries.size() == 2);
    bool saw_f16 = false, saw_miss = false;
    for (const auto& e : report.entries) {
        saw_f16 |= e.key.kind == FERROX_KIND_F16 && e.outcome == Outcome::Hit &&
                   e.detail == "cpu.attention.f16";
        saw_miss |= e.key.kind == FERROX_KIND_Q4_1 && e.outcome == Outcome::Miss;
    }
    CHECK(saw_f16);
    CHECK(saw_miss);
}

TEST_CASE("a malformed attention descriptor is refused with the reason") {
    std::mt19937_64 rng(test_seed(11));
    CpuRig rig(1);
    Case uneven({3, 2, 16, 16}, 2, 0, 0, rng);
    auto r = rig.dispatch->attention(uneven.desc, "attention", [] {});
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message(), Catch::Contains("multiple of n_head_kv"));

    Case no_keys({2, 1, 16, 16}, 2, 0, 0, rng);
    no_keys.desc.keys = nullptr;
    r = rig.dispatch->attention(no_keys.desc, "attention", [] {});
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message(), Catch::Contains("null"));

    // A q8_0 head of 48 dims would split a block between heads.
    Case split_block({2, 1, 48, 48}, 2, 0, 0, rng, FERROX_KIND_Q8_0);
    r = rig.dispatch->attention(split_block.desc, "attention", [] {});
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message(), Catch::Contains("multiples of 32"));
}

TEST_CASE("an ABI 1.0 plugin is never called past its table: the core attends itself, as a miss") {
    TempDir dir;
    install_plugin(fixture("old"), dir.path());
    PluginSet plugins =
        PluginSet::load(config_from("backends: {order: [old]}"), only_folder(dir.path()));
    REQUIRE(plugins.selected().size() == 1);
    KernelRegistry registry;
    Dispatcher dispatch(plugins.selected(), registry);
    std::mt19937_64 rng(test_seed(3));
    Case c({2, 1, 16, 16}, 2, 0, 0, rng);
    bool host_ran = false;
    // The fixture's slot past struct_size aborts if called.
    REQUIRE(dispatch.attention(c.desc, "attention", [&] { host_ran = true; }).has_value());
    CHECK(host_ran);
    const RegistryReport report = registry.seal();
    INFO(report.render());
    REQUIRE(report.entries.size() == 1);
    CHECK(report.entries[0].outcome == Outcome::Miss);
    CHECK(report.entries[0].detail == Dispatcher::kHostAttention);
}
