#include <algorithm>
#include <cmath>
#include <cstring>

#include "context_impl.h"

namespace ferrox::model {

// ---- The pass traced ---------------------------------------------------------

Expected<PassTrace> trace_pass(const gguf::File& file, const Hparams& hp, Dispatcher& dispatcher,
                               KvKinds kv_kinds) {
    Model::Impl m(file, dispatcher);
    m.hp = hp;
    auto weights = bind_weights(file, hp);
    if (!weights) return weights.error();
    m.w = std::move(*weights);
    m.kv_kinds = kv_kinds;
    m.context = 3;  // a step of one token, then one of two
    m.max_batch = 2;
    m.residency.resident = true;  // the resident layout, with its logits region
    m.set_rope();
    if (auto r = m.bind_embedding_matrix(); !r) return r.error();
    PassTrace trace;
    m.steps = make_tracing_steps(dispatcher, m.embedding(), trace);
    if (auto r = m.allocate_constants(); !r) return r.error();
    Context::Impl c(m, m.context, m.max_batch, 1);
    c.steps = make_tracing_steps(dispatcher, m.embedding(), trace);
    if (auto r = c.allocate(); !r) return r.error();
    // Every row wants logits, so the output product is traced as a MATVEC
    // and as a GEMM (a prefill that scores each position, as `logits` does).
    // An encoder (bert) gives hidden states only: its pass is traced so.
    const bool hidden = hp.arch->bert_encoder;
    Batch batch;
    batch.add(0, 0, {0}, true);
    if (auto r = c.decode(batch, {}, true, hidden); !r)
        return make_error("{}: tracing the forward pass: {}", file.path().string(), r.message);
    batch.clear();
    batch.add(0, 1, {0}, true);
    batch.add(0, 2, {0}, true);
    if (auto r = c.decode(batch, {}, true, hidden); !r)
        return make_error("{}: tracing the forward pass: {}", file.path().string(), r.message);
    return trace;
}

// ---- Context ----------------------------------------------------------------

void Batch::add(int32_t token, int32_t pos, std::initializer_list<int32_t> seqs, bool want_logits) {
    add(token, pos, std::span<const int32_t>(seqs.begin(), seqs.size()), want_logits);
}

void Batch::add(int32_t token, int32_t pos, std::span<const int32_t> seqs, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.emplace_back(seqs.begin(), seqs.end());
    logits.push_back(want_logits ? 1 : 0);
}

void Batch::clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    logits.clear();
}

const char* decode_code_name(DecodeCode code) {
    switch (code) {
        case DecodeCode::Ok:
            return "ok";
        case DecodeCode::InvalidBatch:
            return "invalid batch";
        case DecodeCode::NoRoom:
            return "no room in the KV cache";
        case DecodeCode::Failed:
            return "failed";
    }
    return "unknown";
}

Expected<std::unique_ptr<Context>> Context::create(const Model& model,
                                                   const ContextOptions& options) {
    const Model::Impl& m = *model.impl_;
    const uint32_t n_ctx = options.context ? options.context : m.context;
    const uint32_t n_batch = options.batch ? options.batch : m.max_batch;
    if (options.sequences == 0 || options.sequences > KvCells::kMaxSeq)
        return make_error("context: n_seq {} is outside 1..{}", options.sequences,
                          KvCells::kMaxSeq);
    if (n_batch > n_ctx)
        return make_error("context: n_batch {} exceeds n_ctx {} (a batch's tokens need cells)",
                          n_batch, n_ctx);
    if (m.residency.resident && options.sequences > 1 &&
        !m.dispatcher.resident_backend().has_attention_cells()) {
        const Backend& b = m.dispatcher.resident_backend();
        return make_error(
            "context: {} sequences on the resident {} backend: its plugin is ABI {}, whose "
            "resident attention reads one sequence's cells in place; several sequences need "
            "ABI 1.3's attention_cells (update the plugin, or load the model with --resident "
            "off)",
            options.sequences, b.name(), b.abi_version_text());
    }
    // Its KV cache, scratch, cell lists and one logits row per sequence,
    // against the memory free now: the weights are already in place. A
    // server's or the C API's context is larger than the model's own, which
    // the load-time plan covered.
    MemoryDemand demand;
    demand.subject = fmt::format("a context of {} cells for {} sequences (batch {})", n_ctx,
                                 options.sequences, n_batch);
    demand.cells = n_ctx;
    demand.n_batch = n_batch;
    demand.logits_rows = std::min(options.sequences, n_batch);
    demand.sequences = options.sequences;
    demand.available_bytes = options.available_bytes;
    demand.available_what = "the context's available_bytes";
    if (auto fits = plan_memory(m, demand); !fits)
        return make_error("context: {}", fits.error().message());
    auto impl = std::make_unique<Impl>(m, n_ctx, n_batch, options.sequences);
    impl->steps = m.make_steps(n_ctx);
    if (options.profile)
        impl->steps = make_profiling_steps(std::move(impl->steps), *options.profile);
    if (auto r = impl->allocate(); !r) return r.error();
    return std::unique_ptr<Context>(new Context(std::move(impl)));
}

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;
uint32_t Context::context() const { return impl_->context; }
uint32_t Context::sequences() const { return impl_->n_seq; }
uint32_t Context::batch() const { return impl_->max_batch; }
const KvCells& Context::cells() const { return impl_->cells; }
uint64_t Context::kv_bytes() const { return impl_->kv_bytes; }
bool Context::recurrent() const { return !impl_->states.empty(); }

