// The public C API (ferrox/ferrox.h) over the C++ core: each handle owns
// the C++ objects it stands for; every entry checks its arguments, turns
// Expected/DecodeStatus into a ferrox_code plus message, and never lets an
// exception cross into C.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_apply.h"
#include "chat_parse.h"
#include "ferrox/c_boundary.h"
#include "ferrox/config.h"
#include "ferrox/dispatch.h"
#include "ferrox/engine.h"
#include "ferrox/ferrox.h"
#include "ferrox/gguf/file.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/context.h"
#include "ferrox/model/embed.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/model.h"
#include "ferrox/model/step_profile.h"
#include "ferrox/op.h"
#include "ferrox/output/text_stream.h"
#include "ferrox/plugin_loader.h"
#include "ferrox/quant_kind.h"
#include "ferrox/sampler_chain.h"
#include "ferrox/template/chat_renderer.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "sampler_grammar.h"

// This file defines the exported ferrox_X_params_default functions (the
// frozen ones older programs call); ferrox.h's macros of those names are for
// callers. Inside, defaults are written with ferrox_X_params_init.
#undef ferrox_model_params_default
#undef ferrox_context_params_default
#undef ferrox_sampler_params_default
#undef ferrox_chat_params_default
#undef ferrox_chat_parse_params_default

using namespace ferrox;

struct ferrox_model {
    std::unique_ptr<Engine> engine;
    std::string chat_template;
    bool has_template = false;
    std::string capacity_summary;  // fixed at load
    std::string resident_backend;  // "" when not resident
    // The vocabulary's byte trie for grammar samplers: built by the first
    // one (not at load: most programs never ask), then shared by all.
    mutable std::once_flag trie_once;
    mutable std::shared_ptr<const grammar::TokenTrie> trie;
};

struct ferrox_context {
    const ferrox_model* owner = nullptr;
    // With ferrox_context_params.profile: the context's steps time into it
    // (declared before ctx, so that it outlives the steps).
    std::unique_ptr<model::StepProfile> profile;
    std::string profile_json;  // ferrox_context_profile's answer
    std::unique_ptr<model::Context> ctx;
    std::atomic<bool> busy{false};
    model::Batch batch;  // reused per decode
};

struct ferrox_sampler {
    SamplerChain chain;
    bool has_grammar = false;
    bool sampled = false;  // a draw since the last accept_token or reset
    bool broken = false;   // accept_token was given a token the grammar refused
};

struct ferrox_chat_prompt {
    std::string text;
    std::vector<ferrox_text_segment> segments;  // pointing into text
    std::vector<int32_t> tokens;
    std::string origin;
};

struct ferrox_chat_parsed {
    std::string family;
    ParsedAnswer answer;
    std::vector<ferrox_chat_tool_call> calls;  // pointing into answer.tool_calls
};

// ferrox_detok_stream_add_stop's bounds: each push scans every stop over the held text.
constexpr size_t kMaxDetokStops = 64, kMaxDetokStopBytes = 1024;

struct ferrox_detok_stream {
    const ferrox_model* owner = nullptr;
    std::vector<std::string> stops;  // given before the first push
    output::TextStream text;         // UTF-8 assembly and the stops
    bool pushed = false;
};

