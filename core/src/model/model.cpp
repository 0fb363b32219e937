#include "ferrox/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <span>

#include "ferrox/log.h"
#include "ferrox/model/context.h"
#include "ferrox/model/defaults.h"
#include "ferrox/model/ops.h"
#include "ferrox/model/rope_tables.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant_kind.h"
#include "residency.h"
#include "steps.h"
#include "weights.h"

namespace ferrox::model {

// Where each activation lives, carved once for a context's `n_batch` rows out
// of one allocation: no allocation per token, on the host or on a device.
struct Scratch {
    Act x, xn, router, expert_gate, expert_up, expert_down, logits;
    // The attention block's q, k, v, att, o and the FFN's gate, up, ffn are never
    // live at the same time, so the two blocks share one region.
    Act q, k, v, att, o, gate, up, ffn;
    // [global, local, global for q under an attention temperature][position][head_dim / 2]
    Act rope_cos[3], rope_sin[3];
};

// Norm weights, biases and sinks where the ops read them.
struct LayerConstants {
    Act attn_norm, ffn_norm, q_norm, k_norm, post_attn_norm, post_ffw_norm;
    Act q_bias, k_bias, v_bias, o_bias, sinks;
    Act gate_exps_bias, up_exps_bias, down_exps_bias;  // [n_expert][rows]
};

// Each layer's constants: the vector bound from the file and where the ops
// read it (empty vectors -- parts an architecture lacks -- are skipped).
constexpr std::pair<std::vector<float> LayerWeights::*, Act LayerConstants::*> kLayerConstants[] = {
    {&LayerWeights::attn_norm, &LayerConstants::attn_norm},
    {&LayerWeights::ffn_norm, &LayerConstants::ffn_norm},
    {&LayerWeights::q_norm, &LayerConstants::q_norm},
    {&LayerWeights::k_norm, &LayerConstants::k_norm},
    {&LayerWeights::post_attn_norm, &LayerConstants::post_attn_norm},
    {&LayerWeights::post_ffw_norm, &LayerConstants::post_ffw_norm},
    {&LayerWeights::q_bias, &LayerConstants::q_bias},
    {&LayerWeights::k_bias, &LayerConstants::k_bias},
    {&LayerWeights::v_bias, &LayerConstants::v_bias},
    {&LayerWeights::o_bias, &LayerConstants::o_bias},
    {&LayerWeights::sinks, &LayerConstants::sinks},
    {&LayerWeights::gate_exps_bias, &LayerConstants::gate_exps_bias},
    {&LayerWeights::up_exps_bias, &LayerConstants::up_exps_bias},
    {&LayerWeights::down_exps_bias, &LayerConstants::down_exps_bias},
};

// Rows of logits a resident model computes per download.
constexpr uint32_t kLogitRows = 16;

struct Model::Impl {
    const gguf::File& file;
    Dispatcher& dispatcher;
    Hparams hp;
    CapacityPlan plan, device_plan;
    Residency residency;
    ModelWeights w;
    // token_embd as a matrix for a resident backend's get_rows (w.output when tied).
    std::optional<WeightMatrix> embedding_matrix;
    uint32_t context = 0, max_batch = 0;
    ferrox_kind kv_kind = FERROX_KIND_F32;
    StepProfile* options_profile = nullptr;  // for forward()'s own context
    // Holds the constants below (device buffers when resident); contexts
    // make their own Steps for their cache and scratch.
    std::unique_ptr<Steps> steps;
    std::vector<LayerConstants> consts;
    Act output_norm;
    RopeSpec rope[2];  // [global, local]: how a position becomes angles

    Impl(const gguf::File& f, Dispatcher& d) : file(f), dispatcher(d) {}

    uint64_t q_dim() const { return uint64_t{hp.n_head} * hp.head_dim_k; }
    uint64_t k_dim() const { return uint64_t{hp.n_head_kv} * hp.head_dim_k; }
    uint64_t v_dim() const { return uint64_t{hp.n_head_kv} * hp.head_dim_v; }
    uint64_t o_dim() const { return uint64_t{hp.n_head} * hp.head_dim_v; }
    // F32 and F16 are one-element blocks: the kind table's block size is the element's.
    size_t kv_element_bytes() const { return kind_traits(kv_kind)->block_bytes; }

    // token_embd as a matrix, when output.weight is its own tensor (tied: w.output is it).
    Expected<void> bind_embedding_matrix() {
        if (file.find_tensor("output.weight") == nullptr) return {};
        auto embd = bind_matrix(file, "token_embd.weight", hp.vocab, hp.n_embd);
        if (!embd) return embd.error();
        embedding_matrix = std::move(*embd);
        return {};
    }
    const WeightMatrix& embedding() const {
        return embedding_matrix ? *embedding_matrix : *w.output;
    }

    std::unique_ptr<Steps> make_steps(uint32_t n_ctx) const {
        if (residency.resident) return make_resident_steps(dispatcher, embedding());
        return make_host_steps(dispatcher, *w.token_embd, hp.n_embd, n_ctx);
    }

    // Per position: the larger of the attention block's and the FFN's buffers.
    uint64_t block_floats() const {
        const uint64_t attention = q_dim() + k_dim() + v_dim() + o_dim() + hp.n_embd;
        const uint64_t ffn = 2 * std::max<uint64_t>(hp.n_ff, 1) + hp.n_embd;
        return std::max(attention, ffn);
    }

    // The one activation region of a context with `max_batch` rows, in
    // floats; lays it out into `s` when `base` is given.
    uint64_t layout(uint32_t n_batch, Scratch* sp, const Act* base) const {
        Scratch unused;
        Scratch& s = sp ? *sp : unused;
        uint64_t used = 0;
        const auto carve = [&](Act& a, uint64_t floats) {
            if (base) a = base->at(used);
            used += floats;
        };
        const uint64_t b = n_batch, ff = std::max<uint64_t>(hp.n_ff, 1);
        const uint64_t half = hp.head_dim_k / 2;
        carve(s.x, b * hp.n_embd);
        carve(s.xn, b * hp.n_embd);
        const uint64_t blocks = used;
        carve(s.q, b * q_dim());
        carve(s.k, b * k_dim());
        carve(s.v, b * v_dim());
        carve(s.att, b * o_dim());
        carve(s.o, b * hp.n_embd);
        used = blocks;  // the FFN block starts over
        carve(s.gate, b * ff);
        carve(s.up, b * ff);
        carve(s.ffn, b * hp.n_embd);
        used = blocks + b * block_floats();
        carve(s.router, b * hp.n_expert);
        carve(s.expert_gate, hp.n_ff_expert);
        carve(s.expert_up, hp.n_ff_expert);
        carve(s.expert_down, hp.n_embd);
        for (int t = 0; t < 3; ++t) {
            const uint64_t rows = t < 2 || hp.attn_temp_scale != 0 ? b : 0;
            carve(s.rope_cos[t], rows * half);
            carve(s.rope_sin[t], rows * half);
        }
        if (residency.resident) carve(s.logits, uint64_t{std::min(kLogitRows, n_batch)} * hp.vocab);
        return used;
    }

    // A context's activation region, in floats. On the host it also holds
    // the last decode's logits, `logits_rows` rows of them followed by their
    // normalised inputs: once the last layer is done no activation is live,
    // so a 16-sequence decode of a 262K vocabulary needs max(activations,
    // logits) rather than both. A resident context downloads its logits into
    // host memory instead, so its region is the layout alone.
    uint64_t region_floats(uint32_t n_batch, uint32_t logits_rows) const {
        const uint64_t floats = layout(n_batch, nullptr, nullptr);
        if (residency.resident) return floats;
        return std::max(floats, uint64_t{logits_rows} * (hp.vocab + hp.n_embd));
    }

