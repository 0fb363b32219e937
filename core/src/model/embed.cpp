#include "ferrox/model/embed.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ferrox::model {
namespace {

// Which rows of a sequence the pooling reads.
bool wants_row(Pooling pooling, bool causal, size_t pos, size_t n) {
    switch (pooling) {
        case Pooling::Mean:
            return true;
        case Pooling::Cls:
            return pos == 0;
        case Pooling::Last:
            return pos + 1 == n;
        case Pooling::Rank:  // as llama.cpp: a causal reranker's last row, an encoder's first
            return causal ? pos + 1 == n : pos == 0;
        default:
            return false;
    }
}

// The CPU plugin multiplies up to 16 rows as MATVEC does and from 17 with
// its panel GEMM, whose sums group differently (docs/cpu.md, docs/models.md
// "Batch invariance"). An input's rows take one path alone and another among
// other inputs unless every decode has at least this many rows: a short
// batch is padded with filler rows placed after the last input's rows, in
// its sequence. Causal attention keeps every input row from seeing them
// (rows of other sequences never see them either), nothing reads their
// output, and their cells are removed after the decode; so a context of one
// sequence pads as well as one of many. A non-causal model's rows would see
// them there: its filler goes into a sequence of its own, where one is free
// (else the batch is not padded).
constexpr size_t kInvariantRows = 17;

// One input being embedded: where its tokens stand and its running sum.
struct Pending {
    size_t input = 0;  // index into the inputs
    size_t next = 0;   // its first token not decoded yet
    int32_t seq = 0;   // the sequence id it decodes under
    std::vector<double> sum;
};

}  // namespace

void normalize_l2(std::span<float> v) {
    double sum = 0;
    for (float x : v) sum += double{x} * double{x};
    if (sum <= 0) return;
    const double inv = 1.0 / std::sqrt(sum);
    for (float& x : v) x = static_cast<float>(double{x} * inv);
}

Expected<std::vector<std::vector<float>>> embed(Context& ctx,
                                                std::span<const std::vector<int32_t>> inputs,
                                                const EmbedOptions& options) {
    const Pooling pooling = options.pooling;
    if (pooling != Pooling::Mean && pooling != Pooling::Cls && pooling != Pooling::Last &&
        pooling != Pooling::Rank)
        return make_error("embed: pooling '{}' is not one ferrox pools (mean, cls, last, rank)",
                          pooling_name(pooling));
    // A batch never holds more tokens than the context has cells.
    const size_t room = std::min(ctx.batch(), ctx.context());
    const bool causal = ctx.causal();
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].empty()) return make_error("embed: input {} has no tokens", i);
        if (inputs[i].size() > ctx.context())
            return make_error("embed: input {} has {} tokens; the context holds {}", i,
                              inputs[i].size(), ctx.context());
        // Non-causal attention sees the whole input at once: no chunks.
        if (!causal && inputs[i].size() > room)
            return make_error(
                "embed: input {} has {} tokens; a non-causal model embeds each input in one "
                "batch, which holds {}",
                i, inputs[i].size(), room);
        if (inputs[i].size() > ctx.longest_embedding_input())
            return make_error(
                "embed: input {} has {} tokens; the model's learned positions stop "
                "at {} (its context_length)",
                i, inputs[i].size(), ctx.longest_embedding_input());
    }
    const uint32_t input_seqs = ctx.sequences();
    std::vector<std::vector<float>> out(inputs.size());
    ctx.clear();
    size_t next_input = 0;
    std::vector<Pending> open;  // inputs in the batch being built, by sequence id
    Batch batch;
    bool headless = false;  // Rank pooling on a model without a head
    // Each round decodes whole inputs side by side, in input order; an input
    // longer than a batch runs alone, one batch-sized chunk a round.
    while (next_input < inputs.size() || !open.empty()) {
        batch.clear();
        if (open.empty()) {
            while (next_input < inputs.size() && open.size() < input_seqs) {
                const size_t n = inputs[next_input].size();
                if (!open.empty() && batch.size() + n > room) break;
                Pending p;
                p.input = next_input++;
                p.seq = static_cast<int32_t>(open.size());
                open.push_back(std::move(p));
                const size_t take = std::min(n, room - batch.size());
                for (size_t t = 0; t < take; ++t) {
                    const std::vector<int32_t>& in = inputs[open.back().input];
                    const int32_t seq[] = {open.back().seq};
                    batch.add(in[t], static_cast<int32_t>(t), seq,
                              wants_row(pooling, causal, t, n));
                }
                open.back().next = take;
                if (take < n) break;  // a long input: alone in this round
            }
        } else {
            // The one long input still open goes on from where it stopped.
            Pending& p = open.front();
            const std::vector<int32_t>& in = inputs[p.input];
            const size_t take = std::min(in.size() - p.next, room);
            const int32_t seq[] = {p.seq};
            for (size_t t = p.next; t < p.next + take; ++t)
                batch.add(in[t], static_cast<int32_t>(t), seq,
                          wants_row(pooling, causal, t, in.size()));
            p.next += take;
        }
        const size_t rows = batch.size();
        // The filler (kInvariantRows): positions after the last input's rows,
        // or for a non-causal model a free sequence's first positions.
        const int32_t filler_seq[] = {causal ? open.back().seq : static_cast<int32_t>(open.size())};
        const size_t filler_from = causal ? open.back().next : 0;
        const size_t fillers = kInvariantRows - std::min(rows, kInvariantRows);
        const bool pad =
            fillers > 0 && room >= kInvariantRows && ctx.cells().free() >= kInvariantRows &&
            filler_from + fillers <= ctx.context() && (causal || open.size() < input_seqs);
        if (pad)
            for (size_t t = 0; t < fillers; ++t)
                batch.add(0, static_cast<int32_t>(filler_from + t), filler_seq, false);
        const DecodeStatus status = ctx.decode_embeddings(batch);
        if (pad) (void)ctx.seq_remove(filler_seq[0], static_cast<int32_t>(filler_from), -1);
        if (!status) {
            ctx.clear();
            return make_error("embed: {}", status.message);
        }
        // The wanted rows, each added to its input's sum in position order.
        for (uint32_t i = 0; i < rows; ++i) {
            const std::span<const float> row = ctx.embedding(i);
            if (row.empty()) continue;
            Pending& p = open[static_cast<size_t>(batch.seq_ids[i][0])];
            if (p.sum.empty()) p.sum.assign(row.size(), 0.0);
            for (size_t j = 0; j < row.size(); ++j) p.sum[j] += double{row[j]};
        }
        std::erase_if(open, [&](Pending& p) {
            const size_t n = inputs[p.input].size();
            if (p.next < n) return false;
            const double scale = pooling == Pooling::Mean ? 1.0 / static_cast<double>(n) : 1.0;
            std::vector<float>& v = out[p.input];
            v.resize(p.sum.size());
            for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(p.sum[j] * scale);
            if (pooling == Pooling::Rank) {
                v = ctx.rank_scores(v);
                headless = headless || v.empty();
            } else {
                ctx.project_pooled(v);  // dense projections, before the norm (as llama.cpp)
                if (options.normalize) normalize_l2(v);
            }
            return true;
        });
        if (open.empty()) ctx.clear();
        if (headless) {
            ctx.clear();
            return make_error(
                "embed: rank pooling needs the model's classifier head "
                "(cls.output.weight), which it has not");
        }
    }
    return out;
}

}  // namespace ferrox::model
