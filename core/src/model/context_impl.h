// The context's inside (Context::Impl): its KV cells and slots, recurrent
// states, scratch, and the decode of a batch through the decoder. Shared by
// context.cpp (the batch, decoding, sequence operations) and
// context_state.cpp (a sequence's saved state and checkpoints).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <span>

#include "decoder.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/context.h"
#include "ferrox/model/ops.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "kv_slots.h"
#include "load.h"
#include "residency.h"
#include "steps.h"
#include "sticky_steps.h"

namespace ferrox::model {

// A batch row's attention unit: consecutive rows of one sequence at
// consecutive positions (the batch sorted by sequence, then position).
struct AttentionRun {
    uint32_t row0 = 0, n = 0, seq = 0;
    int32_t pos0 = 0;
    // The sequence's cells each layer kind may see, ordered by position:
    // [0] every earlier position (global layers), [1] the sliding window's.
    std::vector<uint32_t> cells[2];
};

struct Context::Impl final : KvAttention {
    const Model::Impl& model;
    const Hparams& hp;
    const ModelWeights& w;
    Dispatcher& dispatcher;
    const std::vector<LayerConstants>& consts;
    const KvKinds kv_kinds;  // the K and V caches' kinds (they may differ)
    const Decoder decoder;
    uint32_t context = 0, max_batch = 0, n_seq = 1;
    std::unique_ptr<Steps> steps;
    Activations act;
    // Per slot (a layer that owns K and V, kv_slots.h): [cell][n_kv *
    // head_dim] of kv_kinds.key (K) or .value (V).
    const KvSlots slots;
    std::vector<Act> k_cache, v_cache;
    uint64_t kv_bytes = 0;  // what k_cache and v_cache hold
    KvCells cells;

    // The decode in progress: the batch sorted by (sequence, position).
    std::vector<uint32_t> order;  // sorted row -> batch index
    std::vector<int32_t> row_tokens, row_pos;
    std::vector<uint32_t> row_cell;  // the cell each row's K/V goes to
    std::vector<AttentionRun> runs;
    // Recurrent layers (qwen35): each sequence's state, and each sorted row's sequence.
    SeqStates states;
    std::vector<uint32_t> row_seq;
    // Attention over cells (ABI 1.3): every run's cells in position order,
    // one after another, and per sorted row its {begin, end} in that list for
    // global [0] and sliding-window [1] layers; uploaded once per batch.
    std::vector<uint32_t> cell_list, spans[2];
    uint32_t max_span[2] = {0, 0};
    Act cell_list_dev, spans_dev[2];
    uint64_t cell_list_capacity = 0;  // entries cell_list_dev holds
    std::vector<uint32_t> out_rows;   // sorted rows whose logits are wanted
    std::vector<uint32_t> out_slot;   // their output index, in batch order
    // A sequence's K/V rows gathered in position order when its cells are
    // not adjacent (host only), and the hole-aware loop's scratch.
    std::vector<std::byte> k_gather, v_gather;
    std::vector<float> k_wide, v_wide, scores;
    // The last decode's logits (one vocab row per wanted token): in the
    // activation region on the host when they fit, else in a buffer of their
    // own; and where each batch token's row is (-1: none).
    const float* logits_data = nullptr;
    std::unique_ptr<float[]> logits_buffer;
    uint64_t logits_capacity = 0;
    std::vector<int32_t> logits_row;
    // The last decode's rows are final-norm hidden states (n_embd floats,
    // decode_embeddings) rather than logits.
    bool hidden = false;
    uint64_t row_width() const { return hidden ? hp.n_embd : hp.vocab; }

    Impl(const Model::Impl& m, uint32_t n_ctx, uint32_t n_batch, uint32_t seqs)
        : model(m),
          hp(m.hp),
          w(m.w),
          dispatcher(m.dispatcher),
          consts(m.consts),
          kv_kinds(m.kv_kinds),
          decoder(m.hp, m.w, m.consts, m.output_norm, m.rope),
          context(n_ctx),
          max_batch(n_batch),
          n_seq(seqs),
          slots(m.hp),
          cells(n_ctx, seqs) {}