namespace {

// A non-causal model's rows see the later ones: none of them is a next-token
// prediction, so such a model gives pooled output only.
DecodeStatus refuse_logits(const Hparams& hp) {
    return {DecodeCode::InvalidBatch,
            fmt::format("decode: '{}' attends non-causally (an embedding encoder): it gives "
                        "pooled output (decode_embeddings), never logits",
                        hp.arch_name),
            0, 0};
}

}  // namespace

DecodeStatus Context::decode(const Batch& batch) {
    if (!impl_->hp.causal) return refuse_logits(impl_->hp);
    return impl_->decode(batch, {}, true);
}

DecodeStatus Context::decode_into(const Batch& batch, std::span<float> out) {
    if (!impl_->hp.causal) return refuse_logits(impl_->hp);
    return impl_->decode(batch, out, false);
}

std::span<const float> Context::logits(uint32_t index) const {
    const Impl& c = *impl_;
    if (c.hidden || index >= c.logits_row.size() || c.logits_row[index] < 0 || !c.logits_data)
        return {};
    return {c.logits_data + uint64_t(c.logits_row[index]) * c.hp.vocab, c.hp.vocab};
}

DecodeStatus Context::decode_embeddings(const Batch& batch) {
    Impl& c = *impl_;
    // Non-causal: a row sees its whole sequence, so each sequence is decoded
    // whole, in one batch (its earlier rows would never see later ones), and
    // each token attends in one sequence only.
    if (!c.hp.causal)
        for (size_t i = 0; i < batch.seq_ids.size(); ++i) {
            const std::vector<int32_t>& seqs = batch.seq_ids[i];
            if (seqs.size() > 1)
                return c.invalid(fmt::format(
                    "decode: batch index {} names {} sequences; a non-causal model's token "
                    "belongs to one",
                    i, seqs.size()));
            if (seqs.size() == 1 && seqs[0] >= 0 && static_cast<uint32_t>(seqs[0]) < c.n_seq &&
                c.cells.max_pos(static_cast<uint32_t>(seqs[0])) >= 0)
                return c.invalid(fmt::format(
                    "decode: sequence {} already holds positions up to {}; a non-causal model "
                    "attends over whole sequences, each decoded in one batch",
                    seqs[0], c.cells.max_pos(static_cast<uint32_t>(seqs[0]))));
        }
    return c.decode(batch, {}, true, true);
}

std::span<const float> Context::embedding(uint32_t index) const {
    const Impl& c = *impl_;
    if (!c.hidden || index >= c.logits_row.size() || c.logits_row[index] < 0 || !c.logits_data)
        return {};
    return {c.logits_data + uint64_t(c.logits_row[index]) * c.hp.n_embd, c.hp.n_embd};
}

bool Context::causal() const { return impl_->hp.causal; }

uint32_t Context::longest_embedding_input() const {
    uint32_t n = context();
    if (!causal()) n = std::min(n, batch());
    if (impl_->hp.arch->learned_positions) n = std::min(n, impl_->hp.n_ctx_train);
    return n;
}

