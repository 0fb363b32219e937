// `ferrox serve --models-dir DIR`: the models the folder holds, each a
// `.gguf` file served under its name without `.gguf`. The folder is held to
// the plugins' trust rule (ferrox/trusted_folder.h: it and every folder above
// it owned by root or the running user, writable by nobody else) and so is
// each file (a regular file of root or the running user, not group- or
// world-writable); a symlink is followed only to a file inside the folder.
// Anything else refuses the start, naming the file.
#pragma once

#include <filesystem>
#include <vector>

#include "ferrox/expected.h"
#include "model_registry.h"

namespace ferrox::server {

inline constexpr size_t kMaxModelsDirEntries = 4096;

Expected<std::vector<ModelSpec>> scan_models_dir(const std::filesystem::path& dir);

}  // namespace ferrox::server
