// ferrox.h's context entries: decoding, logits and pooled embeddings, the
// step profile, sequence operations and sequence state saved and restored.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "c_handles.h"
#include "ferrox/model/embed.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/model.h"
#include "ferrox/op.h"
#include "ferrox/quant_kind.h"

// This file defines the exported ferrox_X_params_default function (the frozen
// one older programs call); ferrox.h's macro of that name is for callers.
#undef ferrox_context_params_default

using namespace ferrox;
using namespace ferrox::c_api;

namespace {

// What the exported ferrox_X_params_default function writes, frozen: the
// struct's size in the API version that introduced it (docs/api.md, "Struct sizes").
constexpr size_t kContextParamsSize_0_1 = offsetof(ferrox_context_params, profile);

ferrox_context_params context_defaults() {
    ferrox_context_params p{};
    p.struct_size = sizeof p;
    p.n_seq = 1;
    return p;
}

ferrox_code from(const Expected<void>& r, ferrox_call_status* status) {
    return r ? ok(status) : invalid(status, r.error().message());
}

// A sequence's bytes (a saved state or a checkpoint) into the caller's
// buffer: their size into *needed always, the bytes only where they fit.
ferrox_code copy_out(const Expected<std::vector<std::byte>>& bytes, void* buf, size_t capacity,
                     size_t* needed, ferrox_call_status* status) {
    if (!bytes) return invalid(status, bytes.error().message());
    if (needed) *needed = bytes->size();
    if (!buf || capacity < bytes->size())
        return report(status, FERROX_CODE_BUFFER_TOO_SMALL,
                      fmt::format("{} bytes do not fit in {}", bytes->size(), capacity));
    std::memcpy(buf, bytes->data(), bytes->size());
    return ok(status);
}

}  // namespace

extern "C" {

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
    if (hp.pooling == model::Pooling::Rank)
        return invalid(status,
                       "ferrox_embed: the model is a reranker (pooling rank): it scores "
                       "query/document pairs (the server's /v1/rerank), it gives no embeddings");
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

ferrox_code ferrox_seq_state_save(ferrox_context* c, int32_t seq, void* buf, size_t capacity,
                                  size_t* needed, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    return guarded(status, [&]() -> ferrox_code {
        return copy_out(c->ctx->seq_save(seq), buf, capacity, needed, status);
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

size_t ferrox_checkpoint_size(const ferrox_context* c) {
    return c ? static_cast<size_t>(c->ctx->checkpoint_bytes()) : 0;
}

ferrox_code ferrox_seq_checkpoint(ferrox_context* c, int32_t seq, void* buf, size_t capacity,
                                  size_t* needed, ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    return guarded(status, [&]() -> ferrox_code {
        return copy_out(c->ctx->seq_checkpoint(seq), buf, capacity, needed, status);
    });
}

ferrox_code ferrox_seq_rewind(ferrox_context* c, int32_t seq, const void* buf, size_t size,
                              ferrox_call_status* status) {
    FERROX_ENTER(c, status)
    if (!buf) return invalid(status, "ferrox_seq_rewind: buf is NULL");
    return guarded(status, [&]() -> ferrox_code {
        return from(c->ctx->seq_rewind(seq, {static_cast<const std::byte*>(buf), size}), status);
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

}  // extern "C"
