// Helpers for ferrox's C boundaries (the plugin ABI, ferrox.h): no exception
// may cross one, so every entry's body runs inside catch_all(). Header-only,
// on the C++ library alone: plugins and test plugins use it without linking
// libferrox_core.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

#include "ferrox/backend_abi.h"

namespace ferrox {

// What escaped an entry's body.
struct Escaped {
    enum Kind { OutOfMemory, Exception, Unknown } kind;
    const char* what;  // the exception's what(); "" for one that is not a std::exception
};

// body(), or on_escape(Escaped) if body throws: each boundary words its own
// status. noexcept: were on_escape to throw too, terminating beats unwinding
// into C.
template <class Body, class OnEscape>
auto catch_all(Body&& body, OnEscape&& on_escape) noexcept -> decltype(body()) {
    try {
        return body();
    } catch (const std::bad_alloc& e) {
        return on_escape(Escaped{Escaped::OutOfMemory, e.what()});
    } catch (const std::exception& e) {
        return on_escape(Escaped{Escaped::Exception, e.what()});
    } catch (...) {
        return on_escape(Escaped{Escaped::Unknown, ""});
    }
}

// `text` into a plugin's message, cut to its capacity and NUL-terminated;
// a null `out` is allowed (the caller wants no message).
inline void write_message(ferrox_message* out, std::string_view text) noexcept {
    if (!out) return;
    const size_t length = text.size() < sizeof out->text ? text.size() : sizeof out->text - 1;
    std::memcpy(out->text, text.data(), length);
    out->text[length] = '\0';
}

// A plugin entry: body() returns its ferrox_status; an escaping exception
// becomes FERROX_ERR_OUT_OF_MEMORY or FERROX_ERR_INTERNAL, with a message
// that starts with `who` (the plugin, maybe the entry: "cpu", "cuda").
template <class Body>
ferrox_status guarded(const char* who, ferrox_message* error, Body&& body) noexcept {
    return catch_all(static_cast<Body&&>(body), [&](const Escaped& e) {
        if (error) {
            if (e.kind == Escaped::OutOfMemory)
                std::snprintf(error->text, sizeof error->text, "%s: out of host memory", who);
            else if (e.kind == Escaped::Exception)
                std::snprintf(error->text, sizeof error->text, "%s: internal error: %s", who,
                              e.what);
            else
                std::snprintf(error->text, sizeof error->text,
                              "%s: internal error (unknown exception)", who);
        }
        return e.kind == Escaped::OutOfMemory ? FERROX_ERR_OUT_OF_MEMORY : FERROX_ERR_INTERNAL;
    });
}

}  // namespace ferrox
