// The model's public face: its facts, and forward(), the single-sequence
// convenience over a context of its own. Loading is load.cpp, the blocks
// decoder.cpp, batches and the KV cache context.cpp.
#include "ferrox/model/model.h"

#include <algorithm>
#include <memory>
#include <span>

#include "ferrox/model/context.h"
#include "load.h"
#include "seq_states.h"

namespace ferrox::model {

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const Hparams& Model::hparams() const { return impl_->hp; }
const CapacityPlan& Model::capacity() const { return impl_->plan; }
const Residency& Model::residency() const { return impl_->residency; }
const CapacityPlan& Model::device_capacity() const { return impl_->device_plan; }
uint32_t Model::context() const { return impl_->context; }
uint64_t Model::kv_cache_bytes(uint32_t cells) const {
    return model::kv_cache_bytes(impl_->kv_terms(cells));
}
uint64_t Model::vocab() const { return impl_->hp.vocab; }
uint32_t Model::max_batch() const { return impl_->max_batch; }
bool Model::recurrent() const { return SeqStates::seq_floats(impl_->hp) > 0; }

Expected<void> Model::forward(std::span<const int32_t> tokens, uint32_t pos,
                              std::span<float> logits) {
    const Impl& m = *impl_;
    // Made on first use: a model whose callers make their own contexts (the
    // C API, batched-bench) must not also hold a whole-context KV cache.
    if (!default_context_) {
        ContextOptions single;
        single.context = m.context;
        single.batch = m.max_batch;
        single.profile = m.options_profile;
        single.available_bytes = m.plan.available_bytes;  // what the load-time plan saw
        auto context = Context::create(*this, single);
        if (!context) return context.error();
        default_context_ = std::move(*context);
    }
    Context& c = *default_context_;
    const uint64_t n = tokens.size();
    if (n == 0) return make_error("forward: no tokens");
    if (pos + n > m.context)
        return make_error("forward: positions {}..{} exceed the context of {} (raise -c)", pos,
                          pos + n - 1, m.context);
    const bool all = logits.size() == n * m.hp.vocab;
    if (!logits.empty() && !all && logits.size() != m.hp.vocab)
        return make_error("forward: logits span holds {} floats; expected 0, {} or {}",
                          logits.size(), m.hp.vocab, n * m.hp.vocab);
    if (auto r = c.seq_remove(0, static_cast<int32_t>(pos), -1); !r) return r;
    Batch batch;
    for (uint64_t start = 0; start < n; start += m.max_batch) {
        const uint64_t count = std::min<uint64_t>(m.max_batch, n - start);
        const bool last_chunk = start + count == n;
        std::span<float> out;
        batch.clear();
        for (uint64_t i = 0; i < count; ++i)
            batch.add(tokens[start + i], static_cast<int32_t>(pos + start + i), {0},
                      all || (last_chunk && !logits.empty() && i + 1 == count));
        if (all)
            out = logits.subspan(start * m.hp.vocab, count * m.hp.vocab);
        else if (last_chunk)
            out = logits;
        if (auto r = c.decode_into(batch, out); !r) return make_error("{}", r.message);
    }
    return {};
}

}  // namespace ferrox::model
