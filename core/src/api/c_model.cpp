// ferrox.h's model entries: loading (the params in the engine's terms),
// the model's facts, and the registry's record of the kernels that ran.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "c_handles.h"
#include "ferrox/config.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/model.h"
#include "ferrox/op.h"
#include "ferrox/plugin_loader.h"
#include "ferrox/quant_kind.h"
#include "ferrox/tokenizer/tokenizer.h"

// This file defines the exported ferrox_X_params_default function (the frozen
// one older programs call); ferrox.h's macro of that name is for callers.
#undef ferrox_model_params_default

using namespace ferrox;
using namespace ferrox::c_api;

namespace {

// What the exported ferrox_X_params_default functions write, frozen: each
// struct's size in the API version that introduced that function, which is
// what a program built against that version's header declared (docs/api.md,
// "Struct sizes"). A member appended later begins where the struct then
// ended (each is pointer-aligned or follows a tail of 4-byte members).
constexpr size_t kModelParamsSize_0_1 = offsetof(ferrox_model_params, max_sequences);

ferrox_model_params model_defaults() {
    ferrox_model_params p{};
    p.struct_size = sizeof p;
    p.kv_kind = FERROX_KV_F32;
    p.kv_value_kind = FERROX_KV_SAME;
    p.allow_resident = 1;
    return p;
}

// ferrox_model_params in the engine's terms (docs/api.md: n_ctx_max is
// `context`, n_batch_max `batch`, max_sequences `sequences`); the strings
// are copied, a NULL among them refused.
// A ferrox_kv_kind as the engine's kind; `member` names it in the error.
Expected<ferrox_kind> kv_kind_of(ferrox_kv_kind kind, std::string_view member) {
    switch (kind) {
        case FERROX_KV_F32:
            return FERROX_KIND_F32;
        case FERROX_KV_F16:
            return FERROX_KIND_F16;
        case FERROX_KV_Q8_0:
            return FERROX_KIND_Q8_0;
        case FERROX_KV_Q4_0:
            return FERROX_KIND_Q4_0;
        default:
            return make_error("{} {} is none of F32, F16, Q8_0, Q4_0", member, int(kind));
    }
}

Expected<EngineOptions> engine_options(const ferrox_model_params& p) {
    auto key_kind = kv_kind_of(p.kv_kind, "kv_kind");
    if (!key_kind) return key_kind.error();
    auto value_kind =
        p.kv_value_kind == FERROX_KV_SAME ? key_kind : kv_kind_of(p.kv_value_kind, "kv_value_kind");
    if (!value_kind) return value_kind.error();
    if (p.n_backends && !p.backends) return make_error("n_backends > 0 with backends NULL");
    if (p.n_plugin_dirs && !p.plugin_dirs)
        return make_error("n_plugin_dirs > 0 with plugin_dirs NULL");
    EngineOptions o;
    for (uint32_t i = 0; i < p.n_backends; ++i) {
        if (!p.backends[i]) return make_error("backends[{}] is NULL", i);
        o.backend_order.emplace_back(p.backends[i]);
    }
    for (uint32_t i = 0; i < p.n_plugin_dirs; ++i) {
        if (!p.plugin_dirs[i]) return make_error("plugin_dirs[{}] is NULL", i);
        o.plugin_dirs.emplace_back(p.plugin_dirs[i]);
    }
    o.threads = p.threads;
    o.context = p.n_ctx_max;
    o.batch = p.n_batch_max;
    o.sequences = p.max_sequences ? p.max_sequences : 1;
    o.kv_kinds = {*key_kind, *value_kind};
    o.allow_resident = p.allow_resident != 0;
    o.embeddings = p.embeddings != 0;
    if (p.progress)
        o.progress = [fn = p.progress, user = p.progress_user](float fraction) {
            return fn(fraction, user) != 0;
        };
    return o;
}

ConfigSearch config_search(const ferrox_model_params& p) {
    ConfigSearch search;
    if (p.config_path) search.explicit_path = p.config_path;
    return search;
}

ferrox_code code_of(OpenFailure why) {
    switch (why) {
        case OpenFailure::Io:
            return FERROX_CODE_IO;
        case OpenFailure::BadModel:
            return FERROX_CODE_INVALID_ARGUMENT;
        case OpenFailure::Cancelled:
            return FERROX_CODE_CANCELLED;
        case OpenFailure::None:
        case OpenFailure::Backend:
            break;
    }
    return FERROX_CODE_BACKEND;
}

// The handle over an opened engine, with the strings its getters lend out.
std::unique_ptr<ferrox_model> model_handle(std::unique_ptr<Engine> engine) {
    auto m = std::make_unique<ferrox_model>();
    m->capacity_summary = engine->model().capacity().summary();
    if (engine->model().residency().resident)
        m->resident_backend = engine->dispatcher().resident_backend().name();
    if (const auto* v = engine->file().find("tokenizer.chat_template"))
        if (const auto* s = std::get_if<std::string>(v)) {
            m->chat_template = *s;
            m->has_template = true;
        }
    m->engine = std::move(engine);
    return m;
}

// The registry's dispatch records: what actually ran for this model.
std::vector<RegistryEntry> dispatch_records(const ferrox_model& m, uint64_t& calls,
                                            uint64_t& fallback_calls) {
    std::vector<RegistryEntry> out;
    calls = fallback_calls = 0;
    for (RegistryEntry& e : m.engine->registry().seal().entries) {
        if (e.phase != Phase::Dispatch) continue;
        calls += e.count;
        if (e.outcome == Outcome::Miss) fallback_calls += e.count;
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace

extern "C" {

void ferrox_model_params_init(ferrox_model_params* p, size_t size) {
    write_defaults(p, size, model_defaults());
}

void ferrox_model_params_default(ferrox_model_params* p) {
    write_defaults(p, kModelParamsSize_0_1, model_defaults());
}

ferrox_code ferrox_model_load(const char* path, const ferrox_model_params* given,
                              ferrox_model** out, ferrox_call_status* status) {
    if (!path || !out) return invalid(status, "ferrox_model_load: path or out is NULL");
    *out = nullptr;
    ferrox_model_params p;
    ferrox_model_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_model_params")) return FERROX_CODE_INVALID_ARGUMENT;
    auto options = engine_options(p);
    if (!options) return invalid(status, options.error().message());
    return guarded(status, [&]() -> ferrox_code {
        auto config = load_config(config_search(p));
        if (!config) return report(status, FERROX_CODE_IO, config.error().message());
        options->config = std::move(*config);
        OpenFailure why = OpenFailure::None;
        auto engine = Engine::open(path, std::move(*options), &why);
        if (!engine) return report(status, code_of(why), engine.error().message());
        *out = model_handle(std::move(*engine)).release();
        return ok(status);
    });
}

void ferrox_model_free(ferrox_model* model) { delete model; }

uint32_t ferrox_model_vocab(const ferrox_model* m) {
    return m ? static_cast<uint32_t>(m->engine->model().vocab()) : 0;
}
uint32_t ferrox_model_n_ctx_train(const ferrox_model* m) {
    return m ? m->engine->model().hparams().n_ctx_train : 0;
}
int32_t ferrox_model_bos(const ferrox_model* m) { return m ? m->engine->tokenizer().bos() : -1; }
int32_t ferrox_model_eos(const ferrox_model* m) { return m ? m->engine->tokenizer().eos() : -1; }
int ferrox_model_is_end_of_generation(const ferrox_model* m, int32_t token) {
    return m && m->engine->tokenizer().is_end_of_generation(token) ? 1 : 0;
}

ferrox_code ferrox_model_meta(const ferrox_model* m, const char* key, char* buf, size_t capacity,
                              size_t* needed, ferrox_call_status* status) {
    if (!m || !key) return invalid(status, "ferrox_model_meta: model or key is NULL");
    return guarded(status, [&]() -> ferrox_code {
        const gguf::Value* v = m->engine->file().find(key);
        if (!v) return invalid(status, fmt::format("no metadata key '{}'", key));
        std::string text;
        if (const auto* s = std::get_if<std::string>(v))
            text = *s;
        else if (const auto* a = std::get_if<gguf::Array>(v))
            text = fmt::format("[{} items]", a->size());
        else
            text = gguf::to_display_string(*v);
        return write_text(text, buf, capacity, needed, status);
    });
}

ferrox_code ferrox_model_chat_template(const ferrox_model* m, const char** out,
                                       ferrox_call_status* status) {
    if (!m || !out) return invalid(status, "ferrox_model_chat_template: model or out is NULL");
    *out = m->has_template ? m->chat_template.c_str() : nullptr;
    return ok(status);
}

const char* ferrox_model_arch(const ferrox_model* m) {
    return m ? m->engine->model().hparams().arch_name.c_str() : "";
}
uint32_t ferrox_model_n_layer(const ferrox_model* m) {
    return m ? m->engine->model().hparams().n_layer : 0;
}
uint32_t ferrox_model_n_embd(const ferrox_model* m) {
    return m ? m->engine->model().hparams().n_embd : 0;
}
int ferrox_model_is_recurrent(const ferrox_model* m) {
    return m && m->engine->model().recurrent() ? 1 : 0;
}
uint32_t ferrox_model_n_ctx(const ferrox_model* m) { return m ? m->engine->model().context() : 0; }
uint32_t ferrox_model_n_batch(const ferrox_model* m) {
    return m ? m->engine->model().max_batch() : 0;
}

ferrox_code ferrox_model_capacity_summary(const ferrox_model* m, const char** out,
                                          ferrox_call_status* status) {
    if (!m || !out) return invalid(status, "ferrox_model_capacity_summary: model or out is NULL");
    *out = m->capacity_summary.c_str();
    return ok(status);
}

ferrox_code ferrox_model_residency(const ferrox_model* m, ferrox_residency* out,
                                   ferrox_call_status* status) {
    if (!m || !out) return invalid(status, "ferrox_model_residency: model or out is NULL");
    if (out->struct_size < sizeof(uint32_t) || out->struct_size > sizeof(ferrox_residency))
        return invalid(status,
                       fmt::format("ferrox_residency: struct_size {} is not between 4 and {}",
                                   out->struct_size, sizeof(ferrox_residency)));
    const model::Residency& r = m->engine->model().residency();
    ferrox_residency full{};
    full.struct_size = out->struct_size;
    full.resident = r.resident ? 1 : 0;
    full.backend = m->resident_backend.c_str();
    full.reason = r.resident ? "" : r.reason.c_str();
    std::memcpy(out, &full, out->struct_size);  // only the members the caller has
    return ok(status);
}

ferrox_code ferrox_model_kernel_calls(const ferrox_model* m, uint64_t* calls,
                                      uint64_t* fallback_calls, ferrox_call_status* status) {
    if (!m) return invalid(status, "ferrox_model_kernel_calls: model is NULL");
    return guarded(status, [&]() -> ferrox_code {
        uint64_t c = 0, f = 0;
        (void)dispatch_records(*m, c, f);
        if (calls) *calls = c;
        if (fallback_calls) *fallback_calls = f;
        return ok(status);
    });
}

ferrox_code ferrox_model_kernel_report(const ferrox_model* m, char* buf, size_t capacity,
                                       size_t* needed, ferrox_call_status* status) {
    if (!m) return invalid(status, "ferrox_model_kernel_report: model is NULL");
    return guarded(status, [&]() -> ferrox_code {
        uint64_t calls = 0, fallback_calls = 0;
        nlohmann::json kernels = nlohmann::json::array();
        for (const RegistryEntry& e : dispatch_records(*m, calls, fallback_calls))
            kernels.push_back({{"backend", e.key.backend},
                               {"op", op_name(e.key.op)},
                               {"role", e.key.role},
                               {"kind", kind_name(e.key.kind)},
                               {"outcome", outcome_name(e.outcome)},
                               {"detail", e.detail},
                               {"calls", e.count}});
        const nlohmann::json doc{
            {"calls", calls}, {"fallback_calls", fallback_calls}, {"kernels", std::move(kernels)}};
        // Replacement, not an exception, for a detail that is not UTF-8.
        return write_text(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), buf,
                          capacity, needed, status);
    });
}

}  // extern "C"
