// The checks of model_batch_invariance on what a sequence keeps beyond one
// decode: its state saved and restored (the current format and version 2's),
// and a recurrent model's per-sequence state across chunks, copies and
// removals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "plain_checks.h"
#include "sequence_scenarios.h"

namespace ferrox::test::scenario {

using model::DecodeCode;

// A sequence saved, cleared and restored (into other cells) continues as if
// nothing happened; a truncated or foreign buffer is refused, nothing changed.
inline void state_round_trip(const model::Model& m, const std::string& name, std::mt19937& rng) {
    const ContextOptions opt = context_options(64, 3, 32);
    const auto made = open_context(m, name, opt);
    if (!made) return;
    Context& c = *made;
    const Script a = random_script(rng, m.vocab(), 9, 1);
    const Script b = random_script(rng, m.vocab(), 5, 0);
    Batch batch;
    for (size_t i = 0; i < a.prompt.size(); ++i)
        batch.add(a.prompt[i], static_cast<int32_t>(i), {1}, false);
    for (size_t i = 0; i < b.prompt.size(); ++i)
        batch.add(b.prompt[i], static_cast<int32_t>(i), {0}, false);
    check(bool(c.decode(batch)), name + ": state: setup");
    auto saved = c.seq_save(1);
    if (!saved) return check(false, name + ": seq_save: " + saved.error().message());
    Batch next;
    next.add(a.steps[0], static_cast<int32_t>(a.prompt.size()), {1}, true);
    check(bool(c.decode(next)), name + ": state: next token before");
    const auto l = c.logits(0);
    const std::vector<float> before(l.begin(), l.end());
    // Seq 1 dropped; seq 2 takes its cells so the restore lands elsewhere.
    (void)c.seq_remove(1, 0, -1);
    Batch other;
    for (int32_t p = 0; p < 12; ++p) other.add(7 + p, p, {2}, false);
    check(bool(c.decode(other)), name + ": state: another sequence takes the freed cells");
    const auto snap = snapshot(c);
    std::vector<std::byte> cut(saved->begin(), saved->end() - 4);
    check(!c.seq_restore(1, cut) && snapshot(c) == snap,
          name + ": a truncated state is refused and no cell changes");
    std::vector<std::byte> bad = *saved;
    bad[0] = std::byte{'X'};
    check(!c.seq_restore(1, bad) && snapshot(c) == snap,
          name + ": a state without the magic is refused and no cell changes");
    check(bool(c.seq_restore(1, *saved)), name + ": state restored");
    const auto max = c.seq_max_pos(1);
    check(max && *max == static_cast<int32_t>(a.prompt.size()) - 1,
          name + ": the restored sequence ends where it was saved");
    check(bool(c.decode(next)), name + ": state: next token after");
    const auto after = c.logits(0);
    check(after.size() == before.size() &&
              std::memcmp(after.data(), before.data(), after.size_bytes()) == 0,
          name + ": after save / restore the next token's logits are bit-identical");
}

// The state file's header (Context::seq_save), as its format states it.
struct StateHeader {
    char magic[4];
    uint32_t version, n_layer, k_kind;
    uint64_t k_row, v_row;
    uint32_t n_cells, v_kind;
};

// The KV cache holds K and V for the attending layers only, as the plan
// counts it; and a state saved before that (version 2: rows for every
// layer, a recurrent layer's too) still restores. The version-2 buffer is
// laid out from a version-3 one as the old writer wrote it, with noise in
// the recurrent layers' rows: the restored sequence must continue
// bit-identically to the version-3 restore, the same buffer labelled
// version 3 must be refused (its size is another layout's), and a later
// version is refused naming it. For models whose layers share one row width.
inline void older_state(const model::Model& m, const std::string& name) {
    const model::Hparams& hp = m.hparams();
    const ContextOptions opt = context_options(64, 2, 32);
    const auto made = open_context(m, name, opt);
    if (!made) return;
    Context& c = *made;
    uint32_t attending = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) attending += hp.attends(il) ? 1 : 0;
    check(c.kv_bytes() == m.kv_cache_bytes(c.context()),
          name + ": the context's KV buffers hold the plan's bytes");
    Batch b;
    for (int32_t p = 0; p < 10; ++p) b.add(3 + p * 7, p, {0}, false);
    if (!c.decode(b)) return check(false, name + ": older state: setup");
    auto saved = c.seq_save(0);
    if (!saved) return check(false, name + ": seq_save: " + saved.error().message());
    StateHeader h{};
    std::memcpy(&h, saved->data(), sizeof h);
    check(h.version == 3 && h.n_layer == attending,
          name + ": a state holds version 3 and rows of the " + std::to_string(attending) +
              " attending layers, got version " + std::to_string(h.version) + " with " +
              std::to_string(h.n_layer));
    check(c.kv_bytes() == uint64_t{attending} * c.context() * (h.k_row + h.v_row),
          name + ": KV bytes = attending layers x cells x a cell's K and V bytes");
    // Version 2's layout: every unshared layer's rows, in layer order.
    const uint64_t layer_bytes = uint64_t{h.n_cells} * (h.k_row + h.v_row);
    const size_t rows_at = sizeof h + h.n_cells * sizeof(int32_t);
    std::vector<std::byte> old(saved->begin(),
                               saved->begin() + static_cast<std::ptrdiff_t>(rows_at));
    const std::byte* from = saved->data() + rows_at;
    std::mt19937 noise(7);
    for (uint32_t il = 0; il < hp.n_layer - hp.shared_kv_layers; ++il) {
        if (!hp.attends(il)) {  // a recurrent or FFN-only layer's rows: noise
            for (uint64_t i = 0; i < layer_bytes; ++i)
                old.push_back(static_cast<std::byte>(noise() & 0x3f));
            continue;
        }
        old.insert(old.end(), from, from + layer_bytes);
        from += layer_bytes;
    }
    const std::byte* end = saved->data() + saved->size();
    old.insert(old.end(), from, end);
    StateHeader oh = h;
    oh.version = 2;
    oh.n_layer = hp.n_layer - hp.shared_kv_layers;
    std::memcpy(old.data(), &oh, sizeof oh);