    // Layer il's widths (gemma4's sliding layers have their own).
    uint64_t q_dim(uint32_t il) const { return model::q_dim(hp, il); }
    uint64_t k_dim(uint32_t il) const { return model::k_dim(hp, il); }
    uint64_t v_dim(uint32_t il) const { return model::v_dim(hp, il); }
    uint64_t o_dim(uint32_t il) const { return model::o_dim(hp, il); }
    // Bytes of one cell's K or V row (all KV heads) of layer il in the cache's kind.
    uint64_t k_row_bytes(uint32_t il) const {
        return Model::Impl::kv_row_bytes(kv_kinds.key, k_dim(il));
    }
    uint64_t v_row_bytes(uint32_t il) const {
        return Model::Impl::kv_row_bytes(kv_kinds.value, v_dim(il));
    }
    // Bytes of one cell's K and V rows over the slots.
    uint64_t cell_bytes() const {
        uint64_t sum = 0;
        for (uint32_t s = 0; s < slots.size(); ++s)
            sum += k_row_bytes(slots.layer(s)) + v_row_bytes(slots.layer(s));
        return sum;
    }

    // The decoder's call into the cache: this layer's K/V rows stored, then
    // the batch's attention over its sequences' cells.
    void store_and_attend(StickySteps& st, uint32_t il, bool local, uint32_t n) override {
        if (slots.of(il) == KvSlots::kNone)
            return st.fail(make_error("layer {} has no KV cache (a recurrent layer)", il));
        store_rows(st, il, n);
        if (st.attends_over_cells()) return attend_cells(st, il, local, n);
        for (const AttentionRun& run : runs) {
            if (hp.is_chunked_layer(il))
                attend_chunks(st, il, run);
            else
                attend(st, il, local, run);
        }
    }

    // A chunked layer (llama4): the run cut where its positions enter a new
    // chunk; each piece attends over its sequence's cells from its chunk's
    // first position on, through the same entry and in the same order as a
    // whole run, so a sequence's result does not depend on the batch.
    void attend_chunks(StickySteps& st, uint32_t il, const AttentionRun& run) {
        const int64_t chunk = hp.attn_chunk;
        for (uint32_t i0 = 0; i0 < run.n && !st.failed();) {
            const int64_t pos0 = run.pos0 + int64_t{i0};
            const int64_t start = pos0 / chunk * chunk;
            const auto n =
                static_cast<uint32_t>(std::min<int64_t>(run.n - i0, start + chunk - pos0));
            AttentionRun piece;
            piece.row0 = run.row0 + i0;
            piece.n = n;
            piece.seq = run.seq;
            piece.pos0 = static_cast<int32_t>(pos0);
            const int64_t last = pos0 + n - 1;
            for (const uint32_t cell : run.cells[0])
                if (cells.pos(cell) >= start && cells.pos(cell) <= last)
                    piece.cells[0].push_back(cell);
            attend(st, il, false, piece);
            i0 += n;
        }
    }

    std::span<const uint32_t> row_sequences() const override { return row_seq; }
    RecurrentState recurrent_state(uint32_t il, uint32_t seq) override {
        return states.layer(il, seq);
    }

    // Each row's K and V into its cell: one store per run of rows whose
    // cells are adjacent (a whole prefill chunk, usually).
    void store_rows(StickySteps& st, uint32_t il, uint32_t n) {
        if (!hp.owns_kv(il)) return;  // a shared layer: an earlier layer's rows
        const Scratch& s = act.s;
        const Act& k_slot = k_cache[slots.of(il)];
        const Act& v_slot = v_cache[slots.of(il)];
        for (uint32_t r0 = 0; r0 < n;) {
            uint32_t r1 = r0 + 1;
            while (r1 < n && row_cell[r1] == row_cell[r1 - 1] + 1) ++r1;
            const uint64_t cell = row_cell[r0], rows = r1 - r0;
            st.store_kv(s.k.at(r0 * k_dim(il)), k_slot.at_bytes(cell * k_row_bytes(il)),
                        kv_kinds.key, rows * k_dim(il));
            st.store_kv(s.v.at(r0 * v_dim(il)), v_slot.at_bytes(cell * v_row_bytes(il)),
                        kv_kinds.value, rows * v_dim(il));
            r0 = r1;
        }
    }

