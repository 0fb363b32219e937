#include "load.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <iterator>

#include "ferrox/log.h"
#include "ferrox/model/defaults.h"
#include "ferrox/model/resident_ops.h"
#include "ferrox/quant_kind.h"
#include "residency.h"
#include "seq_states.h"

namespace ferrox::model {

uint64_t next_model_instance() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// Host memory besides the activation region: angle tables (a resident
// context computes them here before uploading; a host one in place),
// router scores, and the fallback attention's scores row.
uint64_t host_scratch_bytes(const Model::Impl& m, uint32_t n_batch, uint32_t n_ctx) {
    const Hparams& hp = m.hp;
    const uint64_t half = rope_half_max(hp);
    const uint64_t tables = !m.residency.resident ? 0 : hp.attn_temp_scale != 0 ? 3 : 2;
    const uint64_t ple = uint64_t{hp.n_embd_per_layer} * hp.n_layer;  // gemma4 E2B/E4B
    // Per cell: a float of the attention scores' row, and the cell's position and
    // sequence mask (KvCells), which an attention-free model (mamba2) keeps too.
    return (2 * tables * uint64_t{n_batch} * half + (uint64_t{n_batch} + 2) * hp.n_expert +
            (hp.n_expert ? uint64_t{n_batch} * hp.n_embd : 0) + n_ctx +
            (uint64_t{n_batch} + 1) * ple) *
               sizeof(float) +
           uint64_t{n_ctx} * (sizeof(int32_t) + sizeof(uint64_t));
}

uint64_t constant_bytes(const Model::Impl& m) {
    uint64_t floats = m.w.output_norm.size();
    for (const LayerWeights& L : m.w.layers)
        for (const auto& [vector, act] : kLayerConstants) floats += (L.*vector).size();
    return floats * sizeof(float);
}

// The resident backend's device memory free now, as a plan's available side.
Expected<void> device_available(const Dispatcher& dispatcher, CapacityInputs& in) {
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
Expected<void> host_available(CapacityInputs& in, uint64_t stated, std::string_view stated_what) {
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

// Uploads every weight to the resident backend now, so the first token
// does not pay for it and a weight that does not fit fails the load.
Expected<void> upload_weights(const Model::Impl& m,
                              const std::function<void(uint64_t, uint64_t)>& progress) {
    const auto all = m.matrices();
    uint64_t total = 0, done = 0;
    for (const WeightMatrix* w : all) total += w->bytes().size();
    const auto& backend = m.dispatcher.backends().front();
    for (const WeightMatrix* w : all) {
        if (auto h = w->prepared_on(backend); !h) return h.error();
        done += w->bytes().size();
        if (progress) progress(done, total);
    }
    return {};
}

// Where the forward pass lives, said at the level a user can act on.
void log_residency(const Model::Impl& m, const ModelOptions& options) {
    if (m.residency.resident) {
        logger().info(
            "resident decoding on the {} backend: weights, KV cache and activations in its "
            "memory",
            m.dispatcher.backends().front()->name());
    } else if (options.sequences > 1 && options.allow_resident && m.dispatcher.resident_capable() &&
               !m.dispatcher.resident_backend().has_attention_cells()) {
        // The one refusal a user can act on by updating a plugin: say it louder.
        logger().info("activations in host memory: {}", m.residency.reason);
    } else {
        logger().debug("activations in host memory: {}", m.residency.reason);
    }
}

}  // namespace

uint64_t Model::Impl::kv_row_bytes(ferrox_kind kind, uint64_t elements) {
    const KindTraits* k = kind_traits(kind);
    return elements / k->block_elements * k->block_bytes;
}

Expected<void> Model::Impl::bind_embedding_matrix() {
    if (file.find_tensor("output.weight") == nullptr) return {};
    auto embd = bind_matrix(file, "token_embd.weight", hp.vocab, hp.n_embd);
    if (!embd) return embd.error();
    embedding_matrix = std::move(*embd);
    return {};
}

const WeightMatrix& Model::Impl::embedding() const {
    return embedding_matrix ? *embedding_matrix : *w.output;
}

std::unique_ptr<Steps> Model::Impl::make_steps(uint32_t n_ctx) const {
    if (residency.resident) return make_resident_steps(dispatcher, embedding());
    return make_host_steps(dispatcher, *w.token_embd, hp.n_embd, n_ctx);
}

// A context's activation region, in floats. On the host it also holds
// the last decode's logits, `logits_rows` rows of them followed by their
// normalised inputs: once the last layer is done no activation is live,
// so a 16-sequence decode of a 262K vocabulary needs max(activations,
// logits) rather than both. A resident context downloads its logits into
// host memory instead, so its region is the layout alone.
uint64_t Model::Impl::region_floats(uint32_t n_batch, uint32_t logits_rows) const {
    const uint64_t floats = activation_layout(hp, residency.resident, n_batch, nullptr, nullptr);
    if (residency.resident) return floats;
    return std::max(floats, uint64_t{logits_rows} * (hp.vocab + hp.n_embd));
}

CapacityInputs Model::Impl::kv_terms(uint32_t cells) const {
    return kv_capacity_inputs(hp, kv_kinds, cells);
}

Expected<void> Model::Impl::allocate_constants() {
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

void Model::Impl::set_rope() {
    for (int local = 0; local < 2; ++local)
        rope[local] = rope_spec(hp, rope_factors_for(hp, w.rope_factors, context), local != 0);
}

std::vector<const WeightMatrix*> Model::Impl::matrices() const {
    std::vector<const WeightMatrix*> all{&*w.output};
    if (embedding_matrix) all.push_back(&*embedding_matrix);
    for (const LayerWeights& L : w.layers) {
        for (const auto* m :
             {&L.q,         &L.k,       &L.v,           &L.o,           &L.gate,        &L.up,
              &L.down,      &L.router,  &L.gate_shexp,  &L.up_shexp,    &L.down_shexp,  &L.q_a,
              &L.q_b,       &L.kv_a,    &L.kv_b,        &L.ssm_in,      &L.ssm_gate,    &L.ssm_beta,
              &L.ssm_alpha, &L.ssm_out, &L.shortconv_b, &L.shortconv_c, &L.shortconv_x, &L.ssm_dt})
            if (*m) all.push_back(&**m);
        for (const auto* experts : {&L.gate_exps, &L.up_exps, &L.down_exps, &L.k_b, &L.v_b})
            for (const WeightMatrix& m : *experts) all.push_back(&m);
    }
    return all;
}

// Host side: the weights (every shard of a split model, with `weights`),
// the KV cache unless the device holds it, and scratch; device side
// (resident): the weights and constants (with `weights`), the KV cache,
// the activation region and the cell lists of the logits rows' sequences.
Expected<MemoryPlans> plan_memory(const Model::Impl& m, const MemoryDemand& demand) {
    MemoryPlans plans;
    CapacityInputs in = m.kv_terms(demand.cells);
    in.subject = demand.subject;
    const uint64_t rows = demand.logits_rows;
    if (m.residency.resident) {
        CapacityInputs device = in;
        device.scratch_bytes =
            activation_layout(m.hp, true, demand.n_batch, nullptr, nullptr) * sizeof(float) +
            rows * demand.cells * sizeof(uint32_t);  // the cell lists
        if (demand.weights) {
            for (const WeightMatrix* w : m.matrices()) device.weight_bytes += w->bytes().size();
            device.scratch_bytes += constant_bytes(m);
        }
        if (auto r = device_available(m.dispatcher, device); !r) return r.error();
        auto device_plan = plan_capacity(device);
        if (!device_plan) return device_plan.error();
        plans.device = *device_plan;
        in.k_block_bytes = in.v_block_bytes = 0;  // no KV cache in host memory
        in.scratch_bytes = host_scratch_bytes(m, demand.n_batch, demand.cells) +
                           rows * m.hp.vocab * sizeof(float);  // downloaded logits
    } else {
        in.scratch_bytes =
            m.region_floats(demand.n_batch, static_cast<uint32_t>(rows)) * sizeof(float) +
            host_scratch_bytes(m, demand.n_batch, demand.cells);
    }
    if (demand.weights) in.weight_bytes = m.file.mapped_bytes();
    in.state_bytes = SeqStates::bytes(m.hp, demand.sequences);  // on the host either way
    if (auto r = host_available(in, demand.available_bytes, demand.available_what); !r)
        return r.error();
    auto host_plan = plan_capacity(in);
    if (!host_plan) return host_plan.error();
    plans.host = *host_plan;
    return plans;
}

Expected<void> check_kv_cache_kind(ferrox_kind kind) {
    if (std::find(std::begin(kKvCacheKinds), std::end(kKvCacheKinds), kind) !=
        std::end(kKvCacheKinds))
        return {};
    std::vector<std::string_view> allowed;
    for (ferrox_kind k : kKvCacheKinds) allowed.push_back(kind_name(k));
    return make_error("KV cache kind {} is not supported ({})", kind_name(kind),
                      fmt::join(allowed, ", "));
}

Expected<void> check_kv_cache_shape(KvKinds kinds, const Hparams& hp) {
    // Each cache (keys, values) against each geometry it stores: the sliding
    // layers' (their _swa keys) and the others'.
    for (const auto& [kind, cache, key, flag, swa_dim, dim] :
         {std::tuple{kinds.key, "K", "key_length", "-ctk", hp.head_dim_k_swa, hp.head_dim_k},
          std::tuple{kinds.value, "V", "value_length", "-ctv", hp.head_dim_v_swa, hp.head_dim_v}}) {
        const KindTraits* k = kind_traits(kind);
        if (!k || k->block_elements == 1) continue;
        for (const auto& [head, suffix] : {std::pair{swa_dim, "_swa"}, std::pair{dim, ""}})
            if (head % k->block_elements != 0)
                return make_error(
                    "a {} {} cache stores each head as blocks of {} elements, but this model's "
                    "{}.attention.{}{} is {}; use {} f16 or f32",
                    k->name, cache, k->block_elements, hp.arch_name, key, suffix, head, flag);
    }
    return {};
}

Expected<std::unique_ptr<Model>> Model::load(const gguf::File& file, Dispatcher& dispatcher,
                                             KernelRegistry& registry,
                                             const ModelOptions& options) {
    auto impl = std::make_unique<Impl>(file, dispatcher);
    Impl& m = *impl;
    auto hp = read_hparams(file);
    if (!hp) return hp.error();
    m.hp = std::move(*hp);
    m.context = options.context ? options.context : default_context(m.hp.n_ctx_train, 1);
    m.max_batch = derived_batch(options.batch, m.context);
    // A non-causal model decodes each input whole, in one batch: by default
    // a batch as long as the trained context (within the context's cells).
    if (!m.hp.causal && options.batch == 0)
        m.max_batch = std::min(m.context, std::max(m.max_batch, m.hp.n_ctx_train));
    for (ferrox_kind kind : {options.kv_kinds.key, options.kv_kinds.value})
        if (auto r = check_kv_cache_kind(kind); !r) return r.error();
    if (auto shape = check_kv_cache_shape(options.kv_kinds, m.hp); !shape) return shape.error();
    m.kv_kinds = options.kv_kinds;
    m.options_profile = options.profile;

    auto weights = bind_weights(file, m.hp);
    if (!weights) return weights.error();
    m.w = std::move(*weights);
    m.set_rope();
    auto residency =
        probe_model(file, m.hp, dispatcher, m.kv_kinds, options.allow_resident, options.sequences);
    if (!residency) return residency.error();
    m.residency = std::move(*residency);
    if (m.residency.resident)
        if (auto r = m.bind_embedding_matrix(); !r) return r.error();
    log_residency(m, options);

    // The weights and forward()'s own context, which writes its logits into
    // the caller's span (no logits rows of its own).
    MemoryDemand demand;
    demand.cells = m.context;
    demand.n_batch = m.max_batch;
    demand.weights = true;
    demand.available_bytes = options.available_bytes;
    demand.available_what = "MemAvailable";
    auto plans = plan_memory(m, demand);
    if (!plans) return make_error("{}: {}", file.path().string(), plans.error().message());
    m.plan = plans->host;
    m.device_plan = plans->device;

    if (auto r = enforce_registry(registry.seal(), options.registry_strict); !r) return r.error();

    m.steps = m.make_steps(m.context);
    if (m.residency.resident)
        if (auto r = upload_weights(m, options.on_upload); !r) return r.error();
    if (auto r = m.allocate_constants(); !r) return r.error();
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

}  // namespace ferrox::model
