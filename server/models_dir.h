// `ferrox serve --models-dir DIR`: the models the folder holds, each a
// `.gguf` file served under its name without `.gguf`. The folder is held to
// the plugins' trust rule (ferrox/trusted_folder.h: it and every folder above
// it owned by root or the running user, writable by nobody else) and so is
// each file (a regular file of root or the running user, not group- or
// world-writable); a symlink is followed only to a file inside the folder.
// Anything else refuses the start, naming the file.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"
#include "model_registry.h"

namespace ferrox::server {

inline constexpr size_t kMaxModelsDirEntries = 4096;

Expected<std::vector<ModelSpec>> scan_models_dir(const std::filesystem::path& dir);

// One model file named outside a folder scan (a server.models entry's path),
// held to the same rule: its real folder and every one above it, then the
// file. `who` starts every message ("server.models[0] (f.yaml:3)").
struct TrustedModelFile {
    std::filesystem::path real;  // symlinks resolved
    uint64_t bytes = 0;
};
Expected<TrustedModelFile> trusted_model_file(const std::filesystem::path& file,
                                              std::string_view who);

// True when `p` lies inside `folder` (both canonical).
bool path_inside(const std::filesystem::path& folder, const std::filesystem::path& p);

}  // namespace ferrox::server
