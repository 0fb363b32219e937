#include "context_drafter.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace ferrox::server {

std::span<const float> ContextDrafter::decode(int32_t seq, std::span<const int32_t> tokens,
                                              int32_t pos) {
    if (tokens.empty()) return {};
    model::Batch batch;
    for (size_t i = 0; i < tokens.size(); ++i)
        batch.add(tokens[i], pos + int32_t(i), {seq}, i + 1 == tokens.size());
    const auto status = ctx_->decode(batch);
    if (!status) {
        error_ = status.message;
        return {};
    }
    return ctx_->logits(uint32_t(tokens.size() - 1));
}

bool ContextDrafter::remove(int32_t seq, int32_t pos) {
    if (ctx_->seq_remove(seq, pos, -1)) return true;
    error_ = fmt::format("sequence {} refused the removal of its positions from {} on", seq, pos);
    return false;
}

void ContextDrafter::propose(std::span<const Proposal> proposals) {
    std::vector<ModelDraftSource*> active;
    for (const Proposal& p : proposals)
        if (p.source->begin(p.tokens, p.max_draft)) active.push_back(p.source);
    const size_t most = std::max<size_t>(std::min(batch_, rows_per_call_), 1);
    // One call: the sources' pending rows, each source's last row asking
    // for the logits its next guess reads.
    std::vector<ModelDraftSource*> in;
    std::vector<uint32_t> last_row;
    model::Batch batch;
    const auto run = [&] {
        if (in.empty()) return;
        const auto status = ctx_->decode(batch);
        for (size_t i = 0; i < in.size(); ++i) {
            if (status)
                in[i]->decoded(ctx_->logits(last_row[i]));
            else
                in[i]->failed(status.message);
        }
        in.clear();
        last_row.clear();
        batch = model::Batch();
    };
    // Each round is one step of every proposal still under way: the first
    // brings the cells up to the history, the others decode the last guess.
    while (!active.empty()) {
        for (ModelDraftSource* s : active) {
            const auto rows = s->pending();
            if (batch.size() + rows.size() > most) run();
            for (size_t i = 0; i < rows.size(); ++i)
                batch.add(rows[i], s->pos() + int32_t(i), {s->seq()}, i + 1 == rows.size());
            in.push_back(s);
            last_row.push_back(uint32_t(batch.size() - 1));
        }
        run();
        std::erase_if(active, [](const ModelDraftSource* s) { return s->pending().empty(); });
    }
}

}  // namespace ferrox::server