    // One run's attention over its sequence's cells. The K/V rows the
    // attention entry reads are the sequence's cells in position order:
    // the cache itself when those cells are adjacent, else gathered. Either
    // way a sequence's attention reads the same values in the same order
    // whatever else is in the batch, which keeps its logits batch-invariant.
    void attend(StickySteps& st, uint32_t il, bool local, const AttentionRun& run) {
        if (st.failed()) return;  // the gathered rows and the hole loop read the cache
        const std::vector<uint32_t>& list = run.cells[local && hp.sliding_window ? 1 : 0];
        const uint64_t k_row = k_row_bytes(il), v_row = v_row_bytes(il);
        const auto count = static_cast<uint32_t>(list.size());
        const int32_t base = cells.pos(list.front());
        const bool adjacent =
            list.back() - list.front() + 1 == count && std::is_sorted(list.begin(), list.end());
        // No position missing between the first visible one and the run's last.
        const bool dense = cells.pos(list.back()) - base + 1 == static_cast<int32_t>(count);
        const Act& k_slot = k_cache[slots.of(il)];
        const Act& v_slot = v_cache[slots.of(il)];
        Act keys, values;
        if (adjacent) {
            keys = k_slot.at_bytes(list.front() * k_row);
            values = v_slot.at_bytes(list.front() * v_row);
        } else if (st.resident()) {
            return st.fail(make_error(
                "sequence {}: its cells are not adjacent, which a resident context cannot attend "
                "over yet",
                run.seq));
        } else {
            // Grown with the sequence (a vector at least doubles), not to the
            // whole context: sixteen short sequences never pay for one long one.
            if (k_gather.size() < count * k_row) k_gather.resize(count * k_row);
            if (v_gather.size() < count * v_row) v_gather.resize(count * v_row);
            for (uint32_t j = 0; j < count; ++j) {
                std::memcpy(k_gather.data() + j * k_row, k_slot.host + list[j] * k_row, k_row);
                std::memcpy(v_gather.data() + j * v_row, v_slot.host + list[j] * v_row, v_row);
            }
            keys = Act{k_gather.data()};
            values = Act{v_gather.data()};
        }
        const Act q = act.s.q.at(uint64_t{run.row0} * q_dim(il));
        const Act out = act.s.att.at(uint64_t{run.row0} * o_dim(il));
        const uint32_t window = hp.attention_behind(local);
        const uint32_t lookahead = hp.attention_ahead(local);
        const Act* sinks = hp.arch->attention_sinks ? &consts[il].sinks : nullptr;
        if (!dense)
            return attend_with_holes(run, window, lookahead, list, q, keys, values, out, il);

        ferrox_attention_desc desc{};
        desc.struct_size = sizeof desc;
        desc.abi_version = FERROX_ABI_VERSION;
        desc.n_query = run.n;
        desc.pos0 = static_cast<uint32_t>(run.pos0 - base);
        desc.window = window;  // the last `window` positions, itself included
        // Non-causal: the later positions too, up to the run's last (the
        // sequence's: a non-causal sequence is decoded whole).
        desc.lookahead = lookahead;
        desc.n_head = hp.n_head;
        desc.n_head_kv = hp.layer_n_head_kv(il);
        desc.head_dim_k = hp.layer_head_dim_k(il);
        desc.head_dim_v = hp.layer_head_dim_v(il);
        desc.scale = hp.attn_scale;
        desc.kv_kind = kv_kinds.key;
        desc.value_kind = kv_kinds.value;
        desc.softcap = hp.attn_softcap;
        st.attention(desc, q, keys, values, out, sinks);
    }

