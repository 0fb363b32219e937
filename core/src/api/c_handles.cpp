// The shared parts of the C API's entries (c_handles.h) that are not templates.
#include "c_handles.h"

namespace ferrox::c_api {

// The fields a caller's status struct has room for, by its struct_size.
ferrox_code report(ferrox_call_status* status, ferrox_code code, const std::string& message,
                   uint32_t needed, uint32_t free) {
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

// The model's vocabulary trie, built once (thread-safe: samplers over one
// model may be made on many threads at once).
std::shared_ptr<const grammar::TokenTrie> vocabulary_trie(const ferrox_model& m) {
    std::call_once(m.trie_once,
                   [&] { m.trie = grammar::TokenTrie::from_tokenizer(m.engine->tokenizer()); });
    return m.trie;
}

}  // namespace ferrox::c_api