namespace {

// The fields a caller's status struct has room for, by its struct_size.
ferrox_code report(ferrox_call_status* status, ferrox_code code, const std::string& message = {},
                   uint32_t needed = 0, uint32_t free = 0) {
    if (!status) return code;
    const size_t size = status->struct_size;
    if (size >= offsetof(ferrox_call_status, code) + sizeof(status->code)) status->code = code;
    if (size >= offsetof(ferrox_call_status, message) + sizeof(status->message)) {
        const size_t n = std::min(message.size(), sizeof(status->message) - 1);
        std::memcpy(status->message, message.data(), n);
        status->message[n] = '\0';
    }
    if (size >= offsetof(ferrox_call_status, cells_free) + sizeof(status->cells_free)) {
        status->cells_needed = needed;
        status->cells_free = free;
    }
    return code;
}

ferrox_code ok(ferrox_call_status* status) { return report(status, FERROX_CODE_OK); }

ferrox_code invalid(ferrox_call_status* status, const std::string& message) {
    return report(status, FERROX_CODE_INVALID_ARGUMENT, message);
}

// Copies a caller's versioned struct over the defaults: only the bytes the
// caller says it has, so an older, smaller struct keeps newer defaults.
template <class T>
bool read_params(const T* given, T& out, ferrox_call_status* status, const char* what) {
    if (!given) return true;
    if (given->struct_size < sizeof(uint32_t) || given->struct_size > sizeof(T)) {
        invalid(status, fmt::format("{}: struct_size {} is not between 4 and {}", what,
                                    given->struct_size, sizeof(T)));
        return false;
    }
    std::memcpy(&out, given, given->struct_size);
    out.struct_size = sizeof(T);
    return true;
}

// ferrox_X_params_init: the library's defaults into the first `size` bytes
// the caller says it has (an older, smaller struct is never written past),
// zeros beyond what the library knows, and struct_size = size (a struct
// larger than the library knows is then refused where it is read, rather
// than its newer members ignored).
template <class T>
void write_defaults(T* out, size_t size, T defaults) {
    if (!out || size < sizeof(uint32_t)) return;
    defaults.struct_size = static_cast<uint32_t>(std::min<size_t>(size, UINT32_MAX));
    const size_t known = std::min(size, sizeof(T));
    std::memcpy(out, &defaults, known);
    if (size > known) std::memset(reinterpret_cast<unsigned char*>(out) + known, 0, size - known);
}

// What the exported ferrox_X_params_default functions write, frozen: each
// struct's size in the API version that introduced that function, which is
// what a program built against that version's header declared (docs/api.md,
// "Struct sizes"). A member appended later begins where the struct then
// ended (each is pointer-aligned or follows a tail of 4-byte members).
constexpr size_t kModelParamsSize_0_1 = offsetof(ferrox_model_params, max_sequences);
constexpr size_t kContextParamsSize_0_1 = offsetof(ferrox_context_params, profile);
constexpr size_t kSamplerParamsSize_0_1 = offsetof(ferrox_sampler_params, model);
constexpr size_t kChatParamsSize_0_4 = offsetof(ferrox_chat_params, kwargs_json);
// Unchanged since 0.5: when it grows, this becomes offsetof(the first new member).
constexpr size_t kChatParseParamsSize_0_5 = sizeof(ferrox_chat_parse_params);

ferrox_model_params model_defaults() {
    ferrox_model_params p{};
    p.struct_size = sizeof p;
    p.kv_kind = FERROX_KV_F32;
    p.allow_resident = 1;
    return p;
}

ferrox_context_params context_defaults() {
    ferrox_context_params p{};
    p.struct_size = sizeof p;
    p.n_seq = 1;
    return p;
}

ferrox_sampler_params sampler_defaults() {
    ferrox_sampler_params p{};
    p.struct_size = sizeof p;
    const SamplerParams d;
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.min_p = d.min_p;
    p.repeat_penalty = d.repeat_penalty;
    p.repeat_last_n = d.repeat_last_n;
    p.seed = d.seed;
    return p;
}

ferrox_chat_params chat_defaults() {
    ferrox_chat_params p{};
    p.struct_size = sizeof p;
    p.add_generation_prompt = 1;
    return p;
}

ferrox_chat_parse_params chat_parse_defaults() {
    ferrox_chat_parse_params p{};
    p.struct_size = sizeof p;
    return p;
}

// The model's vocabulary trie, built once (thread-safe: samplers over one
// model may be made on many threads at once).
std::shared_ptr<const grammar::TokenTrie> vocabulary_trie(const ferrox_model& m) {
    std::call_once(m.trie_once,
                   [&] { m.trie = grammar::TokenTrie::from_tokenizer(m.engine->tokenizer()); });
    return m.trie;
}

// Writes `text` into buf as the header says (NUL, *needed, BUFFER_TOO_SMALL).
ferrox_code write_text(const std::string& text, char* buf, size_t capacity, size_t* needed,
                       ferrox_call_status* status) {
    if (needed) *needed = text.size();
    if (!buf || capacity < text.size() + 1)
        return report(status, FERROX_CODE_BUFFER_TOO_SMALL,
                      fmt::format("{} bytes (and a NUL) do not fit in {}", text.size(), capacity));
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    return ok(status);
}

// Marks a context in use for one call; a second thread gets BUSY.
class Entered {
  public:
    explicit Entered(ferrox_context* c) : c_(c) {
        bool expected = false;
        entered_ = c_->busy.compare_exchange_strong(expected, true, std::memory_order_acquire);
    }
    ~Entered() {
        if (entered_) c_->busy.store(false, std::memory_order_release);
    }
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;
    bool entered() const { return entered_; }

