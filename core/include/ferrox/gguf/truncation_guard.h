// A model file is mmap'd; if it is truncated while ferrox runs, touching a
// page past the new end raises SIGBUS, which would kill the process without a
// word. The guard turns that into a message naming the file and exit status
// 1. (A file replaced by rename keeps its old, still-mapped contents and is
// harmless; one rewritten in place changes under the mapping undetected --
// docs/security.md says so.)
#pragma once

#include <cstddef>

#include "ferrox/api.h"

namespace ferrox::gguf {

inline constexpr int kExitFileChanged = 1;

// Installs the SIGBUS handler (idempotent). A fault inside a registered
// mapping prints "<path>: model file changed on disk (truncated) while in
// use; stopping" on stderr and _exits with kExitFileChanged; any other SIGBUS
// gets the default action.
FERROX_API void install_truncation_guard();

// MappedFile's bookkeeping: mappings the guard knows by address. Lock-free,
// fixed capacity (mappings beyond it are simply not named in the message).
void register_mapping(const void* begin, std::size_t size, const char* path) noexcept;
void unregister_mapping(const void* begin) noexcept;

}  // namespace ferrox::gguf