    // Every row of the batch in one call (ABI 1.3): each attends over the
    // span of cell_list that decode() cut for it, so sequences never see
    // each other's cells, and a sequence's span is the same list in the same
    // order whatever else the batch holds.
    void attend_cells(StickySteps& st, uint32_t il, bool local, uint32_t n) {
        const int list = (local && hp.sliding_window) || hp.is_chunked_layer(il) ? 1 : 0;
        ferrox_attention_cells_desc desc{};
        desc.struct_size = sizeof desc;
        desc.abi_version = FERROX_ABI_VERSION;
        desc.n_query = n;
        desc.n_head = hp.n_head;
        desc.n_head_kv = hp.layer_n_head_kv(il);
        desc.head_dim_k = hp.layer_head_dim_k(il);
        desc.head_dim_v = hp.layer_head_dim_v(il);
        desc.scale = hp.attn_scale;
        desc.kv_kind = kv_kinds.key;
        desc.value_kind = kv_kinds.value;
        desc.n_cells = context;
        desc.n_index = static_cast<uint32_t>(cell_list.size());
        desc.max_span = max_span[list];
        desc.softcap = hp.attn_softcap;
        st.attention_cells(desc, act.s.q, k_cache[slots.of(il)], v_cache[slots.of(il)],
                           cell_list_dev, spans_dev[list], act.s.att,
                           hp.arch->attention_sinks ? &consts[il].sinks : nullptr);
    }

    // The batch's cell lists and spans for attend_cells: a run's rows share
    // its sequence's list (cells at positions up to the run's last); row i
    // at position p sees the list's cells at positions in
    // [p - behind + 1, p + ahead] (Hparams::attention_behind / _ahead) of
    // the global [0] and sliding-window [1] layers: causally those <= p,
    // above p - w too with a window w; non-causal ones the whole list, or
    // a symmetric window. A chunked model's [1] is its chunked layers':
    // those <= p from p's chunk's first position on.
    Expected<void> cut_spans(uint32_t n) {
        cell_list.clear();
        for (int k = 0; k < 2; ++k) {
            spans[k].assign(2 * size_t{n}, 0);
            max_span[k] = 0;
        }
        for (const AttentionRun& run : runs) {
            const auto base = static_cast<uint32_t>(cell_list.size());
            const std::vector<uint32_t>& own = run.cells[0];
            cell_list.insert(cell_list.end(), own.begin(), own.end());
            for (int k = 0; k < 2; ++k) {
                const int64_t behind = hp.attention_behind(k == 1);
                const int64_t ahead = hp.attention_ahead(k == 1);
                const int64_t chunk = k == 1 ? hp.attn_chunk : 0;
                uint32_t lo = 0, hi = 0;  // into own: first visible, one past the last
                for (uint32_t i = 0; i < run.n; ++i) {
                    const int64_t pos = run.pos0 + int64_t{i};
                    while (hi < own.size() && cells.pos(own[hi]) <= pos + ahead) ++hi;
                    while (behind && lo < hi && cells.pos(own[lo]) <= pos - behind) ++lo;
                    while (chunk && lo < hi && cells.pos(own[lo]) < pos / chunk * chunk) ++lo;
                    const uint32_t row = run.row0 + i;
                    spans[k][2 * size_t{row}] = base + lo;
                    spans[k][2 * size_t{row} + 1] = base + hi;
                    max_span[k] = std::max(max_span[k], hi - lo);
                }
            }
        }
        if (cell_list.size() > cell_list_capacity)
            return make_error("decode: the batch's cell lists hold {} entries; room for {}",
                              cell_list.size(), cell_list_capacity);
        StickySteps st(*steps);
        st.upload_words(cell_list, cell_list_dev);
        for (int k = 0; k < (hp.sliding_window || hp.attn_chunk ? 2 : 1); ++k)
            st.upload_words(spans[k], spans_dev[k]);
        return st.status();
    }