    Batch next;
    next.add(5, 10, {1}, true);
    const auto continue_from = [&](std::span<const std::byte> state) -> std::vector<float> {
        c.clear();
        if (auto r = c.seq_restore(1, state); !r) {
            check(false, name + ": restore: " + r.error().message());
            return {};
        }
        if (!c.decode(next)) {
            check(false, name + ": the next token after a restore");
            return {};
        }
        const auto l = c.logits(0);
        return {l.begin(), l.end()};
    };
    const std::vector<float> want = continue_from(*saved);
    const std::vector<float> got = continue_from(old);
    check(!want.empty() && got == want,
          name + ": a version-2 state restores and continues bit-identically");
    if (attending < hp.n_layer) {
        StateHeader mislabelled = oh;
        mislabelled.version = 3;
        std::memcpy(old.data(), &mislabelled, sizeof mislabelled);
        check(!c.seq_restore(1, old), name + ": a version-2 layout labelled 3 is refused");
    }
    StateHeader later = h;
    later.version = 4;
    std::vector<std::byte> future = *saved;
    std::memcpy(future.data(), &later, sizeof later);
    const auto refused = c.seq_restore(1, future);
    check(!refused && refused.error().message().find("version 4") != std::string::npos,
          name + ": a version-4 state is refused naming its version: " +
              (refused ? std::string("restored") : refused.error().message()));
}