    uint64_t scratch_bytes(uint32_t n_batch, uint32_t n_ctx, uint32_t logits_rows) const {
        return region_floats(n_batch, logits_rows) * sizeof(float) +
               host_scratch_bytes(n_batch, n_ctx);
    }

    // Host memory besides the activation region: angle tables (a resident
    // context computes them here before uploading; a host one in place),
    // router scores, and the fallback attention's scores row.
    uint64_t host_scratch_bytes(uint32_t n_batch, uint32_t n_ctx) const {
        const uint64_t half = hp.head_dim_k / 2;
        const uint64_t tables = !residency.resident ? 0 : hp.attn_temp_scale != 0 ? 3 : 2;
        return (2 * tables * uint64_t{n_batch} * half + (uint64_t{n_batch} + 1) * hp.n_expert +
                (hp.n_expert ? uint64_t{n_batch} * hp.n_embd : 0) + n_ctx) *
               sizeof(float);
    }

    // A capacity plan's KV-cache terms for `cells` cells.
    CapacityInputs kv_terms(uint32_t cells) const {
        CapacityInputs in;
        in.n_layer = hp.n_layer;
        in.context = cells;
        in.n_head_kv = hp.n_head_kv;
        in.head_dim_k = hp.head_dim_k;
        in.head_dim_v = hp.head_dim_v;
        in.kv_element_bytes = static_cast<uint32_t>(kv_element_bytes());
        return in;
    }

    // The resident backend's device memory free now, as a plan's available side.
    Expected<void> device_available(CapacityInputs& in) const {
        const Backend& backend = dispatcher.resident_backend();
        auto info = backend.device_info(0);
        if (!info) return info.error();
        in.available_bytes = info->memory_free;
        in.available_what =
            fmt::format("free memory of the {} backend's {}", backend.name(), info->name);
        return {};
    }

    // `stated` bytes (a test's or a caller's figure, named `stated_what`), or
    // MemAvailable now, as a plan's available side.
    static Expected<void> host_available(CapacityInputs& in, uint64_t stated,
                                         std::string_view stated_what) {
        if (stated) {
            in.available_bytes = stated;
            in.available_what = std::string(stated_what);
        } else if (auto avail = mem_available_bytes()) {
            in.available_bytes = *avail;
        } else {
            return make_error("cannot read MemAvailable from /proc/meminfo for the capacity plan");
        }
        return {};
    }

    // What a context made after loading adds (its KV cache, scratch, cell
    // lists and one logits row per sequence), against the memory free now:
    // the weights are already in place. A server's or the C API's context
    // is larger than the model's own, which the load-time plan covered.
    Expected<void> check_context_fits(uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq,
                                      uint64_t available_bytes) const {
        CapacityInputs in = kv_terms(n_ctx);
        in.subject =
            fmt::format("a context of {} cells for {} sequences (batch {})", n_ctx, n_seq, n_batch);
        const uint64_t logits_rows = std::min(n_seq, n_batch);
        if (residency.resident) {
            CapacityInputs device = in;
            device.scratch_bytes = layout(n_batch, nullptr, nullptr) * sizeof(float) +
                                   logits_rows * n_ctx * sizeof(uint32_t);  // the cell lists
            if (auto r = device_available(device); !r) return r;
            if (auto fits = plan_capacity(device); !fits) return fits.error();
            in.kv_element_bytes = 0;  // no KV cache in host memory
            in.scratch_bytes = host_scratch_bytes(n_batch, n_ctx);
            in.scratch_bytes += logits_rows * hp.vocab * sizeof(float);  // downloaded logits
        } else {
            in.scratch_bytes = scratch_bytes(n_batch, n_ctx, static_cast<uint32_t>(logits_rows));
        }
        if (auto r = host_available(in, available_bytes, "the context's available_bytes"); !r)
            return r;
        if (auto fits = plan_capacity(in); !fits) return fits.error();
        return {};
    }

    uint64_t constant_bytes() const {
        uint64_t floats = w.output_norm.size();
        for (const LayerWeights& L : w.layers)
            for (const auto& [vector, act] : kLayerConstants) floats += (L.*vector).size();
        return floats * sizeof(float);
    }

    Expected<void> allocate_constants() {
        const auto constant = [&](const std::vector<float>& v, Act& out) -> Expected<void> {
            if (v.empty()) return {};
            auto a = steps->constant(v);
            if (!a) return a.error();
            out = *a;
            return {};
        };
        if (auto r = constant(w.output_norm, output_norm); !r) return r;
        consts.resize(hp.n_layer);
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            for (const auto& [vector, act] : kLayerConstants)
                if (auto r = constant(w.layers[il].*vector, consts[il].*act); !r) return r;
        }
        return {};
    }

    // How a position becomes angles, for global and local layers.
    void set_rope() {
        for (int local = 0; local < 2; ++local)
            rope[local] = rope_spec(hp, rope_factors_for(hp, w.rope_factors, context), local != 0);
    }

    // Every matrix the forward pass multiplies by, once each.
    std::vector<const WeightMatrix*> matrices() const {
        std::vector<const WeightMatrix*> all{&*w.output};
        if (embedding_matrix) all.push_back(&*embedding_matrix);
        for (const LayerWeights& L : w.layers) {
            for (const auto* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down, &L.router})
                if (*m) all.push_back(&**m);
            for (const auto* experts : {&L.gate_exps, &L.up_exps, &L.down_exps})
                for (const WeightMatrix& m : *experts) all.push_back(&m);
        }
        return all;
    }

    // Uploads every weight to the resident backend now, so the first token
    // does not pay for it and a weight that does not fit fails the load.
    Expected<void> upload_weights(const std::function<void(uint64_t, uint64_t)>& progress) {
        const auto all = matrices();
        uint64_t total = 0, done = 0;
        for (const WeightMatrix* m : all) total += m->bytes().size();
        const auto& backend = dispatcher.backends().front();
        for (const WeightMatrix* m : all) {
            if (auto h = m->prepared_on(backend); !h) return h.error();
            done += m->bytes().size();
            if (progress) progress(done, total);
        }
        return {};
    }
};

// A batch row's attention unit: consecutive rows of one sequence at
// consecutive positions (the batch sorted by sequence, then position).
struct AttentionRun {
    uint32_t row0 = 0, n = 0, seq = 0;
    int32_t pos0 = 0;
    // The sequence's cells each layer kind may see, ordered by position:
    // [0] every earlier position (global layers), [1] the sliding window's.
    std::vector<uint32_t> cells[2];
};

struct Context::Impl {
    const Model::Impl& model;
    const Hparams& hp;
    const ModelWeights& w;
    Dispatcher& dispatcher;
    const std::vector<LayerConstants>& consts;
    const Act& output_norm;
    const ferrox_kind kv_kind;
    uint32_t context = 0, max_batch = 0, n_seq = 1;
    std::unique_ptr<Steps> steps;
    Scratch s;
    // Per layer: [cell][n_kv * head_dim] of kv_kind.
    std::vector<Act> k_cache, v_cache;
    KvCells cells;
    // Host-side values: RoPE angles before upload, MoE router scores after download.
    std::vector<float> rope_cos[3], rope_sin[3], router_scores, zeros;
    std::vector<uint32_t> expert_order;

