// ferrox.h's text entries: tokenizing (plain and by segments), detokenizing,
// and the detokenizing stream with its stop strings.
#include <string>
#include <vector>

#include "c_handles.h"
#include "ferrox/tokenizer/tokenizer.h"

using namespace ferrox;
using namespace ferrox::c_api;

namespace {

// ferrox_detok_stream_add_stop's bounds: each push scans every stop over the held text.
constexpr size_t kMaxDetokStops = 64, kMaxDetokStopBytes = 1024;

}  // namespace

extern "C" {

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

}  // extern "C"