// A recurrent model (tiny-qwen35): its per-sequence state is carried from
// one prompt chunk to the next, copied whole, never rolled back, and a
// batch naming several sequences for one token is refused. Every chunk has
// at most 16 rows, so every product takes the same kernel path (see
// invariance) and the rows must be bit-identical.
inline void recurrent_state(const model::Model& m, const std::string& name, std::mt19937& rng) {
    check(m.recurrent(), name + ": the model says its state cannot be rolled back");
    const ContextOptions opt = context_options(64, 3, 16);
    const auto made = open_context(m, name, opt);
    if (!made) return;
    Context& c = *made;
    const Script a = random_script(rng, m.vocab(), 16, 0);
    const Rows whole = prefill_chunks(c, 0, a.prompt, 16);
    c.clear();
    const Rows chunked = prefill_chunks(c, 0, a.prompt, 5);
    const Compare chunks = compare(chunked, whole);
    std::printf("      %s prompt in chunks of 5 vs one chunk: %s\n", name.c_str(),
                describe(chunks).c_str());
    check(chunks.identical == chunks.rows && chunks.rows == a.prompt.size(),
          name + ": a prompt in chunks of 5 gives one chunk's logits: " + describe(chunks));
    // The fault this catches: a state not carried across a chunk. Chunk 2
    // decoded onto another state (sequence 1 fed other first tokens) moves
    // every row after the first chunk.
    c.clear();
    std::vector<int32_t> other(a.prompt);
    for (size_t i = 0; i < 5; ++i) other[i] = (other[i] + 1) % 1000;
    Rows faulty = prefill_chunks(c, 1, std::vector<int32_t>(other.begin(), other.begin() + 5), 5);
    Batch rest;
    for (size_t i = 5; i < a.prompt.size(); ++i)
        rest.add(a.prompt[i], static_cast<int32_t>(i), {1}, true);
    check(bool(c.decode(rest)), name + ": the second chunk decodes");
    size_t moved = 0;
    for (uint32_t i = 0; i < rest.size(); ++i) {
        const auto l = c.logits(i);
        moved += std::memcmp(l.data(), whole[5 + i].data(), l.size_bytes()) != 0;
    }
    check(moved == rest.size(),
          name +
              ": a chunk decoded over another state differs in every row (the check above "
              "would catch a state not carried)");
    // Partial removal refused, nothing changed: the next token's logits are
    // those of the sequence as it was.
    c.clear();
    (void)prefill_chunks(c, 0, a.prompt, 16);
    const auto snap = snapshot(c);
    const auto refused = c.seq_remove(0, 8, -1);
    check(!refused && refused.error().message().find("rolled back") != std::string::npos &&
              snapshot(c) == snap,
          name + ": removing a recurrent sequence's tail is refused, no cell changed: " +
              (refused ? std::string("removed") : refused.error().message()));
    check(!c.seq_copy(0, 1, 0, 8), name + ": copying part of a recurrent sequence is refused");
    check(bool(c.seq_copy(0, 1, 0, -1)), name + ": the whole sequence copies");
    Batch next;
    next.add(5, 16, {0}, true);
    next.add(5, 16, {1}, true);
    check(bool(c.decode(next)), name + ": both continue");
    const auto l0 = c.logits(0), l1 = c.logits(1);
    check(l0.size() == l1.size() && std::memcmp(l0.data(), l1.data(), l0.size_bytes()) == 0,
          name + ": a copied sequence continues with the original's logits");
    Batch shared;
    shared.add(6, 17, {0, 1}, true);
    const auto before = snapshot(c);
    const auto two = c.decode(shared);
    check(two.code == DecodeCode::InvalidBatch && snapshot(c) == before,
          name + ": a token naming two sequences is refused: " + two.message);
    // Whole removal clears the state: the sequence starts over as new.
    check(bool(c.seq_remove(0, 0, -1)), name + ": removing the whole sequence is allowed");
    const Rows again = prefill_chunks(c, 0, a.prompt, 16);
    const Compare fresh = compare(again, whole);
    check(
        fresh.identical == fresh.rows,
        name + ": after a whole removal the sequence starts from a zero state: " + describe(fresh));
}

}  // namespace ferrox::test::scenario
