// The plugins' trust rule for a folder, for other stores that must hold to it
// (the model store, hub/): the folder and every folder above it are owned by
// root or the running user and writable by nobody else (docs/security.md).
#pragma once

#include <filesystem>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox {

// An O_PATH descriptor of `folder` (symlinks resolved), each folder from / down
// opened relative to the one above with O_NOFOLLOW and checked; the caller owns
// and closes it. The Error names the folder that failed and its owner or mode.
FERROX_API Expected<int> open_trusted_folder_fd(const std::filesystem::path& folder);

}  // namespace ferrox