    // The decode in progress: the batch sorted by (sequence, position).
    std::vector<uint32_t> order;  // sorted row -> batch index
    std::vector<int32_t> row_tokens, row_pos;
    std::vector<uint32_t> row_cell;  // the cell each row's K/V goes to
    std::vector<AttentionRun> runs;
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
    // The activation region, and its size in floats (Model::Impl::region_floats).
    Act region;
    uint64_t region_size = 0;
    // The last decode's logits (one vocab row per wanted token): in the
    // region on the host when they fit, else in a buffer of their own; and
    // where each batch token's row is (-1: none).
    const float* logits_data = nullptr;
    std::unique_ptr<float[]> logits_buffer;
    uint64_t logits_capacity = 0;
    std::vector<int32_t> logits_row;

    Impl(const Model::Impl& m, uint32_t n_ctx, uint32_t n_batch, uint32_t seqs)
        : model(m),
          hp(m.hp),
          w(m.w),
          dispatcher(m.dispatcher),
          consts(m.consts),
          output_norm(m.output_norm),
          kv_kind(m.kv_kind),
          context(n_ctx),
          max_batch(n_batch),
          n_seq(seqs),
          cells(n_ctx, seqs) {}

    uint64_t q_dim() const { return model.q_dim(); }
    uint64_t k_dim() const { return model.k_dim(); }
    uint64_t v_dim() const { return model.v_dim(); }
    uint64_t o_dim() const { return model.o_dim(); }
    size_t kv_element_bytes() const { return model.kv_element_bytes(); }

