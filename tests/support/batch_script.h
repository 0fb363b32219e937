// One scripted run of 4 sequences through a model::Context, shared by the
// multi-sequence tests (tests/model/resident_batches.cpp against the resident
// fixture, tests/cuda/test_cuda_batches.cpp on a GPU): prefills and decode
// steps mixed in a batch, different lengths, a sequence that starts late, one
// that is replaced by a copy of another's cells (a shared prefix), one with
// positions removed from its middle (holes), rows in rotating order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "plain_checks.h"

namespace ferrox::test {

// One wanted row's logits and the sequence it belongs to.
struct ScriptRow {
    int32_t seq = 0;
    std::vector<float> logits;
};
using ScriptRows = std::vector<ScriptRow>;

// The script, the same for every context it runs on. `only_seq0` runs
// sequence 0's part alone (the same tokens at the same positions).
inline ScriptRows run_batch_script(model::Context& c, uint64_t vocab, bool only_seq0,
                                   std::string& error) {
    ScriptRows out;
    std::mt19937 rng(20261202);
    std::uniform_int_distribution<int32_t> tok(
        1, static_cast<int32_t>(std::min<uint64_t>(vocab, 30000) - 1));
    std::vector<int32_t> next_pos(4, 0);
    std::vector<bool> live(4, false);
    model::Batch b;
    const auto add = [&](int32_t seq, uint32_t count, bool logits) {
        for (uint32_t i = 0; i < count; ++i) {
            const int32_t t = tok(rng);  // drawn either way: the same tokens alone or together
            if (only_seq0 && seq != 0) continue;
            b.add(t, next_pos[seq]++, {seq}, logits);
        }
        live[seq] = true;
    };
    const auto decode = [&]() {
        if (b.size() == 0) return true;
        const auto st = c.decode(b);
        if (!st) {
            error = st.message;
            return false;
        }
        for (uint32_t i = 0; i < b.size(); ++i)
            if (b.logits[i]) {
                const auto l = c.logits(i);
                out.push_back({b.seq_ids[i].front(), std::vector<float>(l.begin(), l.end())});
            }
        b.clear();
        return true;
    };
    // Mixed prefills of different lengths, every row's logits.
    add(0, 13, true);
    add(1, 5, true);
    if (!decode()) return out;
    // A decode step, a second prefill chunk and a new prompt in one batch.
    add(2, 11, true);
    add(0, 1, true);
    add(1, 7, true);
    if (!decode()) return out;
    for (uint32_t step = 0; step < 10; ++step) {
        if (step == 3) add(3, 9, true);  // a late sequence
        if (step == 5 && !only_seq0) {
            // Sequence 1 becomes a copy of sequence 0 (its cells shared,
            // not copied) and then diverges; sequence 2 loses 4..7.
            (void)c.seq_remove(1, 0, -1);
            (void)c.seq_copy(0, 1, 0, -1);
            next_pos[1] = next_pos[0];
            (void)c.seq_remove(2, 4, 8);
        }
        for (uint32_t k = 0; k < 4; ++k) {
            const auto seq = static_cast<int32_t>((k + step) % 4);  // rotating batch order
            if (live[seq]) add(seq, 1, true);
        }
        if (!decode()) return out;
    }
    return out;
}

// A model loaded for the script (context 128, batches of 64) with the
// registry and dispatcher it keeps references to.
struct ScriptModel {
    std::unique_ptr<KernelRegistry> registry;
    std::unique_ptr<Dispatcher> dispatcher;
    std::unique_ptr<model::Model> model;
};

// Empty `model` (and a failed check naming the file) when the load fails.
inline ScriptModel load_for_script(const std::vector<std::shared_ptr<Backend>>& backends,
                                   const gguf::File& file, bool resident, uint32_t max_sequences,
                                   bool strict = false) {
    ScriptModel l;
    l.registry = std::make_unique<KernelRegistry>();
    l.dispatcher = std::make_unique<Dispatcher>(backends, *l.registry);
    model::ModelOptions options;
    options.context = 128;
    options.batch = 64;
    options.allow_resident = resident;
    options.sequences = max_sequences;
    options.registry_strict = strict;
    auto m = model::Model::load(file, *l.dispatcher, *l.registry, options);
    if (!m) {
        check(false, file.path().string() + ": " + m.error().message());
        return l;
    }
    l.model = std::move(*m);
    return l;
}

// The script on a fresh context of `n_seq` sequences; a failed check names
// `what` when the context cannot be made or a decode fails.
inline ScriptRows run_script_on(const model::Model& m, uint32_t n_seq, bool only_seq0,
                                const std::string& what) {
    model::ContextOptions opt;
    opt.context = 128;
    opt.sequences = n_seq;
    opt.batch = 64;
    auto c = model::Context::create(m, opt);
    if (!c) {
        check(false, what + ": " + c.error().message());
        return {};
    }
    std::string error;
    ScriptRows rows = run_batch_script(**c, m.vocab(), only_seq0, error);
    if (!error.empty()) check(false, what + ": decode: " + error);
    return rows;
}

// Sequence `seq`'s rows alone, in order.
inline ScriptRows rows_of(const ScriptRows& rows, int32_t seq) {
    ScriptRows out;
    for (const ScriptRow& r : rows)
        if (r.seq == seq) out.push_back(r);
    return out;
}

// How two runs' rows agree: `worst_allowed` is the NMSE bound a row may reach.
struct Agreement {
    size_t rows = 0, identical = 0, argmax_differs = 0;
    double worst = 0, worst_allowed = 0;
    bool complete = true;
    bool ok() const { return complete && argmax_differs == 0 && worst <= worst_allowed; }
    std::string text() const {
        char buf[192];
        std::snprintf(
            buf, sizeof buf,
            "%zu rows, %zu bit-identical, worst NMSE %.3g (bound %.0e), argmax equal "
            "%s%s",
            rows, identical, worst, worst_allowed,
            argmax_differs == 0 ? "yes" : (std::to_string(argmax_differs) + " differ").c_str(),
            complete ? "" : ", rows missing");
        return buf;
    }
};

inline Agreement agree(const ScriptRows& got, const ScriptRows& want, double worst_allowed) {
    const auto argmax = [](const std::vector<float>& v) {
        return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    };
    Agreement a;
    a.worst_allowed = worst_allowed;
    a.rows = want.size();
    a.complete = got.size() == want.size() && !want.empty();
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        const std::vector<float>& g = got[i].logits;
        const std::vector<float>& w = want[i].logits;
        if (got[i].seq != want[i].seq || g.size() != w.size()) {
            a.complete = false;
            continue;
        }
        if (std::memcmp(g.data(), w.data(), w.size() * sizeof(float)) == 0) ++a.identical;
        const double e = nmse(g, w);
        a.worst = std::max(a.worst, std::isfinite(e) ? e : 1e30);
        if (argmax(g) != argmax(w)) ++a.argmax_differs;
    }
    return a;
}

}  // namespace ferrox::test