  private:
    ferrox_context* c_;
    bool entered_ = false;
};

#define FERROX_ENTER(ctx, status)                          \
    if (!(ctx)) return invalid(status, "context is NULL"); \
    Entered entered_guard(ctx);                            \
    if (!entered_guard.entered())                          \
        return report(status, FERROX_CODE_BUSY,            \
                      "the context is in use by another thread (one thread at a time)");

// Every entry's body: an escaping exception (ferrox/c_boundary.h) becomes a
// BACKEND status.
template <class F>
ferrox_code guarded(ferrox_call_status* status, F&& body) {
    return catch_all(std::forward<F>(body), [&](const Escaped& e) {
        return report(status, FERROX_CODE_BACKEND,
                      e.kind == Escaped::Unknown ? std::string("internal error")
                                                 : std::string("internal error: ") + e.what);
    });
}

// ferrox_model_params in the engine's terms (docs/api.md: n_ctx_max is
// `context`, n_batch_max `batch`, max_sequences `sequences`); the strings
// are copied, a NULL among them refused.
Expected<EngineOptions> engine_options(const ferrox_model_params& p) {
    ferrox_kind kv_kind = FERROX_KIND_F32;
    switch (p.kv_kind) {
        case FERROX_KV_F32:
            break;
        case FERROX_KV_F16:
            kv_kind = FERROX_KIND_F16;
            break;
        case FERROX_KV_Q8_0:
            kv_kind = FERROX_KIND_Q8_0;
            break;
        case FERROX_KV_Q4_0:
            kv_kind = FERROX_KIND_Q4_0;
            break;
        default:
            return make_error("kv_kind {} is none of F32, F16, Q8_0, Q4_0", int(p.kv_kind));
    }
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
    o.kv_kind = kv_kind;
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

}  // namespace

extern "C" {

uint32_t ferrox_api_version(void) {
    return FERROX_API_VERSION_MAJOR << 16 | FERROX_API_VERSION_MINOR;
}

const char* ferrox_code_name(ferrox_code code) {
    switch (code) {
        case FERROX_CODE_OK:
            return "ok";
        case FERROX_CODE_INVALID_ARGUMENT:
            return "invalid argument";
        case FERROX_CODE_NO_ROOM:
            return "no room";
        case FERROX_CODE_IO:
            return "i/o error";
        case FERROX_CODE_BACKEND:
            return "backend error";
        case FERROX_CODE_CANCELLED:
            return "cancelled";
        case FERROX_CODE_BUSY:
            return "busy";
        case FERROX_CODE_BUFFER_TOO_SMALL:
            return "buffer too small";
        case FERROX_CODE_GRAMMAR:
            return "grammar";
    }
    return "unknown";
}

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

}  // extern "C"

namespace {

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

ferrox_code ferrox_tokenize(const ferrox_model* m, const char* text, size_t len, int add_special,
                            int parse_special, int32_t* tokens, size_t capacity, size_t* n_tokens,
                            ferrox_call_status* status) {
    if (!m || (!text && len) || !n_tokens)
        return invalid(status, "ferrox_tokenize: model, text or n_tokens is NULL");
    return guarded(status, [&]() -> ferrox_code {
        const auto ids = m->engine->tokenizer().encode(std::string_view(text ? text : "", len),
                                                       add_special != 0, parse_special != 0);
        *n_tokens = ids.size();
        if (!tokens || capacity < ids.size())
            return report(status, FERROX_CODE_BUFFER_TOO_SMALL,
                          fmt::format("{} tokens do not fit in {}", ids.size(), capacity));
        std::copy(ids.begin(), ids.end(), tokens);
        return ok(status);
    });
}

ferrox_code ferrox_tokenize_segments(const ferrox_model* m, const ferrox_text_segment* segments,
                                     size_t n, int add_special, int32_t* tokens, size_t capacity,
                                     size_t* n_tokens, ferrox_call_status* status) {
    if (!m || (!segments && n) || !n_tokens)
        return invalid(status, "ferrox_tokenize_segments: model, segments or n_tokens is NULL");
    for (size_t i = 0; i < n; ++i)
        if (!segments[i].text && segments[i].len)
            return invalid(status, fmt::format("ferrox_tokenize_segments: segment {} has {} bytes "
                                               "at NULL",
                                               i, segments[i].len));
    return guarded(status, [&]() -> ferrox_code {
        std::vector<TextSegment> parts;
        parts.reserve(n);
        for (size_t i = 0; i < n; ++i)
            parts.push_back(
                {std::string_view(segments[i].text ? segments[i].text : "", segments[i].len),
                 segments[i].parse_special != 0});
        const auto ids = m->engine->tokenizer().encode(parts, add_special != 0);
        *n_tokens = ids.size();
        if (!tokens || capacity < ids.size())
            return report(status, FERROX_CODE_BUFFER_TOO_SMALL,
                          fmt::format("{} tokens do not fit in {}", ids.size(), capacity));
        std::copy(ids.begin(), ids.end(), tokens);
        return ok(status);
    });
}

ferrox_code ferrox_detokenize(const ferrox_model* m, const int32_t* tokens, size_t n, char* buf,
                              size_t capacity, size_t* needed, ferrox_call_status* status) {
    if (!m || (!tokens && n)) return invalid(status, "ferrox_detokenize: model or tokens is NULL");
    const uint64_t vocab = m->engine->model().vocab();
    for (size_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || static_cast<uint64_t>(tokens[i]) >= vocab)
            return invalid(status, fmt::format("token {} at index {} is outside 0..{}", tokens[i],
                                               i, vocab - 1));
    return guarded(status, [&]() -> ferrox_code {
        return write_text(m->engine->tokenizer().decode({tokens, n}), buf, capacity, needed,
                          status);
    });
}

ferrox_code ferrox_token_text(const ferrox_model* m, int32_t token, char* buf, size_t capacity,
                              size_t* needed, ferrox_call_status* status) {
    if (!m) return invalid(status, "ferrox_token_text: model is NULL");
    return guarded(status, [&]() -> ferrox_code {
        // The one entry, read in place: not a copy of every token text per call.
        const gguf::Value* value = m->engine->file().find("tokenizer.ggml.tokens");
        const auto* texts = value ? std::get_if<gguf::Array>(value) : nullptr;
        if (!texts || texts->element_type() != gguf::ValueType::String)
            return invalid(status, "tokenizer.ggml.tokens is not an array of strings");
        if (token < 0 || static_cast<uint64_t>(token) >= texts->size())
            return invalid(status, fmt::format("token {} is outside 0..{}", token,
                                               static_cast<int64_t>(texts->size()) - 1));
        return write_text(std::string(texts->string_at(static_cast<uint64_t>(token))), buf,
                          capacity, needed, status);
    });
}

ferrox_code ferrox_detok_stream_new(const ferrox_model* m, ferrox_detok_stream** out,
                                    ferrox_call_status* status) {
    if (!m || !out) return invalid(status, "ferrox_detok_stream_new: model or out is NULL");
    auto stream = std::make_unique<ferrox_detok_stream>();
    stream->owner = m;
    *out = stream.release();
    return ok(status);
}

void ferrox_detok_stream_free(ferrox_detok_stream* s) { delete s; }

ferrox_code ferrox_detok_stream_add_stop(ferrox_detok_stream* s, const char* text, size_t len,
                                         ferrox_call_status* status) {
    if (!s || (!text && len)) return invalid(status, "ferrox_detok_stream_add_stop: NULL argument");
    if (s->pushed) return invalid(status, "ferrox_detok_stream_add_stop: the stream has begun");
    if (s->stops.size() >= kMaxDetokStops || len > kMaxDetokStopBytes)
        return invalid(status, fmt::format("stop strings: at most {} of at most {} bytes each",
                                           kMaxDetokStops, kMaxDetokStopBytes));
    return guarded(status, [&]() -> ferrox_code {
        s->stops.emplace_back(text ? text : "", len);
        s->text = output::TextStream(s->stops);  // nothing pushed yet: no state to keep
        return ok(status);
    });
}

int ferrox_detok_stream_stopped(const ferrox_detok_stream* s) {
    return s && s->text.stopped() ? 1 : 0;
}

ferrox_code ferrox_detok_stream_push(ferrox_detok_stream* s, int32_t token, char* buf,
                                     size_t capacity, size_t* needed, ferrox_call_status* status) {
    if (!s) return invalid(status, "ferrox_detok_stream_push: stream is NULL");
    if (token >= 0 && static_cast<uint64_t>(token) >= s->owner->engine->model().vocab())
        return invalid(status, fmt::format("token {} is outside the vocabulary", token));
    return guarded(status, [&]() -> ferrox_code {
        // On a copy, kept only when the text fits: a too-small buffer changes
        // nothing, and the same push with a larger one gets the same text.
        output::TextStream next = s->text;
        const auto step = token >= 0
                              ? next.push(s->owner->engine->tokenizer().token_to_piece(token))
                              : next.finish();
        const ferrox_code code = write_text(step.emit, buf, capacity, needed, status);
        if (code == FERROX_CODE_OK) s->text = std::move(next), s->pushed = true;
        return code;
    });
}

void ferrox_context_params_init(ferrox_context_params* p, size_t size) {
    write_defaults(p, size, context_defaults());
}

void ferrox_context_params_default(ferrox_context_params* p) {
    write_defaults(p, kContextParamsSize_0_1, context_defaults());
}

ferrox_code ferrox_context_new(const ferrox_model* m, const ferrox_context_params* given,
                               ferrox_context** out, ferrox_call_status* status) {
    if (!m || !out) return invalid(status, "ferrox_context_new: model or out is NULL");
    *out = nullptr;
    ferrox_context_params p;
    ferrox_context_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_context_params"))
        return FERROX_CODE_INVALID_ARGUMENT;
    return guarded(status, [&]() -> ferrox_code {
        model::ContextOptions o;
        o.context = p.n_ctx;
        o.sequences = p.n_seq;
        o.batch = p.n_batch;
        auto c = std::make_unique<ferrox_context>();
        if (p.profile) {
            c->profile = std::make_unique<model::StepProfile>();
            o.profile = c->profile.get();
        }
        auto ctx = model::Context::create(m->engine->model(), o);
        if (!ctx) return invalid(status, ctx.error().message());
        c->owner = m;
        c->ctx = std::move(*ctx);
        *out = c.release();
        return ok(status);
    });
}

void ferrox_context_free(ferrox_context* c) { delete c; }

ferrox_code ferrox_decode(ferrox_context* c, const ferrox_batch* b, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!b) return invalid(status, "ferrox_decode: batch is NULL");
    if (b->struct_size < offsetof(ferrox_batch, logits) || b->struct_size > sizeof(ferrox_batch))
        return invalid(status, fmt::format("ferrox_batch: struct_size {} is not between {} and {}",
                                           b->struct_size, offsetof(ferrox_batch, logits),
                                           sizeof(ferrox_batch)));
    const uint8_t* want = b->struct_size >= sizeof(ferrox_batch) ? b->logits : nullptr;
    if (b->n_tokens && (!b->tokens || !b->positions || !b->seq_ids))
        return invalid(status, "ferrox_batch: tokens, positions or seq_ids is NULL");
    return guarded(status, [&]() -> ferrox_code {
        model::Batch& batch = c->batch;
        batch.clear();
        for (uint32_t i = 0; i < b->n_tokens; ++i)
            batch.add(b->tokens[i], b->positions[i], {b->seq_ids[i]},
                      want ? want[i] != 0 : i + 1 == b->n_tokens);
        const auto st = c->ctx->decode(batch);
        switch (st.code) {
            case model::DecodeCode::Ok:
                return ok(status);
            case model::DecodeCode::InvalidBatch:
                return invalid(status, st.message);
            case model::DecodeCode::NoRoom:
                return report(status, FERROX_CODE_NO_ROOM, st.message, st.cells_needed,
                              st.cells_free);
            case model::DecodeCode::Failed:
                break;
        }
        return report(status, FERROX_CODE_BACKEND, st.message);
    });
}

ferrox_code ferrox_logits(ferrox_context* c, uint32_t index, const float** out,
                          ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!out) return invalid(status, "ferrox_logits: out is NULL");
    const auto l = c->ctx->logits(index);
    if (l.empty())
        return invalid(status,
                       fmt::format("batch token {} of the last decode asked for no logits", index));
    *out = l.data();
    return ok(status);
}