    Expected<void> embed(std::span<const int32_t> tokens) {
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int32_t id = tokens[i];
            if (id < 0 || static_cast<uint64_t>(id) >= hp.vocab)
                return make_error("token id {} at batch index {} is outside the vocabulary (0..{})",
                                  id, i, hp.vocab - 1);
        }
        return steps->embed(tokens, hp.embedding_scale, s.x);
    }

    Expected<void> attention_block(uint32_t il, uint32_t n) {
        const LayerWeights& L = w.layers[il];
        const LayerConstants& C = consts[il];
        const uint32_t d = hp.n_embd, hd = hp.head_dim_k;
        Steps& st = *steps;
        // Later layers get xn from the previous FFN's residual add fused with
        // this norm; without pre-norms (olmo2) the block reads x itself.
        if (il == 0 && hp.pre_norms)
            if (auto r = st.rms_norm(roles::kAttnNorm, s.x, C.attn_norm, n, d, hp.rms_eps, s.xn);
                !r)
                return r;
        const Act in = hp.pre_norms ? s.xn : s.x;
        if (auto r = st.project(*L.q, "attn_q", in, n, s.q); !r) return r;
        if (auto r = st.project(*L.k, "attn_k", in, n, s.k); !r) return r;
        if (auto r = st.project(*L.v, "attn_v", in, n, s.v); !r) return r;
        if (hp.qkv_bias) {
            const auto q_dim32 = static_cast<uint32_t>(q_dim());
            const auto k_dim32 = static_cast<uint32_t>(k_dim());
            const auto v_dim32 = static_cast<uint32_t>(v_dim());
            if (auto r = st.add(roles::kQkvBias, s.q, C.q_bias, n, q_dim32, 0, 1.0f); !r) return r;
            if (auto r = st.add(roles::kQkvBias, s.k, C.k_bias, n, k_dim32, 0, 1.0f); !r) return r;
            if (auto r = st.add(roles::kQkvBias, s.v, C.v_bias, n, v_dim32, 0, 1.0f); !r) return r;
        }
        if (hp.qk_norm != QkNorm::None) {
            // Per head: one row per head of head_dim values; whole: one row per position.
            const bool whole = hp.qk_norm == QkNorm::Whole;
            const uint64_t q_rows = whole ? n : uint64_t{n} * hp.n_head;
            const uint64_t k_rows = whole ? n : uint64_t{n} * hp.n_head_kv;
            const auto q_len = static_cast<uint32_t>(whole ? q_dim() : hd);
            const auto k_len = static_cast<uint32_t>(whole ? k_dim() : hd);
            if (auto r = st.rms_norm(roles::kQNorm, s.q, C.q_norm, q_rows, q_len, hp.rms_eps, s.q);
                !r)
                return r;
            if (auto r = st.rms_norm(roles::kKNorm, s.k, C.k_norm, k_rows, k_len, hp.rms_eps, s.k);
                !r)
                return r;
        }
        const bool local = hp.is_local_layer(il);
        const uint32_t n_rot = model.rope[local].n_rot;
        if (hp.has_rope(il)) {
            const int q_table = hp.attn_temp_scale != 0 && !local ? 2 : local;
            if (auto r = st.rope(s.q, s.rope_cos[q_table], s.rope_sin[q_table], n, hp.n_head, hd,
                                 n_rot, hp.rope);
                !r)
                return r;
            if (auto r = st.rope(s.k, s.rope_cos[local], s.rope_sin[local], n, hp.n_head_kv, hd,
                                 n_rot, hp.rope);
                !r)
                return r;
        }
        if (auto r = store_rows(il, n); !r) return r;
        if (steps->attends_over_cells()) {
            if (auto r = attend_cells(il, local, n); !r) return r;
        } else {
            for (const AttentionRun& run : runs)
                if (auto r = attend(il, local, run); !r) return r;
        }
        if (auto r = st.project(*L.o, "attn_output", s.att, n, s.o); !r) return r;
        if (!L.o_bias.empty())  // gpt-oss's every layer, a llama file's some
            if (auto r = st.add(roles::kOutputBias, s.o, C.o_bias, n, d, 0, 1.0f); !r) return r;
        if (hp.post_norms)
            if (auto r =
                    st.rms_norm(roles::kPostAttnNorm, s.o, C.post_attn_norm, n, d, hp.rms_eps, s.o);
                !r)
                return r;
        // The residual add and the FFN's norm: xn = ffn_norm(x += o).
        if (!hp.pre_norms) return st.add(roles::kResidual, s.x, s.o, n, d, d, hp.residual_scale);
        return st.add_rms_norm(roles::kFfnNorm, s.x, s.o, d, hp.residual_scale, C.ffn_norm, n, d,
                               hp.rms_eps, s.xn);
    }

    // Each row's K and V into its cell: one store per run of rows whose
    // cells are adjacent (a whole prefill chunk, usually).
    Expected<void> store_rows(uint32_t il, uint32_t n) {
        const uint64_t element = kv_element_bytes();
        for (uint32_t r0 = 0; r0 < n;) {
            uint32_t r1 = r0 + 1;
            while (r1 < n && row_cell[r1] == row_cell[r1 - 1] + 1) ++r1;
            const uint64_t cell = row_cell[r0], rows = r1 - r0;
            if (auto r = steps->store_kv(s.k.at(r0 * k_dim()),
                                         k_cache[il].at_bytes(cell * k_dim() * element), kv_kind,
                                         rows * k_dim());
                !r)
                return r;
            if (auto r = steps->store_kv(s.v.at(r0 * v_dim()),
                                         v_cache[il].at_bytes(cell * v_dim() * element), kv_kind,
                                         rows * v_dim());
                !r)
                return r;
            r0 = r1;
        }
        return {};
    }

    // One run's attention over its sequence's cells. The K/V rows the
    // attention entry reads are the sequence's cells in position order:
    // the cache itself when those cells are adjacent, else gathered. Either
    // way a sequence's attention reads the same values in the same order
    // whatever else is in the batch, which keeps its logits batch-invariant.
    Expected<void> attend(uint32_t il, bool local, const AttentionRun& run) {
        const std::vector<uint32_t>& list = run.cells[local && hp.sliding_window ? 1 : 0];
        const uint64_t element = kv_element_bytes();
        const uint64_t k_row = k_dim() * element, v_row = v_dim() * element;
        const auto count = static_cast<uint32_t>(list.size());
        const int32_t base = cells.pos(list.front());
        const bool adjacent =
            list.back() - list.front() + 1 == count && std::is_sorted(list.begin(), list.end());
        // No position missing between the first visible one and the run's last.
        const bool dense = cells.pos(list.back()) - base + 1 == static_cast<int32_t>(count);
        Act keys, values;
        if (adjacent) {
            keys = k_cache[il].at_bytes(list.front() * k_row);
            values = v_cache[il].at_bytes(list.front() * v_row);
        } else if (steps->resident()) {
            return make_error(
                "sequence {}: its cells are not adjacent, which a resident context cannot attend "
                "over yet",
                run.seq);
        } else {
            // Grown with the sequence (a vector at least doubles), not to the
            // whole context: sixteen short sequences never pay for one long one.
            if (k_gather.size() < count * k_row) k_gather.resize(count * k_row);
            if (v_gather.size() < count * v_row) v_gather.resize(count * v_row);
            for (uint32_t j = 0; j < count; ++j) {
                std::memcpy(k_gather.data() + j * k_row, k_cache[il].host + list[j] * k_row, k_row);
                std::memcpy(v_gather.data() + j * v_row, v_cache[il].host + list[j] * v_row, v_row);
            }
            keys = Act{k_gather.data()};
            values = Act{v_gather.data()};
        }
        const Act q = s.q.at(uint64_t{run.row0} * q_dim());
        const Act out = s.att.at(uint64_t{run.row0} * o_dim());
        const uint32_t window = local ? hp.sliding_window : 0;
        const Act* sinks = hp.attn_sinks ? &consts[il].sinks : nullptr;
        if (!dense) return attend_with_holes(run, window, list, q, keys, values, out, il);

        ferrox_attention_desc desc{};
        desc.struct_size = sizeof desc;
        desc.abi_version = FERROX_ABI_VERSION;
        desc.n_query = run.n;
        desc.pos0 = static_cast<uint32_t>(run.pos0 - base);
        desc.window = window;  // the last `window` positions, itself included
        desc.n_head = hp.n_head;
        desc.n_head_kv = hp.n_head_kv;
        desc.head_dim_k = hp.head_dim_k;
        desc.head_dim_v = hp.head_dim_v;
        desc.scale = hp.attn_scale;
        desc.kv_kind = kv_kind;
        desc.softcap = hp.attn_softcap;
        return steps->attention(desc, q, keys, values, out, sinks);
    }

    // Every row of the batch in one call (ABI 1.3): each attends over the
    // span of cell_list that decode() cut for it, so sequences never see
    // each other's cells, and a sequence's span is the same list in the same
    // order whatever else the batch holds.
    Expected<void> attend_cells(uint32_t il, bool local, uint32_t n) {
        const int list = local && hp.sliding_window ? 1 : 0;
        ferrox_attention_cells_desc desc{};
        desc.struct_size = sizeof desc;
        desc.abi_version = FERROX_ABI_VERSION;
        desc.n_query = n;
        desc.n_head = hp.n_head;
        desc.n_head_kv = hp.n_head_kv;
        desc.head_dim_k = hp.head_dim_k;
        desc.head_dim_v = hp.head_dim_v;
        desc.scale = hp.attn_scale;
        desc.kv_kind = kv_kind;
        desc.n_cells = context;
        desc.n_index = static_cast<uint32_t>(cell_list.size());
        desc.max_span = max_span[list];
        desc.softcap = hp.attn_softcap;
        return steps->attention_cells(desc, s.q, k_cache[il], v_cache[il], cell_list_dev,
                                      spans_dev[list], s.att,
                                      hp.attn_sinks ? &consts[il].sinks : nullptr);
    }

    // The batch's cell lists and spans for attend_cells: a run's rows share
    // its sequence's list (cells at positions up to the run's last); row i
    // at position p sees the list's cells at positions <= p (global layers)
    // and, with a sliding window w, those above p - w too.
    Expected<void> cut_spans(uint32_t n) {
        cell_list.clear();
        for (int k = 0; k < 2; ++k) {
            spans[k].assign(2 * size_t{n}, 0);
            max_span[k] = 0;
        }
        const auto window = static_cast<int32_t>(hp.sliding_window);
        for (const AttentionRun& run : runs) {
            const auto base = static_cast<uint32_t>(cell_list.size());
            const std::vector<uint32_t>& own = run.cells[0];
            cell_list.insert(cell_list.end(), own.begin(), own.end());
            uint32_t lo = 0, hi = 0;  // into own: first visible (window), one past the last
            for (uint32_t i = 0; i < run.n; ++i) {
                const int32_t pos = run.pos0 + static_cast<int32_t>(i);
                while (hi < own.size() && cells.pos(own[hi]) <= pos) ++hi;
                while (window && lo < hi && cells.pos(own[lo]) <= pos - window) ++lo;
                const uint32_t row = run.row0 + i;
                const uint32_t bounds[2][2] = {{base, base + hi}, {base + lo, base + hi}};
                for (int k = 0; k < 2; ++k) {
                    spans[k][2 * size_t{row}] = bounds[k][0];
                    spans[k][2 * size_t{row} + 1] = bounds[k][1];
                    max_span[k] = std::max(max_span[k], bounds[k][1] - bounds[k][0]);
                }
            }
        }
        if (cell_list.size() > cell_list_capacity)
            return make_error("decode: the batch's cell lists hold {} entries; room for {}",
                              cell_list.size(), cell_list_capacity);
        if (auto r = steps->upload_words(cell_list, cell_list_dev); !r) return r;
        for (int k = 0; k < (hp.sliding_window ? 2 : 1); ++k)
            if (auto r = steps->upload_words(spans[k], spans_dev[k]); !r) return r;
        return {};
    }

    // A sequence with positions removed from its middle (seq_remove): the
    // attention entry wants consecutive positions, so the core's own loop
    // attends each query over the visible rows of the gathered list.
    Expected<void> attend_with_holes(const AttentionRun& run, uint32_t window,
                                     const std::vector<uint32_t>& list, Act q, Act keys, Act values,
                                     Act out, uint32_t il) {
        const uint64_t count = list.size();
        const uint64_t k_n = count * k_dim(), v_n = count * v_dim();
        const auto widen = [&](Act a, uint64_t n, std::vector<float>& wide) -> const float* {
            if (kv_kind == FERROX_KIND_F32) return a.f32();
            wide.resize(n);
            const auto* half = reinterpret_cast<const uint16_t*>(a.host);
            for (uint64_t i = 0; i < n; ++i) wide[i] = quant::fp16_to_fp32(half[i]);
            return wide.data();
        };
        const float* k = widen(keys, k_n, k_wide);
        const float* v = widen(values, v_n, v_wide);
        scores.resize(count);
        const ops::AttentionShape shape{hp.n_head,
                                        hp.n_head_kv,
                                        hp.head_dim_k,
                                        hp.head_dim_v,
                                        hp.attn_scale,
                                        hp.attn_softcap,
                                        hp.attn_sinks ? w.layers[il].sinks.data() : nullptr};
        uint32_t lo = 0, hi = 0;
        for (uint32_t i = 0; i < run.n; ++i) {
            const int32_t pos = run.pos0 + static_cast<int32_t>(i);
            const int32_t first = window ? pos + 1 - static_cast<int32_t>(window) : 0;
            while (lo < count && cells.pos(list[lo]) < first) ++lo;
            while (hi + 1 < count && cells.pos(list[hi + 1]) <= pos) ++hi;
            ops::attend(shape, {q.f32() + i * q_dim(), q_dim()}, k, v, lo, hi, scores,
                        {out.f32() + i * o_dim(), o_dim()});
        }
        return {};
    }

    // Table t's cos and sin for n rows: written in place in the region on the
    // host, in host vectors that upload() then copies when resident.
    std::pair<std::span<float>, std::span<float>> rope_rows(int t, uint32_t n) {
        const size_t used = size_t{n} * (hp.head_dim_k / 2);
        if (s.rope_cos[t].host) return {{s.rope_cos[t].f32(), used}, {s.rope_sin[t].f32(), used}};
        return {{rope_cos[t].data(), used}, {rope_sin[t].data(), used}};
    }

    Expected<void> upload_rope(int t, uint32_t n) {
        if (s.rope_cos[t].host) return {};
        const auto [cos, sin] = rope_rows(t, n);
        if (auto r = steps->upload(cos, s.rope_cos[t]); !r) return r;
        return steps->upload(sin, s.rope_sin[t]);
    }

    // cos/sin per row of this batch, once for global and once for local
    // (sliding-window) layers: every head and layer of a kind shares them.
    Expected<void> rope_tables(uint32_t n) {
        const uint32_t half = hp.head_dim_k / 2;
        for (int local = 0; local < 2; ++local) {
            if (local && hp.sliding_window == 0) break;
            const auto [cos, sin] = rope_rows(local, n);
            rope_table(model.rope[local], {row_pos.data(), n}, half, cos, sin);
            if (auto r = upload_rope(local, n); !r) return r;
        }
        if (hp.attn_temp_scale == 0) return {};
        // q's angles scaled by its position's temperature: rotating by (f cos,
        // f sin) is rotating and then multiplying by f, in one op. The factor
        // is computed as llama.cpp computes it (float position, double log).
        const auto [cos0, sin0] = rope_rows(0, n);
        const auto [cos2, sin2] = rope_rows(2, n);
        for (uint32_t r = 0; r < n; ++r) {
            const float pos = static_cast<float>(row_pos[r]);
            const double steps_past =
                static_cast<double>(std::floor(pos / static_cast<float>(hp.attn_temp_length)));
            const auto f = static_cast<float>(
                std::log(steps_past + 1.0) * static_cast<double>(hp.attn_temp_scale) + 1.0);
            for (uint32_t i = 0; i < half; ++i) {
                cos2[size_t{r} * half + i] = cos0[size_t{r} * half + i] * f;
                sin2[size_t{r} * half + i] = sin0[size_t{r} * half + i] * f;
            }
        }
        return upload_rope(2, n);
    }

    Expected<void> dense_ffn(const LayerWeights& L, uint32_t n) {
        const Act in = hp.pre_norms ? s.xn : s.x;  // x itself without pre-norms (olmo2)
        if (auto r = steps->project(*L.gate, "ffn_gate", in, n, s.gate); !r) return r;
        if (auto r = steps->project(*L.up, "ffn_up", in, n, s.up); !r) return r;
        if (auto r = steps->glu(hp.activation, s.gate, s.up, uint64_t{n} * hp.n_ff); !r) return r;
        return steps->project(*L.down, "ffn_down", s.gate, n, s.ffn);
    }

    // One row's experts and their weights from its router logits, into
    // expert_order's first n_expert_used entries and `weights`: qwen3moe softmaxes all logits and
    // takes the top k, optionally renormalised; gpt-oss takes the top k logits and softmaxes those
    // alone.
    void route(std::span<float> logits, std::span<float> weights) {
        const uint32_t k = hp.n_expert_used;
        std::iota(expert_order.begin(), expert_order.end(), 0u);
        const bool softmax_first = hp.moe_gating == MoeGating::Softmax;
        if (softmax_first) ops::softmax(logits);  // monotonic: the same top k either way
        std::partial_sort(expert_order.begin(), expert_order.begin() + k, expert_order.end(),
                          [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
        for (uint32_t j = 0; j < k; ++j) weights[j] = logits[expert_order[j]];
        if (!softmax_first) {
            ops::softmax(weights.first(k));
            return;
        }
        if (!hp.expert_weights_norm) return;
        float total = 0;
        for (uint32_t j = 0; j < k; ++j) total += weights[j];
        for (uint32_t j = 0; j < k; ++j) weights[j] /= total;
    }

    // The router logits of all n positions in one product and one download
    // (the layer's one host round trip); the router bias, gating and top-k on
    // the host; each chosen expert's FFN output (with its biases, gpt-oss)
    // added into the result with its router weight.
    Expected<void> moe_ffn(const LayerWeights& L, const LayerConstants& C, uint32_t n) {
        const uint32_t d = hp.n_embd, f = hp.n_ff_expert;
        Steps& st = *steps;
        if (auto r = st.upload({zeros.data(), size_t{n} * d}, s.ffn); !r) return r;
        if (auto r = st.project(*L.router, "moe_router", s.xn, n, s.router); !r) return r;
        if (auto r = st.download(s.router, {router_scores.data(), size_t{n} * hp.n_expert}); !r)
            return r;
        std::span<float> weights{router_scores.data() + size_t{n} * hp.n_expert, hp.n_expert};
        for (uint32_t i = 0; i < n; ++i) {
            const Act xi = s.xn.at(uint64_t{i} * d);
            std::span<float> logits{router_scores.data() + size_t{i} * hp.n_expert, hp.n_expert};
            for (size_t e = 0; e < L.router_bias.size(); ++e) logits[e] += L.router_bias[e];
            route(logits, weights);
            for (uint32_t j = 0; j < hp.n_expert_used; ++j) {
                const uint32_t e = expert_order[j];
                // An expert's bias row, when the architecture has them.
                const auto bias = [&](const Act& rows, Act dst, uint32_t len) -> Expected<void> {
                    if (!hp.expert_biases) return {};
                    return st.add(roles::kExpertBias, dst, rows.at(uint64_t{e} * len), 1, len, 0,
                                  1.0f);
                };
                if (auto r = st.project(L.gate_exps[e], "ffn_gate_exps", xi, 1, s.expert_gate); !r)
                    return r;
                if (auto r = bias(C.gate_exps_bias, s.expert_gate, f); !r) return r;
                if (auto r = st.project(L.up_exps[e], "ffn_up_exps", xi, 1, s.expert_up); !r)
                    return r;
                if (auto r = bias(C.up_exps_bias, s.expert_up, f); !r) return r;
                if (auto r = st.glu(hp.activation, s.expert_gate, s.expert_up, f); !r) return r;
                if (auto r = st.project(L.down_exps[e], "ffn_down_exps", s.expert_gate, 1,
                                        s.expert_down);
                    !r)
                    return r;
                if (auto r = bias(C.down_exps_bias, s.expert_down, d); !r) return r;
                if (auto r = st.add(roles::kMoeCombine, s.ffn.at(uint64_t{i} * d), s.expert_down, 1,
                                    d, 0, weights[j]);
                    !r)
                    return r;
            }
        }
        return {};
    }

    Expected<void> ffn_block(uint32_t il, uint32_t n) {
        const LayerWeights& L = w.layers[il];
        const LayerConstants& C = consts[il];
        const uint32_t d = hp.n_embd;
        // xn = ffn_norm(x) already: the attention block's last step.
        auto r = hp.n_expert == 0 ? dense_ffn(L, n) : moe_ffn(L, C, n);
        if (!r) return r;
        if (hp.post_norms)
            if (auto p = steps->rms_norm(roles::kPostFfwNorm, s.ffn, C.post_ffw_norm, n, d,
                                         hp.rms_eps, s.ffn);
                !p)
                return p;
        if (il + 1 == hp.n_layer || !hp.pre_norms)
            return steps->add(roles::kResidual, s.x, s.ffn, n, d, d, hp.residual_scale);
        // The residual add and the next layer's norm: xn = attn_norm(x += ffn).
        return steps->add_rms_norm(roles::kAttnNorm, s.x, s.ffn, d, hp.residual_scale,
                                   consts[il + 1].attn_norm, n, d, hp.rms_eps, s.xn);
    }

    // Logits of `n` normalised rows at `xn` into `out` (n * vocab floats): in
    // place on the host, through a bounded device region when resident.
    Expected<void> output_logits(Act xn, uint32_t n, std::span<float> out) {
        if (!steps->resident())
            return steps->project(*w.output, "output", xn, n,
                                  Act{reinterpret_cast<std::byte*>(out.data())});
        for (uint32_t start = 0; start < n; start += kLogitRows) {
            const uint32_t rows = std::min(kLogitRows, n - start);
            if (auto r = steps->project(*w.output, "output", xn.at(uint64_t{start} * hp.n_embd),
                                        rows, s.logits);
                !r)
                return r;
            if (auto r = steps->download(
                    s.logits, out.subspan(uint64_t{start} * hp.vocab, uint64_t{rows} * hp.vocab));
                !r)
                return r;
        }
        return {};
    }

    // The batch's forward pass, once validate() and the cell assignment have
    // filled the row vectors. `out`: one vocab row per wanted token, in
    // sorted-row order (decode() puts them back into batch order).
    Expected<void> run(std::span<float> out) {
        const auto n = static_cast<uint32_t>(row_tokens.size());
        const uint32_t d = hp.n_embd;
        if (auto r = embed(row_tokens); !r) return r;
        if (auto r = rope_tables(n); !r) return r;
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            if (auto r = attention_block(il, n); !r) return r;
            if (auto r = ffn_block(il, n); !r) return r;
        }
        const auto n_out = static_cast<uint32_t>(out_rows.size());
        if (n_out == 0) return {};
        // Wanted rows normalised into xn, adjacent rows in one call (every row
        // of a prefill, or the last one alone, as a single sequence asks).
        for (uint32_t k0 = 0; k0 < n_out;) {
            uint32_t k1 = k0 + 1;
            while (k1 < n_out && out_rows[k1] == out_rows[k1 - 1] + 1) ++k1;
            if (auto r =
                    steps->rms_norm(roles::kOutputNorm, s.x.at(uint64_t{out_rows[k0]} * d),
                                    output_norm, k1 - k0, d, hp.rms_eps, s.xn.at(uint64_t{k0} * d));
                !r)
                return r;
            k0 = k1;
        }
        Act normed = s.xn;
        if (!steps->resident() && out.data() == region.f32()) {
            // The logits take the region over from its start, across x and
            // xn: the normalised rows move past them first (memmove: the two
            // places may overlap).
            normed = region.at(uint64_t{n_out} * hp.vocab);
            std::memmove(normed.host, s.xn.host, uint64_t{n_out} * d * sizeof(float));
        }
        if (auto r = output_logits(normed, n_out, out); !r) return r;
        if (hp.logit_scale != 1.0f) {  // granite: multiplied by the reciprocal, as llama.cpp
            const float inv = 1.0f / hp.logit_scale;
            for (float& v : out.first(size_t{n_out} * hp.vocab)) v *= inv;
        }
        if (hp.final_softcap != 0.0f) {  // gemma2: x (1 / cap), tanh, x cap, as llama.cpp
            const float inv = 1.0f / hp.final_softcap;
            for (float& v : out.first(size_t{n_out} * hp.vocab))
                v = std::tanh(v * inv) * hp.final_softcap;
        }
        return {};
    }

    Expected<void> allocate() {
        region_size = model.region_floats(max_batch, std::min(n_seq, max_batch));
        auto allocated = steps->allocate(region_size * sizeof(float));
        if (!allocated) return allocated.error();
        region = *allocated;
        model.layout(max_batch, &s, &region);
        const uint64_t half = hp.head_dim_k / 2;
        for (int t = 0; t < 3 && steps->resident(); ++t) {
            const size_t rows = t < 2 || hp.attn_temp_scale != 0 ? max_batch : 0;
            rope_cos[t].assign(rows * half, 0);
            rope_sin[t].assign(rows * half, 0);
        }
        router_scores.assign((size_t{max_batch} + 1) * hp.n_expert, 0);  // + one row of weights
        expert_order.assign(hp.n_expert, 0);
        if (hp.n_expert) zeros.assign(size_t{max_batch} * hp.n_embd, 0);
        k_cache.clear();
        v_cache.clear();
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            auto k = steps->allocate(uint64_t{context} * k_dim() * kv_element_bytes());
            if (!k) return k.error();
            auto v = steps->allocate(uint64_t{context} * v_dim() * kv_element_bytes());
            if (!v) return v.error();
            k_cache.push_back(*k);
            v_cache.push_back(*v);
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
        if (hp.sliding_window == 0) return;
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            if (!hp.is_local_layer(il)) return;
        const auto window = static_cast<int32_t>(hp.sliding_window);
        for (uint32_t seq = 0; seq < n_seq; ++seq) {
            const int32_t max = cells.max_pos(seq);
            if (max >= 0) cells.remove(seq, 0, max + 2 - window);
        }
    }

    DecodeStatus decode(const Batch& b, std::span<float> out, bool own_buffer) {
        if (auto v = validate(b); !v) return v;
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

        row_tokens.resize(n);
        row_pos.resize(n);
        row_cell.resize(n);
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
            uint64_t mask = 0;
            for (int32_t seq : b.seq_ids[i]) mask |= uint64_t{1} << seq;
            cells.occupy(free_cells[r], b.positions[i], mask);
            if (b.logits[i]) {
                out_rows.push_back(r);
                out_slot.push_back(static_cast<uint32_t>(logits_row[i]));
            }
        }
        // Runs: consecutive rows of one attending sequence at consecutive positions.
        runs.clear();
        for (uint32_t r = 0; r < n; ++r) {
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
        const bool over_cells = steps->attends_over_cells();
        for (AttentionRun& run : runs) {
            const int32_t last = run.pos0 + static_cast<int32_t>(run.n) - 1;
            cells.cells_of(run.seq, 0, last, run.cells[0]);
            if (hp.sliding_window && !over_cells) {
                const int32_t first = run.pos0 + 1 - static_cast<int32_t>(hp.sliding_window);
                cells.cells_of(run.seq, std::max(first, 0), last, run.cells[1]);
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
        if (own_buffer && !steps->resident() &&
            uint64_t{n_out} * (hp.vocab + hp.n_embd) <= region_size) {
            dst = {region.f32(), uint64_t{n_out} * hp.vocab};
        } else if (own_buffer) {
            const uint64_t floats = uint64_t{n_out} * hp.vocab;
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
        permute_to_batch_order(dst);
        logits_data = own_buffer ? dst.data() : nullptr;
        return {};
    }

    // Rows were computed in sorted order; out_slot[k] is where row k belongs.
    // Cycles of swaps through one spare row put them in place.
    void permute_to_batch_order(std::span<float> dst) {
        const size_t n_out = out_slot.size();
        std::vector<uint32_t> slot = out_slot;
        std::vector<float> spare;
        for (size_t k = 0; k < n_out; ++k) {
            while (slot[k] != k) {
                const uint32_t to = slot[k];
                if (spare.empty()) spare.resize(hp.vocab);
                float* a = dst.data() + k * hp.vocab;
                float* c = dst.data() + uint64_t{to} * hp.vocab;
                std::memcpy(spare.data(), c, hp.vocab * sizeof(float));
                std::memcpy(c, a, hp.vocab * sizeof(float));
                std::memcpy(a, spare.data(), hp.vocab * sizeof(float));
                std::swap(slot[k], slot[to]);
            }
        }
    }
};

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

Expected<std::unique_ptr<Model>> Model::load(const gguf::File& file, Dispatcher& dispatcher,
                                             KernelRegistry& registry,
                                             const ModelOptions& options) {
    auto impl = std::make_unique<Impl>(file, dispatcher);
    Impl& m = *impl;
    auto hp = read_hparams(file);
    if (!hp) return hp.error();
    m.hp = std::move(*hp);
    m.context = options.context ? options.context : default_context(m.hp.n_ctx_train, 1);
    m.max_batch = derived_batch(options.max_batch, m.context);
    if (options.kv_kind != FERROX_KIND_F32 && options.kv_kind != FERROX_KIND_F16)
        return make_error("KV cache kind {} is not supported (F32 or F16)",
                          kind_name(options.kv_kind));
    m.kv_kind = options.kv_kind;
    m.options_profile = options.profile;

    auto weights = bind_weights(file, m.hp);
    if (!weights) return weights.error();
    m.w = std::move(*weights);
    m.set_rope();
    auto residency = probe_model(file, m.hp, dispatcher, m.kv_kind, options.allow_resident,
                                 options.max_sequences);
    if (!residency) return residency.error();
    m.residency = std::move(*residency);
    if (m.residency.resident) {
        if (auto r = m.bind_embedding_matrix(); !r) return r.error();
        logger().info(
            "resident decoding on the {} backend: weights, KV cache and activations in its "
            "memory",
            dispatcher.backends().front()->name());
    } else if (options.max_sequences > 1 && options.allow_resident &&
               dispatcher.resident_capable() &&
               !dispatcher.resident_backend().has_attention_cells()) {
        // The one refusal a user can act on by updating a plugin: say it louder.
        logger().info("activations in host memory: {}", m.residency.reason);
    } else {
        logger().debug("activations in host memory: {}", m.residency.reason);
    }

    CapacityInputs in = m.kv_terms(m.context);
    if (m.residency.resident) {
        // The device holds the weights, the KV cache and the activations.
        CapacityInputs device = in;
        for (const WeightMatrix* w : m.matrices()) device.weight_bytes += w->bytes().size();
        device.scratch_bytes =
            m.layout(m.max_batch, nullptr, nullptr) * sizeof(float) + m.constant_bytes();
        if (auto r = m.device_available(device); !r) return r.error();
        auto device_plan = plan_capacity(device);
        if (!device_plan)
            return make_error("{}: {}", file.path().string(), device_plan.error().message());
        m.device_plan = *device_plan;
        in.kv_element_bytes = 0;  // no KV cache in host memory
        in.scratch_bytes = m.host_scratch_bytes(m.max_batch, m.context);
    } else {
        // forward()'s own context writes its logits into the caller's span.
        in.scratch_bytes = m.scratch_bytes(m.max_batch, m.context, 0);
    }
    in.weight_bytes = file.mapped_bytes();  // every shard of a split model
    if (auto r = Impl::host_available(in, options.available_bytes, "MemAvailable"); !r)
        return r.error();
    auto plan = plan_capacity(in);
    if (!plan) return make_error("{}: {}", file.path().string(), plan.error().message());
    m.plan = *plan;

    if (auto r = enforce_registry(registry.seal(), options.registry_strict); !r) return r.error();

    m.steps = m.make_steps(m.context);
    if (m.residency.resident)
        if (auto r = m.upload_weights(options.on_upload); !r) return r.error();
    if (auto r = m.allocate_constants(); !r) return r.error();
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

Expected<void> Model::forward(std::span<const int32_t> tokens, uint32_t pos,
                              std::span<float> logits) {
    const Impl& m = *impl_;
    // Made on first use: a model whose callers make their own contexts (the
    // C API, batched-bench) must not also hold a whole-context KV cache.
    if (!default_context_) {
        ContextOptions single;
        single.n_ctx = m.context;
        single.n_batch = m.max_batch;
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

// ---- The pass traced ---------------------------------------------------------

Expected<PassTrace> trace_pass(const gguf::File& file, const Hparams& hp, Dispatcher& dispatcher,
                               ferrox_kind kv_kind) {
    Model::Impl m(file, dispatcher);
    m.hp = hp;
    auto weights = bind_weights(file, hp);
    if (!weights) return weights.error();
    m.w = std::move(*weights);
    m.kv_kind = kv_kind;
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
    Batch batch;
    batch.add(0, 0, {0}, true);
    if (auto r = c.decode(batch, {}, true); !r)
        return make_error("{}: tracing the forward pass: {}", file.path().string(), r.message);
    batch.clear();
    batch.add(0, 1, {0}, true);
    batch.add(0, 2, {0}, true);
    if (auto r = c.decode(batch, {}, true); !r)
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
    const uint32_t n_ctx = options.n_ctx ? options.n_ctx : m.context;
    const uint32_t n_batch = options.n_batch ? options.n_batch : m.max_batch;
    if (options.n_seq == 0 || options.n_seq > KvCells::kMaxSeq)
        return make_error("context: n_seq {} is outside 1..{}", options.n_seq, KvCells::kMaxSeq);
    if (n_batch > n_ctx)
        return make_error("context: n_batch {} exceeds n_ctx {} (a batch's tokens need cells)",
                          n_batch, n_ctx);
    if (m.residency.resident && options.n_seq > 1 &&
        !m.dispatcher.resident_backend().has_attention_cells()) {
        const Backend& b = m.dispatcher.resident_backend();
        return make_error(
            "context: {} sequences on the resident {} backend: its plugin is ABI {}, whose "
            "resident attention reads one sequence's cells in place; several sequences need "
            "ABI 1.3's attention_cells (update the plugin, or load the model with --resident "
            "off)",
            options.n_seq, b.name(), b.abi_version_text());
    }
    if (auto fits = m.check_context_fits(n_ctx, n_batch, options.n_seq, options.available_bytes);
        !fits)
        return make_error("context: {}", fits.error().message());
    auto impl = std::make_unique<Impl>(m, n_ctx, n_batch, options.n_seq);
    impl->steps = m.make_steps(n_ctx);
    if (options.profile)
        impl->steps = make_profiling_steps(std::move(impl->steps), *options.profile);
    if (auto r = impl->allocate(); !r) return r.error();
    return std::unique_ptr<Context>(new Context(std::move(impl)));
}

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;
uint32_t Context::n_ctx() const { return impl_->context; }
uint32_t Context::n_seq() const { return impl_->n_seq; }
uint32_t Context::n_batch() const { return impl_->max_batch; }
const KvCells& Context::cells() const { return impl_->cells; }

DecodeStatus Context::decode(const Batch& batch) { return impl_->decode(batch, {}, true); }

DecodeStatus Context::decode_into(const Batch& batch, std::span<float> out) {
    return impl_->decode(batch, out, false);
}

std::span<const float> Context::logits(uint32_t index) const {
    const Impl& c = *impl_;
    if (index >= c.logits_row.size() || c.logits_row[index] < 0 || !c.logits_data) return {};
    return {c.logits_data + uint64_t(c.logits_row[index]) * c.hp.vocab, c.hp.vocab};
}

namespace {
Expected<void> check_seq(int32_t seq, uint32_t n_seq, bool allow_all) {
    if ((seq < 0 && !allow_all) || seq >= static_cast<int32_t>(n_seq))
        return make_error("sequence id {} is outside 0..{} (n_seq {})", seq, n_seq - 1, n_seq);
    return {};
}
}  // namespace

Expected<void> Context::seq_remove(int32_t seq, int32_t p0, int32_t p1) {
    if (auto r = check_seq(seq, impl_->n_seq, true); !r) return r;
    if (seq < 0)
        impl_->cells.remove_all(p0, p1);
    else
        impl_->cells.remove(static_cast<uint32_t>(seq), p0, p1);
    return {};
}

Expected<void> Context::seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    if (auto r = check_seq(src, impl_->n_seq, false); !r) return r;
    if (auto r = check_seq(dst, impl_->n_seq, false); !r) return r;
    impl_->cells.copy(static_cast<uint32_t>(src), static_cast<uint32_t>(dst), p0, p1);
    return {};
}

Expected<void> Context::seq_keep(int32_t seq) {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r;
    impl_->cells.keep(static_cast<uint32_t>(seq));
    return {};
}

void Context::clear() { impl_->cells.clear(); }

namespace {
// Saved sequence state: a header, the positions, then each layer's K rows
// and V rows in position order.
struct StateHeader {
    char magic[4];  // "FXSQ"
    uint32_t version;
    uint32_t n_layer, kv_kind;
    uint64_t k_row, v_row;  // bytes per cell row
    uint32_t n_cells, reserved;
};
constexpr uint32_t kStateVersion = 1;
}  // namespace

Expected<std::vector<std::byte>> Context::seq_save(int32_t seq) const {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r.error();
    const Impl& c = *impl_;
    if (c.steps->resident())
        return make_error("seq_save: the cache of a resident context lives on the device");
    std::vector<uint32_t> list;
    c.cells.cells_of(static_cast<uint32_t>(seq), 0, std::numeric_limits<int32_t>::max(), list);
    StateHeader h{};
    std::memcpy(h.magic, "FXSQ", 4);
    h.version = kStateVersion;
    h.n_layer = c.hp.n_layer;
    h.kv_kind = static_cast<uint32_t>(c.kv_kind);
    h.k_row = c.k_dim() * c.kv_element_bytes();
    h.v_row = c.v_dim() * c.kv_element_bytes();
    h.n_cells = static_cast<uint32_t>(list.size());
    const uint64_t size = sizeof h + list.size() * sizeof(int32_t) +
                          uint64_t{h.n_layer} * list.size() * (h.k_row + h.v_row);
    std::vector<std::byte> out(size);
    std::byte* p = out.data();
    std::memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (uint32_t cell : list) {
        const int32_t pos = c.cells.pos(cell);
        std::memcpy(p, &pos, sizeof pos);
        p += sizeof pos;
    }
    for (uint32_t il = 0; il < h.n_layer; ++il) {
        for (uint32_t cell : list) {
            std::memcpy(p, c.k_cache[il].host + cell * h.k_row, h.k_row);
            p += h.k_row;
        }
        for (uint32_t cell : list) {
            std::memcpy(p, c.v_cache[il].host + cell * h.v_row, h.v_row);
            p += h.v_row;
        }
    }
    return out;
}

Expected<void> Context::seq_restore(int32_t seq, std::span<const std::byte> bytes) {
    if (auto r = check_seq(seq, impl_->n_seq, false); !r) return r;
    Impl& c = *impl_;
    if (c.steps->resident())
        return make_error("seq_restore: the cache of a resident context lives on the device");
    StateHeader h{};
    if (bytes.size() < sizeof h)
        return make_error("seq_restore: {} bytes is shorter than the {}-byte header", bytes.size(),
                          sizeof h);
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, "FXSQ", 4) != 0 || h.version != kStateVersion)
        return make_error("seq_restore: not a ferrox sequence state (version {})", kStateVersion);
    const uint64_t k_row = c.k_dim() * c.kv_element_bytes();
    const uint64_t v_row = c.v_dim() * c.kv_element_bytes();
    if (h.n_layer != c.hp.n_layer || h.kv_kind != static_cast<uint32_t>(c.kv_kind) ||
        h.k_row != k_row || h.v_row != v_row)
        return make_error(
            "seq_restore: the state is for {} layers, KV kind {}, rows of {}/{} bytes; this "
            "context has {} layers, {}, {}/{}",
            h.n_layer, h.kv_kind, h.k_row, h.v_row, c.hp.n_layer, kind_name(c.kv_kind), k_row,
            v_row);
    // Every size the buffer controls is checked against the buffer before use.
    const uint64_t need = sizeof h + uint64_t{h.n_cells} * sizeof(int32_t) +
                          uint64_t{h.n_layer} * h.n_cells * (k_row + v_row);
    if (h.n_cells > c.cells.size() || bytes.size() != need)
        return make_error(
            "seq_restore: {} cells need {} bytes; the buffer holds {} (context of {})", h.n_cells,
            need, bytes.size(), c.cells.size());
    std::vector<int32_t> positions(h.n_cells);
    std::memcpy(positions.data(), bytes.data() + sizeof h, h.n_cells * sizeof(int32_t));
    for (uint32_t i = 0; i < h.n_cells; ++i)
        if (positions[i] < 0 || (i && positions[i] <= positions[i - 1]))
            return make_error("seq_restore: position {} at index {} is not after the previous one",
                              positions[i], i);
    // The sequence's own cells are given up first; count them as free.
    std::vector<uint32_t> own;
    c.cells.cells_of(static_cast<uint32_t>(seq), 0, std::numeric_limits<int32_t>::max(), own);
    uint32_t reclaim = 0;
    for (uint32_t cell : own) reclaim += c.cells.seqs(cell) == (uint64_t{1} << seq) ? 1 : 0;
    if (h.n_cells > c.cells.free() + reclaim)
        return make_error("seq_restore: {} cells needed, {} free", h.n_cells,
                          c.cells.free() + reclaim);
    c.cells.remove(static_cast<uint32_t>(seq), 0, -1);
    const auto cells = c.cells.find_free(h.n_cells);
    const std::byte* p = bytes.data() + sizeof h + h.n_cells * sizeof(int32_t);
    for (uint32_t il = 0; il < h.n_layer; ++il) {
        for (uint32_t cell : cells) {
            std::memcpy(c.k_cache[il].host + cell * k_row, p, k_row);
            p += k_row;
        }
        for (uint32_t cell : cells) {
            std::memcpy(c.v_cache[il].host + cell * v_row, p, v_row);
            p += v_row;
        }
    }
    for (uint32_t i = 0; i < h.n_cells; ++i)
        c.cells.occupy(cells[i], positions[i], uint64_t{1} << seq);
    return {};
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