    // A sequence with positions removed from its middle (seq_remove): the
    // attention entry wants consecutive positions, so the core's own loop
    // attends each query over the visible rows of the gathered list.
    void attend_with_holes(const AttentionRun& run, uint32_t window, uint32_t lookahead,
                           const std::vector<uint32_t>& list, Act q, Act keys, Act values, Act out,
                           uint32_t il) {
        const uint64_t count = list.size();
        const uint64_t k_n = count * k_dim(il), v_n = count * v_dim(il);
        const auto widen = [&](Act a, ferrox_kind kind, uint64_t n,
                               std::vector<float>& wide) -> const float* {
            if (kind == FERROX_KIND_F32) return a.f32();
            wide.resize(n);
            // f16 widened, q8_0 / q4_0 dequantized: the reference readers.
            (void)quant::dequantize_row(kind, a.host, wide.data(), n);
            return wide.data();
        };
        const float* k = widen(keys, kv_kinds.key, k_n, k_wide);
        const float* v = widen(values, kv_kinds.value, v_n, v_wide);
        scores.resize(count);
        const ops::AttentionShape shape{
            hp.n_head,
            hp.layer_n_head_kv(il),
            hp.layer_head_dim_k(il),
            hp.layer_head_dim_v(il),
            hp.attn_scale,
            hp.attn_softcap,
            hp.arch->attention_sinks ? w.layers[il].sinks.data() : nullptr};
        uint32_t lo = 0, hi = 0;
        for (uint32_t i = 0; i < run.n; ++i) {
            const int32_t pos = run.pos0 + static_cast<int32_t>(i);
            const int32_t first = window ? pos + 1 - static_cast<int32_t>(window) : 0;
            const int64_t last = pos + int64_t{lookahead};
            while (lo < count && cells.pos(list[lo]) < first) ++lo;
            while (hi + 1 < count && cells.pos(list[hi + 1]) <= last) ++hi;
            ops::attend(shape, {q.f32() + i * q_dim(il), q_dim(il)}, k, v, lo, hi, scores,
                        {out.f32() + i * o_dim(il), o_dim(il)});
        }
    }

    // The batch's forward pass, once validate() and the cell assignment have
    // filled the row vectors. `out`: one vocab row per wanted token, in
    // sorted-row order (decode() puts them back into batch order). The ops
    // run without a check each; the pass's first failure is returned.
    Expected<void> run(std::span<float> out) {
        StickySteps st(*steps);
        decoder.forward(st, act, *this, row_tokens, row_pos, out_rows, out, hidden);
        return st.status();
    }

    Expected<void> allocate() {
        act.region_size = model.region_floats(max_batch, std::min(n_seq, max_batch));
        auto allocated = steps->allocate(act.region_size * sizeof(float));
        if (!allocated) return allocated.error();
        act.region = *allocated;
        activation_layout(hp, model.residency.resident, max_batch, &act.s, &act.region);
        states.allocate(hp, n_seq);
        act.size_host(hp, max_batch, steps->resident());
        k_cache.clear();
        v_cache.clear();
        kv_bytes = 0;
        // One K and one V buffer per slot: recurrent and shared layers have none.
        for (uint32_t s = 0; s < slots.size(); ++s) {
            auto k = steps->allocate(uint64_t{context} * k_row_bytes(slots.layer(s)));
            if (!k) return k.error();
            auto v = steps->allocate(uint64_t{context} * v_row_bytes(slots.layer(s)));
            if (!v) return v.error();
            k_cache.push_back(*k);
            v_cache.push_back(*v);
            kv_bytes +=
                uint64_t{context} * (k_row_bytes(slots.layer(s)) + v_row_bytes(slots.layer(s)));
        }
        if (steps->attends_over_cells()) {
            // A batch has at most min(n_seq, n_batch) runs, each listing at
            // most every cell once.
            cell_list_capacity = uint64_t{std::min(n_seq, max_batch)} * context;
            auto list = steps->allocate(cell_list_capacity * sizeof(uint32_t));
            if (!list) return list.error();
            cell_list_dev = *list;
            for (Act& spans_act : spans_dev) {
                auto a = steps->allocate(2 * uint64_t{max_batch} * sizeof(uint32_t));
                if (!a) return a.error();
                spans_act = *a;
            }
        }
        return {};
    }

    DecodeStatus invalid(std::string message) const {
        return {DecodeCode::InvalidBatch, std::move(message), 0, 0};
    }

    // seq_remove's part for recurrent states: refused unless it removes
    // nothing or whole sequences (checked for every sequence before any
    // changes), whose states are then cleared.
    Expected<void> remove_states(int32_t seq, int32_t p0, int32_t p1) {
        if (states.empty()) return {};
        const uint32_t first = seq < 0 ? 0 : static_cast<uint32_t>(seq);
        const uint32_t last = seq < 0 ? n_seq : first + 1;
        std::vector<uint32_t> cleared;
        for (uint32_t s = first; s < last; ++s) {
            auto whole = recurrent_removal(s, cells.min_pos(s), cells.max_pos(s), p0, p1);
            if (!whole) return make_error("seq_remove: {}", whole.error().message());
            if (*whole) cleared.push_back(s);
        }
        for (uint32_t s : cleared) states.zero(s);
        return {};
    }