ferrox_pooling ferrox_model_pooling(const ferrox_model* m) {
    return m ? static_cast<ferrox_pooling>(m->engine->model().hparams().pooling)
             : FERROX_POOLING_NONE;
}

ferrox_code ferrox_embed(ferrox_context* c, size_t n_inputs, const int32_t* const* tokens,
                         const size_t* n_tokens, int normalize, float* out, size_t out_floats,
                         ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (n_inputs && (!tokens || !n_tokens || !out))
        return invalid(status, "ferrox_embed: tokens, n_tokens or out is NULL");
    const model::Hparams& hp = c->owner->engine->model().hparams();
    if (hp.pooling == model::Pooling::None)
        return invalid(
            status,
            fmt::format("ferrox_embed: the model is not an embedding model ('{}.pooling_type' "
                        "is absent or 0: it has no pooled output)",
                        hp.arch_name));
    if (n_inputs > out_floats / hp.n_embd)
        return invalid(
            status, fmt::format("ferrox_embed: out holds {} floats; {} inputs of {} need {}",
                                out_floats, n_inputs, hp.n_embd, uint64_t{n_inputs} * hp.n_embd));
    for (size_t i = 0; i < n_inputs; ++i) {
        if (n_tokens[i] == 0 || n_tokens[i] > c->ctx->context())
            return invalid(status, fmt::format("ferrox_embed: input {} has {} tokens; 1 to the "
                                               "context's {} are accepted",
                                               i, n_tokens[i], c->ctx->context()));
        if (!tokens[i]) return invalid(status, fmt::format("ferrox_embed: tokens[{}] is NULL", i));
    }
    return guarded(status, [&]() -> ferrox_code {
        std::vector<std::vector<int32_t>> inputs(n_inputs);
        for (size_t i = 0; i < n_inputs; ++i) inputs[i].assign(tokens[i], tokens[i] + n_tokens[i]);
        model::EmbedOptions options;
        options.pooling = hp.pooling;
        options.normalize = normalize != 0;
        auto vectors = model::embed(*c->ctx, inputs, options);
        if (!vectors) return invalid(status, vectors.error().message());
        for (size_t i = 0; i < n_inputs; ++i)
            std::copy((*vectors)[i].begin(), (*vectors)[i].end(), out + i * hp.n_embd);
        return ok(status);
    });
}

