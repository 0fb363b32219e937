// `ferrox pull`: a model reference's files fetched into the model store,
// resumed from a .part file, verified against the hub's SHA-256 and renamed
// into place only then; and the same reference found in the store offline.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/hub/http_client.h"
#include "ferrox/hub/model_ref.h"
#include "ferrox/hub/model_store.h"

namespace ferrox::hub {

// Why a pull failed, for the CLI's exit status (cli/exit_status.cpp).
enum class PullFailure {
    None,
    NotFound,      // the hub (404, or no such file in the repo) or the store has no such model
    Unauthorized,  // 401 / 403
    Store,         // the model store folder is unusable or fails the trust rule
    Remote,        // the hub answered something unusable: a hostile name, no digest, a bad status
    Network,       // no connection, or it broke off (the .part is kept for the next pull)
    Mismatch,      // the bytes' SHA-256 is not the published one (the .part is deleted)
    BadModel,      // verified, but not a GGUF file ferrox can read (removed)
    Busy,          // another pull holds the same .part
    Io,            // writing the store failed
};

struct PulledFile {
    std::string name;  // in the repo
    std::filesystem::path path;
    uint64_t bytes = 0;
    std::string sha256;
    bool cached = false;        // already in the store, nothing fetched
    uint64_t resumed_from = 0;  // bytes of a .part kept from an earlier pull
    uint64_t downloaded = 0;    // bytes fetched by this pull
};

struct PullResult {
    ModelRef ref;
    std::vector<PulledFile> files;  // a split model's shards in order
    const std::filesystem::path& model_path() const { return files.front().path; }
};

struct PullOptions {
    HubSettings hub;
    bool offline = false;  // never touch the network: the store's files or a NotFound
    // Bytes of `file` in place so far (resumed part included) and its size.
    std::function<void(const std::string& file, uint64_t done, uint64_t total)> on_progress;
    std::function<void(const std::string& file)> on_file_done;
};

// FERROX_OFFLINE set to 1 (or true/yes/on).
bool offline_from_environment();

Expected<PullResult> pull(const ModelRef& ref, const ModelStore& store, const PullOptions& options,
                          PullFailure* why);

// The reference among the store's files, with no network at all (run, chat
// and serve resolve a reference this way). NotFound names the store.
Expected<PullResult> find_in_store(const ModelRef& ref, const ModelStore& store, PullFailure* why);

// Deletes a stored model's files (with their digests and any .part), and the
// repo and owner folders when that leaves them empty.
Expected<PullResult> remove_from_store(const ModelRef& ref, const ModelStore& store,
                                       PullFailure* why);

}  // namespace ferrox::hub
