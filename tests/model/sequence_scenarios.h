// The pieces of a multi-sequence scenario on one model::Context, shared by
// the checks of model_batch_invariance (batch_invariance.cpp,
// sequence_state_checks.h): scripted tokens for several sequences run
// together or alone, the logits rows they give and how two runs' rows
// compare, and a snapshot of the cells.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "loaded_model.h"
#include "nmse.h"
#include "plain_checks.h"

namespace ferrox::test::scenario {

using model::Batch;
using model::Context;
using model::ContextOptions;

using Rows = std::vector<std::vector<float>>;

struct Compare {
    size_t rows = 0, identical = 0;
    double worst = 0;
};

inline Compare compare(const Rows& got, const Rows& want) {
    Compare c;
    c.rows = want.size();
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
        if (got[i].size() == want[i].size() &&
            std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)) == 0)
            ++c.identical;
        else
            c.worst = std::max(c.worst, nmse(got[i], want[i]));
    }
    if (got.size() != want.size()) c.worst = 1;
    return c;
}

inline std::string describe(const Compare& c) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%zu of %zu rows bit-identical, worst NMSE %.3g", c.identical,
                  c.rows, c.worst);
    return buf;
}

// A sequence's part of a scenario: its prompt and the tokens it is fed
// one at a time afterwards (teacher-forced, so every run sees the same).
struct Script {
    std::vector<int32_t> prompt, steps;
};

inline Script random_script(std::mt19937& rng, uint64_t vocab, size_t prompt, size_t steps) {
    Script s;
    std::uniform_int_distribution<int32_t> tok(
        0, static_cast<int32_t>(std::min<uint64_t>(vocab, 30000) - 1));
    for (size_t i = 0; i < prompt; ++i) s.prompt.push_back(tok(rng));
    for (size_t i = 0; i < steps; ++i) s.steps.push_back(tok(rng));
    return s;
}

struct Member {
    const Script* script;
    int32_t seq;
};

// Runs `members` together: one batch with every prompt (in the given
// order, each token asking for logits), then one batch per step with each
// member's next token (the order rotated by `rotate` per step). Members
// whose script has fewer steps drop out; `remove_after` (if >= 0) removes
// member 0 from the cache after that many steps. Returns the logits rows of
// the member whose seq is `watch`: every prompt position, then every step.
inline Rows run_together(Context& c, const std::vector<Member>& members, int32_t watch,
                         size_t rotate, int remove_after = -1) {
    Rows out;
    c.clear();
    Batch b;
    for (const Member& m : members)
        for (size_t i = 0; i < m.script->prompt.size(); ++i)
            b.add(m.script->prompt[i], static_cast<int32_t>(i), {m.seq}, true);
    auto st = c.decode(b);
    if (!st) {
        std::printf("decode failed: %s\n", st.message.c_str());
        return out;
    }
    for (size_t i = 0; i < b.size(); ++i)
        if (b.seq_ids[i][0] == watch) {
            auto l = c.logits(static_cast<uint32_t>(i));
            out.emplace_back(l.begin(), l.end());
        }
    size_t max_steps = 0;
    for (const Member& m : members) max_steps = std::max(max_steps, m.script->steps.size());
    std::vector<bool> removed(members.size(), false);
    for (size_t step = 0; step < max_steps; ++step) {
        if (remove_after >= 0 && step == static_cast<size_t>(remove_after)) {
            (void)c.seq_remove(members[0].seq, 0, -1);
            removed[0] = true;
        }
        b.clear();
        for (size_t k = 0; k < members.size(); ++k) {
            const size_t j = (k + step * rotate) % members.size();
            const Member& m = members[j];
            if (removed[j] || step >= m.script->steps.size()) continue;
            const auto pos = static_cast<int32_t>(m.script->prompt.size() + step);
            b.add(m.script->steps[step], pos, {m.seq}, true);
        }
        st = c.decode(b);
        if (!st) {
            std::printf("decode failed: %s\n", st.message.c_str());
            return out;
        }
        for (size_t i = 0; i < b.size(); ++i)
            if (b.seq_ids[i][0] == watch) {
                auto l = c.logits(static_cast<uint32_t>(i));
                out.emplace_back(l.begin(), l.end());
            }
    }
    return out;
}

inline std::vector<std::pair<uint32_t, std::pair<int32_t, uint64_t>>> snapshot(const Context& c) {
    std::vector<std::pair<uint32_t, std::pair<int32_t, uint64_t>>> s;
    for (uint32_t i = 0; i < c.cells().size(); ++i)
        s.push_back({i, {c.cells().pos(i), c.cells().seqs(i)}});
    return s;
}

using Loaded = test::LoadedModel;

inline Loaded load(const PluginSet& plugins, const std::filesystem::path& path,
                   model::KvKinds kv_kinds = {}) {
    model::ModelOptions options;
    options.context = 64;
    options.batch = 64;
    options.allow_resident = false;
    options.kv_kinds = kv_kinds;
    return test::load_model(plugins, path, options);
}

// Options for a context of `context` cells shared by `sequences` sequences,
// at most `batch` rows a decode.
inline ContextOptions context_options(uint32_t context, uint32_t sequences, uint32_t batch) {
    ContextOptions opt;
    opt.context = context;
    opt.sequences = sequences;
    opt.batch = batch;
    return opt;
}

// The context, or nullptr after a failed check naming `name` and the reason.
inline std::unique_ptr<Context> open_context(const model::Model& m, const std::string& name,
                                             const ContextOptions& opt) {
    auto made = Context::create(m, opt);
    if (!made) {
        check(false, name + ": " + made.error().message());
        return nullptr;
    }
    return std::move(*made);
}

// Logits of every position of `tokens` fed to `seq` in chunks of `chunk`.
inline Rows prefill_chunks(Context& c, int32_t seq, const std::vector<int32_t>& tokens,
                           size_t chunk) {
    Rows out;
    for (size_t start = 0; start < tokens.size(); start += chunk) {
        Batch b;
        for (size_t i = start; i < std::min(tokens.size(), start + chunk); ++i)
            b.add(tokens[i], static_cast<int32_t>(i), {seq}, true);
        if (auto st = c.decode(b); !st) {
            std::printf("decode failed: %s\n", st.message.c_str());
            return out;
        }
        for (uint32_t i = 0; i < b.size(); ++i) {
            auto l = c.logits(i);
            out.emplace_back(l.begin(), l.end());
        }
    }
    return out;
}

}  // namespace ferrox::test::scenario