ferrox_code ferrox_context_profile(ferrox_context* c, const char** json,
                                   ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!json) return invalid(status, "ferrox_context_profile: json is NULL");
    if (!c->profile)
        return invalid(status, "ferrox_context_profile: the context was made without profile");
    return guarded(status, [&]() -> ferrox_code {
        nlohmann::json ops = nlohmann::json::array();
        for (const model::StepTiming& t : c->profile->rows())
            ops.push_back({{"op", t.op},
                           {"role", t.role},
                           {"kind", kind_name(t.kind)},
                           {"calls", t.calls},
                           {"nanoseconds", t.nanoseconds},
                           {"bytes", t.bytes}});
        const nlohmann::json doc{{"launch_times", c->profile->launch_times},
                                 {"nanoseconds", c->profile->total_nanoseconds()},
                                 {"ops", std::move(ops)}};
        c->profile_json = doc.dump();
        *json = c->profile_json.c_str();
        return ok(status);
    });
}

ferrox_code ferrox_context_profile_reset(ferrox_context* c, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!c->profile)
        return invalid(status,
                       "ferrox_context_profile_reset: the context was made without profile");
    c->profile->clear();  // keeps launch_times: it says what the steps are
    return ok(status);
}

namespace {
ferrox_code from(const Expected<void>& r, ferrox_call_status* status) {
    return r ? ok(status) : invalid(status, r.error().message());
}
}  // namespace