namespace {

// The pooled-output heads on the host (dense projections, a classifier): a
// row-major f32 matrix of `rows` rows times x, each dot summed in double.
std::vector<double> host_product(std::span<const float> matrix, std::span<const float> x,
                                 uint64_t rows) {
    std::vector<double> y(rows);
    for (uint64_t r = 0; r < rows; ++r) {
        const float* row = matrix.data() + r * x.size();
        double dot = 0;
        for (size_t i = 0; i < x.size(); ++i) dot += double{row[i]} * double{x[i]};
        y[r] = dot;
    }
    return y;
}

std::vector<float> to_floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace

void Context::project_pooled(std::vector<float>& pooled) const {
    const ModelWeights& w = impl_->model.w;
    const uint64_t n_embd = impl_->hp.n_embd, feat = impl_->hp.dense_feat;
    if (w.dense_2.empty() || pooled.size() != n_embd) return;
    const std::vector<float> mid = to_floats(host_product(w.dense_2, pooled, feat));
    pooled = to_floats(host_product(w.dense_3, mid, n_embd));
}

std::vector<float> Context::rank_scores(std::span<const float> pooled) const {
    const Hparams& hp = impl_->hp;
    const ModelWeights& w = impl_->model.w;
    if (w.cls_out.empty() || pooled.size() != hp.n_embd) return {};
    std::vector<float> x(pooled.begin(), pooled.end());
    if (!w.cls.empty()) {  // a sequence classifier's dense layer and tanh (BERT's)
        const std::vector<double> h = host_product(w.cls, x, hp.n_embd);
        for (size_t j = 0; j < x.size(); ++j) {
            const double bias = w.cls_bias.empty() ? 0.0 : double{w.cls_bias[j]};
            x[j] = static_cast<float>(std::tanh(h[j] + bias));
        }
    }
    std::vector<double> logits = host_product(w.cls_out, x, hp.n_cls_out);
    if (!w.cls_out_bias.empty())
        for (uint32_t j = 0; j < hp.n_cls_out; ++j) logits[j] += double{w.cls_out_bias[j]};
    if (hp.arch->rank_classifier) return to_floats(logits);  // the head's outputs as they are
    double top = logits[0], sum = 0;
    for (const double l : logits) top = std::max(top, l);
    for (double& l : logits) sum += l = std::exp(l - top);
    std::vector<float> scores(hp.n_cls_out);
    for (uint32_t j = 0; j < hp.n_cls_out; ++j) scores[j] = static_cast<float>(logits[j] / sum);
    return scores;
}

Expected<void> Context::seq_remove(int32_t seq, int32_t p0, int32_t p1) {
    if (auto r = check_seq(seq, impl_->n_seq, true); !r) return r;
    if (auto r = impl_->remove_states(seq, p0, p1); !r) return r;
    if (seq < 0)
        impl_->cells.remove_all(p0, p1);
    else
        impl_->cells.remove(static_cast<uint32_t>(seq), p0, p1);
    return {};
}

Expected<void> Context::seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    if (auto r = check_seq(src, impl_->n_seq, false); !r) return r;
    if (auto r = check_seq(dst, impl_->n_seq, false); !r) return r;
    if (auto r = impl_->copy_state(src, dst, p0, p1); !r) return r;
    impl_->cells.copy(static_cast<uint32_t>(src), static_cast<uint32_t>(dst), p0, p1);
    return {};
}

Expected<void> Context::seq_keep(int32_t seq) {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r;
    impl_->cells.keep(static_cast<uint32_t>(seq));
    if (!impl_->states.empty())
        for (uint32_t s = 0; s < impl_->n_seq; ++s)
            if (s != static_cast<uint32_t>(seq)) impl_->states.zero(s);
    return {};
}

void Context::clear() {
    impl_->cells.clear();
    if (!impl_->states.empty())
        for (uint32_t s = 0; s < impl_->n_seq; ++s) impl_->states.zero(s);
}

Expected<int32_t> Context::seq_min_pos(int32_t seq) const {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r.error();
    return impl_->cells.min_pos(static_cast<uint32_t>(seq));
}

Expected<int32_t> Context::seq_max_pos(int32_t seq) const {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r.error();
    return impl_->cells.max_pos(static_cast<uint32_t>(seq));
}

}  // namespace ferrox::model