    // seq_copy's part: a recurrent state is the whole sequence's, so the
    // copy must take all of src's positions and leave dst none of its own.
    Expected<void> copy_state(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
        if (states.empty() || src == dst) return {};
        const auto s = static_cast<uint32_t>(src), d = static_cast<uint32_t>(dst);
        const int32_t lo = std::max(p0, 0);
        const auto covers = [&](uint32_t q) {
            return cells.max_pos(q) < 0 ||
                   (lo <= cells.min_pos(q) && (p1 < 0 || p1 > cells.max_pos(q)));
        };
        if (!covers(s) || !covers(d))
            return make_error(
                "seq_copy: sequence {} to {} over [{}, {}): a recurrent model's state belongs to "
                "the whole sequence; copy all of its positions onto a sequence holding none "
                "outside them",
                src, dst, p0, p1);
        states.copy(s, d);
        return {};
    }

    // Checks the batch against the context before anything changes, then
    // sorts it into rows and runs. Every rule a batch can break is here.
    DecodeStatus validate(const Batch& b) {
        const size_t n = b.size();
        if (n == 0) return invalid("decode: the batch is empty");
        if (b.positions.size() != n || b.seq_ids.size() != n || b.logits.size() != n)
            return invalid(fmt::format(
                "decode: the batch's arrays differ in length (tokens {}, positions {}, seq_ids "
                "{}, logits {})",
                n, b.positions.size(), b.seq_ids.size(), b.logits.size()));
        if (n > max_batch)
            return invalid(
                fmt::format("decode: a batch of {} tokens exceeds n_batch {}", n, max_batch));
        for (size_t i = 0; i < n; ++i) {
            const int32_t id = b.tokens[i];
            if (id < 0 || static_cast<uint64_t>(id) >= hp.vocab)
                return invalid(fmt::format(
                    "decode: token id {} at batch index {} is outside the vocabulary (0..{})", id,
                    i, hp.vocab - 1));
            if (b.positions[i] < 0)
                return invalid(fmt::format("decode: position {} at batch index {} is negative",
                                           b.positions[i], i));
            if (b.seq_ids[i].empty())
                return invalid(fmt::format("decode: batch index {} names no sequence", i));
            if (b.seq_ids[i].size() > 1 && !states.empty())
                return invalid(fmt::format(
                    "decode: batch index {} names {} sequences; a recurrent model's state is "
                    "per sequence (decode one, then seq_copy it)",
                    i, b.seq_ids[i].size()));
            uint64_t mask = 0;
            for (int32_t seq : b.seq_ids[i]) {
                if (seq < 0 || static_cast<uint32_t>(seq) >= n_seq)
                    return invalid(fmt::format(
                        "decode: sequence id {} at batch index {} is outside 0..{} (n_seq {})", seq,
                        i, n_seq - 1, n_seq));
                if (mask >> seq & 1u)
                    return invalid(
                        fmt::format("decode: batch index {} names sequence {} twice", i, seq));
                mask |= uint64_t{1} << seq;
            }
        }
        // Per sequence: the batch's positions follow its last cached one,
        // each exactly once.
        std::vector<std::vector<int32_t>> seq_positions(n_seq);
        for (size_t i = 0; i < n; ++i)
            for (int32_t seq : b.seq_ids[i]) seq_positions[seq].push_back(b.positions[i]);
        for (uint32_t seq = 0; seq < n_seq; ++seq) {
            auto& p = seq_positions[seq];
            if (p.empty()) continue;
            std::sort(p.begin(), p.end());
            int32_t next = cells.max_pos(seq) + 1;
            for (int32_t pos : p) {
                if (pos != next)
                    return invalid(fmt::format(
                        "decode: sequence {} gets position {} where {} comes next (positions "
                        "must follow the sequence's last one, each once)",
                        seq, pos, next));
                ++next;
            }
        }
        // Rows sorted by (attending sequence, position).
        order.resize(n);
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
            const int32_t sx = b.seq_ids[x][0], sy = b.seq_ids[y][0];
            return sx != sy ? sx < sy : b.positions[x] < b.positions[y];
        });
        return {};
    }

    // Cells that no sequence can see again: only when every layer attends
    // through the sliding window (a global layer may see any earlier cell).
    // A future query at q > max_pos sees (q - window, q], so a cell at a
    // position below max_pos + 2 - window is outside every window to come.
    void reuse_out_of_window() {
        // A non-causal sequence is decoded whole: no later row comes to need fewer cells.
        if (hp.sliding_window == 0 || !hp.causal) return;
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            if (!hp.is_local_layer(il)) return;
        const auto window = static_cast<int32_t>(hp.sliding_window);
        for (uint32_t seq = 0; seq < n_seq; ++seq) {
            const int32_t max = cells.max_pos(seq);
            if (max >= 0) cells.remove(seq, 0, max + 2 - window);
        }
    }

    // The sorted rows into their cells: each row's token, position and cell,
    // the cell taken for the row's sequences, and which rows' logits are
    // wanted (and where each goes in batch order). Returns how many are.
    uint32_t place_rows(const Batch& b, const std::vector<uint32_t>& free_cells) {
        const auto n = static_cast<uint32_t>(b.size());
        row_tokens.resize(n);
        row_pos.resize(n);
        row_cell.resize(n);
        row_seq.resize(n);
        out_rows.clear();
        out_slot.clear();
        logits_row.assign(n, -1);
        uint32_t n_out = 0;
        for (uint32_t i = 0; i < n; ++i)
            if (b.logits[i]) logits_row[i] = static_cast<int32_t>(n_out++);
        for (uint32_t r = 0; r < n; ++r) {
            const uint32_t i = order[r];
            row_tokens[r] = b.tokens[i];
            row_pos[r] = b.positions[i];
            row_cell[r] = free_cells[r];
            row_seq[r] = static_cast<uint32_t>(b.seq_ids[i][0]);
            uint64_t mask = 0;
            for (int32_t seq : b.seq_ids[i]) mask |= uint64_t{1} << seq;
            cells.occupy(free_cells[r], b.positions[i], mask);
            if (b.logits[i]) {
                out_rows.push_back(r);
                out_slot.push_back(static_cast<uint32_t>(logits_row[i]));
            }
        }
        return n_out;
    }

    // Runs: consecutive rows of one attending sequence at consecutive positions.
    void cut_runs(const Batch& b) {
        runs.clear();
        for (uint32_t r = 0; r < b.size(); ++r) {
            const auto seq = static_cast<uint32_t>(b.seq_ids[order[r]][0]);
            if (!runs.empty() && runs.back().seq == seq &&
                runs.back().pos0 + static_cast<int32_t>(runs.back().n) == row_pos[r]) {
                ++runs.back().n;
                continue;
            }
            AttentionRun run;
            run.row0 = r;
            run.n = 1;
            run.seq = seq;
            run.pos0 = row_pos[r];
            runs.push_back(std::move(run));
        }
    }

    DecodeStatus decode(const Batch& b, std::span<float> out, bool own_buffer,
                        bool want_hidden = false) {
        if (auto v = validate(b); !v) return v;
        hidden = want_hidden;
        const auto n = static_cast<uint32_t>(b.size());
        auto free_cells = cells.find_free(n);
        if (free_cells.empty()) {
            reuse_out_of_window();
            free_cells = cells.find_free(n);
        }
        if (free_cells.empty())
            return {DecodeCode::NoRoom,
                    fmt::format("decode: {} tokens need {} free KV cells; {} of {} are free", n, n,
                                cells.free(), cells.size()),
                    n, cells.free()};

        // A sequence that starts here starts from a zero state, zeroed once
        // however many of its tokens the batch holds (a state is tens of MB
        // on a real model; a prompt chunk has hundreds of tokens).
        if (!states.empty()) {
            std::vector<int32_t> started;
            for (size_t i = 0; i < b.size(); ++i) {
                const int32_t seq = b.seq_ids[i][0];
                if (cells.max_pos(static_cast<uint32_t>(seq)) < 0 &&
                    std::find(started.begin(), started.end(), seq) == started.end()) {
                    states.zero(static_cast<uint32_t>(seq));
                    started.push_back(seq);
                }
            }
        }
        const uint32_t n_out = place_rows(b, free_cells);
        cut_runs(b);
        const bool over_cells = steps->attends_over_cells();
        for (AttentionRun& run : runs) {
            const int32_t last = run.pos0 + static_cast<int32_t>(run.n) - 1;
            cells.cells_of(run.seq, 0, last, run.cells[0]);
            if (hp.sliding_window && !over_cells) {
                const int64_t first = run.pos0 + int64_t{1} - hp.attention_behind(true);
                cells.cells_of(run.seq, static_cast<int32_t>(std::max<int64_t>(first, 0)), last,
                               run.cells[1]);
            }
        }
        if (over_cells) {
            if (auto r = cut_spans(n); !r) {
                cells.release(free_cells);
                return {DecodeCode::Failed, r.error().message(), 0, 0};
            }
        } else if (steps->resident()) {
            // The 1.2 resident attention entry reads a sequence's rows in place.
            for (const AttentionRun& run : runs)
                for (const auto& list : run.cells)
                    if (!list.empty() && (list.back() - list.front() + 1 != list.size() ||
                                          cells.pos(list.back()) - cells.pos(list.front()) + 1 !=
                                              static_cast<int32_t>(list.size()))) {
                        cells.release(free_cells);
                        return invalid(fmt::format(
                            "decode: sequence {}'s cells are not one adjacent run in position "
                            "order, which a resident context needs",
                            run.seq));
                    }
        }

        std::span<float> dst = out;
        if (own_buffer && !hidden && !steps->resident() &&
            uint64_t{n_out} * (hp.vocab + hp.n_embd) <= act.region_size) {
            dst = {act.region.f32(), uint64_t{n_out} * hp.vocab};
        } else if (own_buffer) {
            // Hidden rows never go to the region: they are copied out of it.
            const uint64_t floats = uint64_t{n_out} * row_width();
            if (floats > logits_capacity) {
                logits_buffer = std::make_unique_for_overwrite<float[]>(floats);
                logits_capacity = floats;
            }
            dst = {logits_buffer.get(), floats};
        } else if (out.size() != uint64_t{n_out} * hp.vocab) {
            cells.release(free_cells);
            return invalid(
                fmt::format("decode: the logits span holds {} floats; {} wanted rows "
                            "need {}",
                            out.size(), n_out, uint64_t{n_out} * hp.vocab));
        }
        if (auto r = run(dst); !r) {
            // The cells this batch took are given back; the K/V rows written
            // into them are unreachable, everything else is as it was.
            cells.release(free_cells);
            logits_row.assign(n, -1);
            return {DecodeCode::Failed, r.error().message(), 0, 0};
        }
        // The states this batch wrote become current (one run per sequence).
        if (!states.empty())
            for (const AttentionRun& r : runs) states.commit(r.seq);
        permute_to_batch_order(dst);
        logits_data = own_buffer ? dst.data() : nullptr;
        return {};
    }

    // Rows were computed in sorted order; out_slot[k] is where row k belongs.
    // Cycles of swaps through one spare row put them in place.
    void permute_to_batch_order(std::span<float> dst) {
        const size_t n_out = out_slot.size();
        const uint64_t width = row_width();
        std::vector<uint32_t> slot = out_slot;
        std::vector<float> spare;
        for (size_t k = 0; k < n_out; ++k) {
            while (slot[k] != k) {
                const uint32_t to = slot[k];
                if (spare.empty()) spare.resize(width);
                float* a = dst.data() + k * width;
                float* c = dst.data() + uint64_t{to} * width;
                std::memcpy(spare.data(), c, width * sizeof(float));
                std::memcpy(c, a, width * sizeof(float));
                std::memcpy(a, spare.data(), width * sizeof(float));
                std::swap(slot[k], slot[to]);
            }
        }
    }
};

// A sequence id within 0..n_seq-1 (or -1, every sequence, where `allow_all`).
inline Expected<void> check_seq(int32_t seq, uint32_t n_seq, bool allow_all) {
    if ((seq < 0 && !allow_all) || seq >= static_cast<int32_t>(n_seq))
        return make_error("sequence id {} is outside 0..{} (n_seq {})", seq, n_seq - 1, n_seq);
    return {};
}

}  // namespace ferrox::model