ferrox_code ferrox_seq_remove(ferrox_context* c, int32_t seq, int32_t p0, int32_t p1,
                              ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    return from(c->ctx->seq_remove(seq, p0, p1), status);
}

ferrox_code ferrox_seq_copy(ferrox_context* c, int32_t src, int32_t dst, int32_t p0, int32_t p1,
                            ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    return from(c->ctx->seq_copy(src, dst, p0, p1), status);
}

ferrox_code ferrox_seq_keep(ferrox_context* c, int32_t seq, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    return from(c->ctx->seq_keep(seq), status);
}

ferrox_code ferrox_kv_clear(ferrox_context* c, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    c->ctx->clear();
    return ok(status);
}

ferrox_code ferrox_seq_pos_range(ferrox_context* c, int32_t seq, int32_t* min_pos, int32_t* max_pos,
                                 ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    auto lo = c->ctx->seq_min_pos(seq);
    if (!lo) return invalid(status, lo.error().message());
    if (min_pos) *min_pos = *lo;
    if (max_pos) *max_pos = *c->ctx->seq_max_pos(seq);
    return ok(status);
}

ferrox_code ferrox_kv_usage(ferrox_context* c, uint32_t* used, uint32_t* total,
                            ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (used) *used = c->ctx->cells().used();
    if (total) *total = c->ctx->cells().size();
    return ok(status);
}

void ferrox_sampler_params_init(ferrox_sampler_params* p, size_t size) {
    write_defaults(p, size, sampler_defaults());
}

void ferrox_sampler_params_default(ferrox_sampler_params* p) {
    write_defaults(p, kSamplerParamsSize_0_1, sampler_defaults());
}

ferrox_code ferrox_sampler_new(const ferrox_sampler_params* given, ferrox_sampler** out,
                               ferrox_call_status* status) {
    if (!out) return invalid(status, "ferrox_sampler_new: out is NULL");
    *out = nullptr;
    ferrox_sampler_params p;
    ferrox_sampler_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_sampler_params"))
        return FERROX_CODE_INVALID_ARGUMENT;
    const auto finite = [](float x) { return std::isfinite(x); };
    if (!finite(p.temperature) || !finite(p.top_p) || p.top_p < 0 || p.top_p > 1 ||
        !finite(p.min_p) || p.min_p < 0 || p.min_p > 1 || !finite(p.repeat_penalty) ||
        p.repeat_penalty <= 0 || !finite(p.frequency_penalty) || !finite(p.presence_penalty))
        return invalid(status,
                       "ferrox_sampler_params: temperature and penalties must be finite, top_p and "
                       "min_p in [0, 1], repeat_penalty > 0");
    if (p.n_logit_bias && !p.logit_bias)
        return invalid(status, "n_logit_bias > 0, logit_bias NULL");
    if ((p.grammar || p.json_schema) && !p.model)
        return invalid(status,
                       "ferrox_sampler_params: a grammar or json_schema needs model (its "
                       "vocabulary is what the grammar is matched against)");
    return guarded(status, [&]() -> ferrox_code {
        auto grammar = api::sampler_grammar(p);
        if (!grammar) return invalid(status, grammar.error().message());
        ChainParams cp;
        cp.base.temperature = p.temperature;
        cp.base.top_k = p.top_k;
        cp.base.top_p = p.top_p;
        cp.base.min_p = p.min_p;
        cp.base.repeat_penalty = p.repeat_penalty;
        cp.base.repeat_last_n = p.repeat_last_n;
        cp.base.seed = p.seed;
        cp.frequency_penalty = p.frequency_penalty;
        cp.presence_penalty = p.presence_penalty;
        for (uint32_t i = 0; i < p.n_logit_bias; ++i)
            cp.logit_bias.emplace_back(p.logit_bias[i].token, p.logit_bias[i].bias);
        if (*grammar) {
            cp.grammar = std::move(*grammar);
            cp.grammar_vocab = vocabulary_trie(*p.model);
        }
        auto sampler = std::make_unique<ferrox_sampler>();
        sampler->has_grammar = cp.grammar != nullptr;
        sampler->chain = SamplerChain::from_params(cp);  // the one builder (sampler_chain.h)
        *out = sampler.release();
        return ok(status);
    });
}

void ferrox_sampler_free(ferrox_sampler* s) { delete s; }

ferrox_code ferrox_sampler_sample(ferrox_sampler* s, const float* logits, uint32_t n_vocab,
                                  int32_t* token, ferrox_call_status* status) {
    if (!s || !logits || !token || n_vocab == 0)
        return invalid(status, "ferrox_sampler_sample: sampler, logits or token is NULL");
    return guarded(status, [&]() -> ferrox_code {
        *token = s->chain.sample({logits, n_vocab});
        if (*token < 0) {
            if (std::string why = s->chain.error(); !why.empty())
                return report(status, FERROX_CODE_GRAMMAR, why);
            return invalid(status, "every token was filtered out");
        }
        s->sampled = true;
        return ok(status);
    });
}

