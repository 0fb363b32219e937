// Recurrent-state checkpoints (Context::seq_checkpoint / seq_rewind) on
// tiny-qwen35 through the CPU plugin:
//  - a sequence prefilled past a chunk boundary, taken down another branch,
//    then rewound to the checkpoint at that boundary and fed the rest gives
//    logits bit-identical to the uninterrupted run -- on its own sequence
//    and on another one that copied it whole first;
//  - the same comparison catches the two faults (set_checkpoint_fault): a
//    checkpoint taken one token late, and a rewind that keeps the state;
//  - refusals change nothing: a checkpoint of another loaded model of the
//    same file, a truncated one, a sequence lacking the positions, a model
//    without recurrent layers (tiny-llama).
// Every chunk has at most 16 rows, so every product takes the same kernel
// path both ways (batch_invariance.cpp) and the rows must be bit-identical.
// Exits 77 (skipped, with the reason) when tiny-qwen35 is absent.
// $FERROX_TINY_MODELS names another tiny-model folder.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "loaded_model.h"
#include "model_inputs.h"
#include "plain_checks.h"

using namespace ferrox;
using ferrox::test::check;
using ferrox::test::failures;
using model::Batch;
using model::CheckpointFault;
using model::Context;
using model::ContextOptions;

namespace {

constexpr int32_t kChunk = 16;
using Rows = std::vector<std::vector<float>>;

using Loaded = test::LoadedModel;

Loaded load(const PluginSet& plugins, const std::filesystem::path& path) {
    model::ModelOptions options;
    options.context = 256;
    options.batch = kChunk;
    options.allow_resident = false;
    return test::load_model(plugins, path, options);
}

std::unique_ptr<Context> context_for(const model::Model& m) {
    ContextOptions opt;
    opt.context = 256;
    opt.sequences = 3;
    opt.batch = kChunk;
    auto c = Context::create(m, opt);
    if (!c) return check(false, c.error().message()), nullptr;
    return std::move(*c);
}

// Feeds tokens[from..) to `seq` in chunks that end on multiples of kChunk
// (as the server's prefill does), every row's logits kept.
Rows feed(Context& c, int32_t seq, const std::vector<int32_t>& tokens, size_t from) {
    Rows out;
    for (size_t start = from; start < tokens.size();) {
        const size_t end = std::min(tokens.size(), (start / kChunk + 1) * kChunk);
        Batch b;
        for (size_t i = start; i < end; ++i) b.add(tokens[i], int32_t(i), {seq}, true);
        if (auto st = c.decode(b); !st) return check(false, "decode: " + st.message), out;
        for (uint32_t i = 0; i < b.size(); ++i) {
            const auto l = c.logits(i);
            out.emplace_back(l.begin(), l.end());
        }
        start = end;
    }
    return out;
}

// Rows of `got` (positions from `first`) bit-identical to `want`'s there.
size_t identical(const Rows& got, size_t got_first, const Rows& want, size_t first) {
    size_t same = 0;
    for (size_t p = first; p < want.size(); ++p) {
        if (p < got_first || p - got_first >= got.size()) continue;
        const auto& g = got[p - got_first];
        same += g.size() == want[p].size() &&
                std::memcmp(g.data(), want[p].data(), g.size() * sizeof(float)) == 0;
    }
    return same;
}

struct Scenario {
    std::vector<int32_t> prompt, branch;  // branch: another continuation after the boundary
    size_t boundary = 0;                  // where the checkpoint is taken
};

// The sequence `seq` goes to the boundary, checkpoints, runs down the
// branch, is rewound (after a whole copy onto `onto`, when that differs)
// and is fed the prompt's rest from where the checkpoint says. Returns how
// many of the rows past the boundary equal the uninterrupted run's.
size_t resumed_rows(Context& c, const Scenario& s, const Rows& want, int32_t seq, int32_t onto) {
    c.clear();
    const std::vector<int32_t> head(s.prompt.begin(), s.prompt.begin() + long(s.boundary));
    (void)feed(c, seq, head, 0);
    auto ckpt = c.seq_checkpoint(seq);
    if (!ckpt) return check(false, "seq_checkpoint: " + ckpt.error().message()), 0;
    check(ckpt->size() == c.checkpoint_bytes(), "a checkpoint is checkpoint_bytes() long");
    std::vector<int32_t> other = head;
    other.insert(other.end(), s.branch.begin(), s.branch.end());
    (void)feed(c, seq, other, s.boundary);
    if (onto != seq) {
        check(bool(c.seq_copy(seq, onto, 0, -1)), "a whole copy onto an empty sequence");
        check(bool(c.seq_remove(seq, 0, -1)), "the original removed whole");
    }
    if (auto r = c.seq_rewind(onto, *ckpt); !r)
        return check(false, "seq_rewind: " + r.error().message()), 0;
    const auto next = c.seq_max_pos(onto);
    if (!next) return 0;
    const size_t from = size_t(*next + 1);
    const Rows got = feed(c, onto, s.prompt, from);
    return identical(got, from, want, s.boundary);
}

void checkpoints(const PluginSet& plugins, const std::filesystem::path& path, std::mt19937& rng) {
    Loaded l = load(plugins, path);
    if (!l.model) return;
    auto made = context_for(*l.model);
    if (!made) return;
    Context& c = *made;
    check(c.checkpoint_bytes() > 0, "tiny-qwen35 has checkpoints");
    std::uniform_int_distribution<int32_t> tok(
        0, int32_t(std::min<uint64_t>(l.model->vocab(), 30000)) - 1);
    Scenario s;
    s.prompt.resize(100);
    s.branch.resize(37);
    for (auto& t : s.prompt) t = tok(rng);
    for (auto& t : s.branch) t = tok(rng);
    s.boundary = 3 * kChunk;
    c.clear();
    const Rows want = feed(c, 0, s.prompt, 0);
    const size_t rows = s.prompt.size() - s.boundary;

    const size_t own = resumed_rows(c, s, want, 0, 0);
    std::printf("      rewound on its own sequence: %zu of %zu rows bit-identical\n", own, rows);
    check(own == rows, "a rewound sequence continues bit-identically to the uninterrupted run");
    const size_t copied = resumed_rows(c, s, want, 1, 2);
    std::printf("      copied whole, then rewound: %zu of %zu rows bit-identical\n", copied, rows);
    check(copied == rows, "a copy rewound to the checkpoint continues bit-identically");

    // The faults: the same comparison must fail.
    for (const auto& [fault, name] :
         {std::pair{CheckpointFault::OneTokenLate, "one token late"},
          std::pair{CheckpointFault::StateNotRestored, "state not restored"}}) {
        model::set_checkpoint_fault(fault);
        const size_t bad = resumed_rows(c, s, want, 0, 0);
        model::set_checkpoint_fault(CheckpointFault::None);
        std::printf("      fault (%s): %zu of %zu rows bit-identical\n", name, bad, rows);
        check(bad < rows, std::string("the comparison catches a checkpoint ") + name);
    }

    // Refusals leave the sequence as it was.
    c.clear();
    (void)feed(c, 0, s.prompt, 0);
    auto ckpt = c.seq_checkpoint(0);
    if (!ckpt) return check(false, ckpt.error().message());
    const auto max_before = c.seq_max_pos(0);
    std::vector<std::byte> cut(ckpt->begin(), ckpt->end() - 4);
    auto r = c.seq_rewind(0, cut);
    check(!r, "a truncated checkpoint is refused");
    check(!c.seq_rewind(2, *ckpt), "a sequence lacking the positions is refused");
    check(!c.seq_checkpoint(2), "an empty sequence has no checkpoint");
    Loaded twin = load(plugins, path);  // the same file, loaded again: another model
    if (twin.model) {
        auto twin_ctx = context_for(*twin.model);
        if (twin_ctx) {
            (void)feed(*twin_ctx, 0, s.prompt, 0);
            auto foreign = twin_ctx->seq_rewind(0, *ckpt);
            check(!foreign &&
                      foreign.error().message().find("another loaded model") != std::string::npos,
                  "a checkpoint of another loaded model is refused: " +
                      (foreign ? std::string("accepted") : foreign.error().message()));
        }
    }
    check(c.seq_max_pos(0) && max_before && *c.seq_max_pos(0) == *max_before,
          "refusals changed nothing");
    // The tail removal stays refused without a checkpoint.
    check(!c.seq_remove(0, int32_t(s.boundary), -1), "a plain tail removal is still refused");
}

// Where a checkpoint may be taken (server/prefill_plan.h). A row's
// products take the single-row path in calls of up to 16 rows and the panel
// GEMM in longer ones; on the panel path a row does not depend on where its
// call starts or how long it is, and the recurrent layers run per token. So
// a prompt computed in calls of more than 16 rows that start anywhere -- a
// checkpoint in the middle of a chunk, a rewind to one -- gives the logits
// and the state of the one computed in 128-row chunks, bit for bit; rows on
// the other path do not (the server never puts them there).
namespace layouts {

constexpr size_t kServerChunk = 128, kFewRows = 16;

// Feeds tokens[from, to) to `seq` in calls ending at `ends` (each > the
// last; `to` closes the last call), every row's logits kept.
Rows run(Context& c, int32_t seq, const std::vector<int32_t>& tokens, size_t from, size_t to,
         std::vector<size_t> ends = {}) {
    for (size_t e = (from / kServerChunk + 1) * kServerChunk; ends.empty() && e < to;
         e += kServerChunk)
        ends.push_back(e);  // none given: the server's chunk ends
    ends.push_back(to);
    Rows out;
    size_t start = from;
    for (size_t end : ends) {
        if (end <= start || end > to) continue;
        Batch b;
        for (size_t i = start; i < end; ++i) b.add(tokens[i], int32_t(i), {seq}, true);
        if (auto st = c.decode(b); !st) return check(false, "decode: " + st.message), out;
        for (uint32_t i = 0; i < b.size(); ++i) {
            const auto l = c.logits(i);
            out.emplace_back(l.begin(), l.end());
        }
        start = end;
    }
    return out;
}

struct Outcome {
    size_t same_rows = 0;
    bool same_state = false;
};

void report(const char* model, const char* what, const Outcome& o, size_t rows, bool exact) {
    std::printf("      %s, %s: %zu of %zu rows bit-identical, end state %s\n", model, what,
                o.same_rows, rows, o.same_state ? "bit-identical" : "differs");
    if (exact)
        check(o.same_rows == rows && o.same_state, std::string(model) + ": " + what + " is exact");
    else
        check(o.same_rows < rows || !o.same_state,
              std::string(model) + ": " + what + " shows (the path matters)");
}

void where_checkpoints_apply(const PluginSet& plugins, const std::filesystem::path& path,
                             std::mt19937& rng) {
    model::ModelOptions mo;
    mo.context = 512;
    mo.batch = 256;
    mo.allow_resident = false;
    Loaded l = test::load_model(plugins, path, mo);
    if (!l.model) return;
    ContextOptions opt;
    opt.context = 512;
    opt.sequences = 2;
    opt.batch = 256;
    auto made = Context::create(*l.model, opt);
    if (!made) return check(false, made.error().message());
    Context& c = **made;
    const std::string name = path.stem().string();
    std::uniform_int_distribution<int32_t> tok(
        0, int32_t(std::min<uint64_t>(l.model->vocab(), 30000)) - 1);
    std::vector<int32_t> prompt(300), branch(300);
    for (auto& t : prompt) t = tok(rng);
    for (auto& t : branch) t = tok(rng);
    c.clear();
    const Rows want = run(c, 0, prompt, 0, prompt.size());  // 128, 128, 44 rows
    const auto want_state = c.seq_checkpoint(0);
    if (!want_state) return check(false, want_state.error().message());
    auto outcome = [&](const Rows& got, size_t first) {
        const auto st = c.seq_checkpoint(0);
        return Outcome{identical(got, first, want, first), st && *st == *want_state};
    };
    // A prompt that ended at n (a 128-row chunk, then n - 128 rows), then the
    // next one from there: the chunk's rest alone, or with the next chunk
    // when it has 16 rows or fewer.
    for (const size_t n : {150, 200, 240, 250}) {
        c.clear();
        (void)run(c, 0, prompt, 0, n);
        const std::vector<size_t> ends{256 - n > kFewRows ? size_t{256} : prompt.size()};
        const Rows got = run(c, 0, prompt, n, prompt.size(), ends);
        const std::string what =
            "a prompt ended at " + std::to_string(n) + ", the next resumed there";
        report(name.c_str(), what.c_str(), outcome(got, n), prompt.size() - n, true);
    }
    {  // rewound to a checkpoint at 200 after another branch
        c.clear();
        (void)run(c, 0, prompt, 0, 200);
        const auto ckpt = c.seq_checkpoint(0);
        if (!ckpt) return check(false, ckpt.error().message());
        std::vector<int32_t> other(prompt.begin(), prompt.begin() + 200);
        other.insert(other.end(), branch.begin(), branch.begin() + 60);
        (void)run(c, 0, other, 200, other.size());
        if (auto r = c.seq_rewind(0, *ckpt); !r) return check(false, r.error().message());
        const Rows got = run(c, 0, prompt, 200, prompt.size());
        report(name.c_str(), "rewound to a checkpoint at 200", outcome(got, 200), 100, true);
    }
    // The other path: what the plan avoids. The faults must show.
    {  // 240 .. 256 alone (16 rows, the single-row path)
        c.clear();
        (void)run(c, 0, prompt, 0, 240);
        const Rows got = run(c, 0, prompt, 240, prompt.size(), {256});
        report(name.c_str(), "resumed at 240, a 16-row call first", outcome(got, 240), 60, false);
    }
    {  // a prompt whose last 10 rows took the single-row path, resumed there
        c.clear();
        Rows got = run(c, 0, prompt, 0, 138);
        const Rows rest = run(c, 0, prompt, 138, prompt.size());
        got.insert(got.end(), rest.begin(), rest.end());
        report(name.c_str(), "a prompt ended at 138 (10 rows alone), resumed there",
               outcome(got, 0), prompt.size(), false);
    }
    {  // 20 answer tokens decoded one a call: a checkpoint after them would differ
        c.clear();
        (void)run(c, 0, prompt, 0, 200);
        std::vector<size_t> ones;
        for (size_t e = 201; e <= 220; ++e) ones.push_back(e);
        ones.push_back(256);
        const Rows got = run(c, 0, prompt, 200, prompt.size(), ones);
        report(name.c_str(), "20 tokens decoded one a call at 200", outcome(got, 200), 100, false);
    }
}

}  // namespace layouts

}  // namespace

int main() {
    const auto qwen35 = test::tiny_models({"qwen35"});
    if (qwen35.empty()) {
        std::printf("SKIP: no tiny-qwen35 in %s (tests/model/make_tiny_models.py)\n",
                    test::tiny_models_dir().c_str());
        return 77;
    }
    const PluginSet plugins = test::build_plugins();
    if (plugins.selected().empty()) return 1;
    const uint32_t seed = 20261207;
    std::printf("seed %u\n", seed);
    std::mt19937 rng(seed);
    checkpoints(plugins, qwen35.front(), rng);
    for (const auto& p : test::tiny_models({"qwen35", "qwen35moe", "qwen3next"}))
        layouts::where_checkpoints_apply(plugins, p, rng);
    for (const auto& path : test::tiny_models({"llama"})) {
        Loaded l = load(plugins, path);
        if (!l.model) continue;
        auto c = context_for(*l.model);
        if (!c) continue;
        check(c->checkpoint_bytes() == 0 && !c->seq_checkpoint(0),
              "a model without recurrent layers has no checkpoints");
    }
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
