// What the C API's entry files (core/src/api/c_*.cpp) share: the handles
// behind ferrox.h's opaque types, and how every entry reports its status,
// reads the caller's versioned structs, writes text out and keeps a context
// to one thread at a time.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferrox/c_boundary.h"
#include "ferrox/chat_format/answer.h"
#include "ferrox/engine.h"
#include "ferrox/ferrox.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/model/context.h"
#include "ferrox/model/step_profile.h"
#include "ferrox/output/text_stream.h"
#include "ferrox/sampler_chain.h"

struct ferrox_model {
    std::unique_ptr<ferrox::Engine> engine;
    std::string chat_template;
    bool has_template = false;
    std::string capacity_summary;  // fixed at load
    std::string resident_backend;  // "" when not resident
    // The vocabulary's byte trie for grammar samplers: built by the first
    // one (not at load: most programs never ask), then shared by all.
    mutable std::once_flag trie_once;
    mutable std::shared_ptr<const ferrox::grammar::TokenTrie> trie;
};

struct ferrox_context {
    const ferrox_model* owner = nullptr;
    // With ferrox_context_params.profile: the context's steps time into it
    // (declared before ctx, so that it outlives the steps).
    std::unique_ptr<ferrox::model::StepProfile> profile;
    std::string profile_json;  // ferrox_context_profile's answer
    std::unique_ptr<ferrox::model::Context> ctx;
    std::atomic<bool> busy{false};
    ferrox::model::Batch batch;  // reused per decode
};

struct ferrox_sampler {
    ferrox::SamplerChain chain;
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
    ferrox::ParsedAnswer answer;
    std::vector<ferrox_chat_tool_call> calls;  // pointing into answer.tool_calls
};

struct ferrox_detok_stream {
    const ferrox_model* owner = nullptr;
    std::vector<std::string> stops;   // given before the first push
    ferrox::output::TextStream text;  // UTF-8 assembly and the stops
    bool pushed = false;
};

namespace ferrox::c_api {

// The fields a caller's status struct has room for, by its struct_size.
ferrox_code report(ferrox_call_status* status, ferrox_code code, const std::string& message = {},
                   uint32_t needed = 0, uint32_t free = 0);

inline ferrox_code ok(ferrox_call_status* status) { return report(status, FERROX_CODE_OK); }

inline ferrox_code invalid(ferrox_call_status* status, const std::string& message) {
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

// Writes `text` into buf as the header says (NUL, *needed, BUFFER_TOO_SMALL).
ferrox_code write_text(const std::string& text, char* buf, size_t capacity, size_t* needed,
                       ferrox_call_status* status);

// The model's vocabulary trie, built once (thread-safe: samplers over one
// model may be made on many threads at once).
std::shared_ptr<const grammar::TokenTrie> vocabulary_trie(const ferrox_model& m);

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

}  // namespace ferrox::c_api

#define FERROX_ENTER(ctx, status)                                         \
    if (!(ctx)) return ferrox::c_api::invalid(status, "context is NULL"); \
    ferrox::c_api::Entered entered_guard(ctx);                            \
    if (!entered_guard.entered())                                         \
        return ferrox::c_api::report(                                     \
            status, FERROX_CODE_BUSY,                                     \
            "the context is in use by another thread (one thread at a time)");