ferrox_code ferrox_sampler_accept(ferrox_sampler* s, const int32_t* tokens, size_t n,
                                  ferrox_call_status* status) {
    if (!s || (!tokens && n)) return invalid(status, "ferrox_sampler_accept: NULL argument");
    if (s->has_grammar && s->sampled)
        return invalid(status,
                       "ferrox_sampler_accept: this sampler has a grammar and has sampled: give "
                       "generated tokens to ferrox_sampler_accept_token (or ferrox_sampler_reset "
                       "before a new prompt)");
    return guarded(status, [&]() -> ferrox_code {
        s->chain.accept(std::span<const int32_t>(tokens, n));
        return ok(status);
    });
}

ferrox_code ferrox_sampler_accept_token(ferrox_sampler* s, int32_t token,
                                        ferrox_call_status* status) {
    if (!s) return invalid(status, "ferrox_sampler_accept_token: sampler is NULL");
    return guarded(status, [&]() -> ferrox_code {
        if (!s->has_grammar) {
            s->chain.accept(std::span<const int32_t>(&token, 1));  // history only, as accept
            return ok(status);
        }
        s->chain.accept(token);  // the history, and the grammar over its bytes
        s->sampled = false;
        if (std::string why = s->chain.error(); !why.empty()) {
            s->broken = true;
            return report(status, FERROX_CODE_GRAMMAR, why);
        }
        return ok(status);
    });
}

ferrox_grammar_state ferrox_sampler_grammar_state(const ferrox_sampler* s) {
    const grammar::GrammarMatcher* m = s ? s->chain.grammar_matcher() : nullptr;
    if (!m) return FERROX_GRAMMAR_NONE;
    if (m->finished()) return FERROX_GRAMMAR_ENDED;
    if (s->broken) return FERROX_GRAMMAR_FAILED;
    // Complete and still refused everything: a vocabulary without an
    // end-of-generation token; the text itself is whole.
    if (m->complete()) return FERROX_GRAMMAR_COMPLETE;
    return s->chain.error().empty() ? FERROX_GRAMMAR_OPEN : FERROX_GRAMMAR_FAILED;
}

ferrox_code ferrox_sampler_reset(ferrox_sampler* s, ferrox_call_status* status) {
    if (!s) return invalid(status, "ferrox_sampler_reset: sampler is NULL");
    return guarded(status, [&]() -> ferrox_code {
        s->chain.clear_history();  // restarts the grammar; the random stream goes on
        s->sampled = s->broken = false;
        return ok(status);
    });
}

ferrox_code ferrox_seq_state_save(ferrox_context* c, int32_t seq, void* buf, size_t capacity,
                                  size_t* needed, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    return guarded(status, [&]() -> ferrox_code {
        auto bytes = c->ctx->seq_save(seq);
        if (!bytes) return invalid(status, bytes.error().message());
        if (needed) *needed = bytes->size();
        if (!buf || capacity < bytes->size())
            return report(status, FERROX_CODE_BUFFER_TOO_SMALL,
                          fmt::format("{} bytes do not fit in {}", bytes->size(), capacity));
        std::memcpy(buf, bytes->data(), bytes->size());
        return ok(status);
    });
}

ferrox_code ferrox_seq_state_restore(ferrox_context* c, int32_t seq, const void* buf, size_t size,
                                     ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!buf && size) return invalid(status, "ferrox_seq_state_restore: buf is NULL");
    return guarded(status, [&]() -> ferrox_code {
        return from(c->ctx->seq_restore(seq, {static_cast<const std::byte*>(buf), size}), status);
    });
}

ferrox_code ferrox_seq_state_save_file(ferrox_context* c, int32_t seq, const char* path,
                                       ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!path) return invalid(status, "ferrox_seq_state_save_file: path is NULL");
    return guarded(status, [&]() -> ferrox_code {
        auto bytes = c->ctx->seq_save(seq);
        if (!bytes) return invalid(status, bytes.error().message());
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(bytes->data()),
                static_cast<std::streamsize>(bytes->size()));
        f.close();
        if (!f) return report(status, FERROX_CODE_IO, fmt::format("{}: cannot write", path));
        return ok(status);
    });
}

ferrox_code ferrox_seq_state_restore_file(ferrox_context* c, int32_t seq, const char* path,
                                          ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!path) return invalid(status, "ferrox_seq_state_restore_file: path is NULL");
    return guarded(status, [&]() -> ferrox_code {
        std::ifstream f(path, std::ios::binary);
        if (!f) return report(status, FERROX_CODE_IO, fmt::format("{}: cannot open", path));
        std::vector<char> bytes((std::istreambuf_iterator<char>(f)),
                                std::istreambuf_iterator<char>());
        if (f.bad()) return report(status, FERROX_CODE_IO, fmt::format("{}: cannot read", path));
        auto r = c->ctx->seq_restore(
            seq, {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
        if (!r) return invalid(status, fmt::format("{}: {}", path, r.error().message()));
        return ok(status);
    });
}

void ferrox_chat_params_init(ferrox_chat_params* p, size_t size) {
    write_defaults(p, size, chat_defaults());
}

void ferrox_chat_params_default(ferrox_chat_params* p) {
    write_defaults(p, kChatParamsSize_0_4, chat_defaults());
}

ferrox_code ferrox_chat_apply_template(const ferrox_model* m, const ferrox_chat_params* given,
                                       ferrox_chat_prompt** out, ferrox_call_status* status) {
    if (!m || !given || !out)
        return invalid(status, "ferrox_chat_apply_template: model, params or out is NULL");
    *out = nullptr;
    ferrox_chat_params p;
    ferrox_chat_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_chat_params")) return FERROX_CODE_INVALID_ARGUMENT;
    return guarded(status, [&]() -> ferrox_code {
        auto rendered = api::apply_chat_template(*m->engine, p);
        if (!rendered) return invalid(status, rendered.error().message());
        auto prompt = std::make_unique<ferrox_chat_prompt>();
        prompt->text = std::move(rendered->text);
        prompt->tokens = std::move(rendered->tokens);
        prompt->origin = std::move(rendered->origin);
        // Segments of the text in its final place (a moved short string moves its bytes).
        for (const TextSegment& seg : prompt_segments(prompt->text, rendered->client))
            prompt->segments.push_back({seg.text.data(), seg.text.size(), seg.parse_special});
        *out = prompt.release();
        return ok(status);
    });
}

void ferrox_chat_prompt_free(ferrox_chat_prompt* prompt) { delete prompt; }

const char* ferrox_chat_prompt_text(const ferrox_chat_prompt* prompt, size_t* len) {
    if (len) *len = prompt ? prompt->text.size() : 0;
    return prompt ? prompt->text.c_str() : "";
}

const ferrox_text_segment* ferrox_chat_prompt_segments(const ferrox_chat_prompt* prompt,
                                                       size_t* n) {
    if (n) *n = prompt ? prompt->segments.size() : 0;
    return prompt ? prompt->segments.data() : nullptr;
}

const int32_t* ferrox_chat_prompt_tokens(const ferrox_chat_prompt* prompt, size_t* n) {
    if (n) *n = prompt ? prompt->tokens.size() : 0;
    return prompt ? prompt->tokens.data() : nullptr;
}

const char* ferrox_chat_prompt_template(const ferrox_chat_prompt* prompt) {
    return prompt ? prompt->origin.c_str() : "";
}

void ferrox_chat_parse_params_init(ferrox_chat_parse_params* p, size_t size) {
    write_defaults(p, size, chat_parse_defaults());
}

void ferrox_chat_parse_params_default(ferrox_chat_parse_params* p) {
    write_defaults(p, kChatParseParamsSize_0_5, chat_parse_defaults());
}

ferrox_code ferrox_chat_parse(const ferrox_model* m, const ferrox_chat_parse_params* given,
                              const char* text, size_t len, ferrox_chat_parsed** out,
                              ferrox_call_status* status) {
    if (!given || !out || (!text && len))
        return invalid(status,
                       "ferrox_chat_parse: params or out is NULL, or text is NULL with len");
    *out = nullptr;
    ferrox_chat_parse_params p;
    ferrox_chat_parse_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_chat_parse_params"))
        return FERROX_CODE_INVALID_ARGUMENT;
    return guarded(status, [&]() -> ferrox_code {
        auto parsed = api::parse_chat_answer(m ? m->engine.get() : nullptr, p,
                                             std::string_view(text ? text : "", len));
        if (!parsed) return invalid(status, parsed.error().message());
        auto result = std::make_unique<ferrox_chat_parsed>();
        result->family = std::string(family_info(parsed->family).name);
        result->answer = std::move(parsed->answer);
        for (const ChatToolCall& c : result->answer.tool_calls)
            result->calls.push_back(
                {c.id.c_str(), c.name.c_str(), c.arguments.c_str(), c.arguments.size()});
        *out = result.release();
        return ok(status);
    });
}

void ferrox_chat_parsed_free(ferrox_chat_parsed* parsed) { delete parsed; }

const char* ferrox_chat_parsed_family(const ferrox_chat_parsed* parsed) {
    return parsed ? parsed->family.c_str() : "";
}

const char* ferrox_chat_parsed_content(const ferrox_chat_parsed* parsed, size_t* len) {
    if (len) *len = parsed ? parsed->answer.content.size() : 0;
    return parsed ? parsed->answer.content.c_str() : "";
}

const char* ferrox_chat_parsed_reasoning(const ferrox_chat_parsed* parsed, size_t* len) {
    if (len) *len = parsed ? parsed->answer.reasoning.size() : 0;
    return parsed ? parsed->answer.reasoning.c_str() : "";
}

size_t ferrox_chat_parsed_n_tool_calls(const ferrox_chat_parsed* parsed) {
    return parsed ? parsed->calls.size() : 0;
}

const ferrox_chat_tool_call* ferrox_chat_parsed_tool_call(const ferrox_chat_parsed* parsed,
                                                          size_t i) {
    return parsed && i < parsed->calls.size() ? &parsed->calls[i] : nullptr;
}

}  // extern "C"
