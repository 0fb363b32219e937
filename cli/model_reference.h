// A model argument (-m, server.model) that names a hub reference instead of a
// file: resolved to the stored file with no network at all, unless --pull asks
// for the download first (`ferrox pull`'s rules; docs/operations.md).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/hub/pull.h"

namespace ferrox::cli {

struct ModelSourceFlags {
    bool pull = false;     // --pull: fetch a reference that is not in the store yet
    bool offline = false;  // --offline (or FERROX_OFFLINE=1): never touch the network
    bool quiet = false;    // --quiet: no progress bar (pull only)
};

// --pull and --offline on run, chat and serve.
void add_model_source_flags(CLI::App& cmd, ModelSourceFlags& flags);

// The model store ($FERROX_MODELS, ...), created when `create` (pull only:
// a lookup never creates it).
Expected<hub::ModelStore> open_model_store(bool create);

// When `model` is a reference (hf://..., or OWNER/REPO:QUANT naming no file
// here -- in `relative_to` for a relative path, else the working folder),
// replaces it with the path of its stored file, pulling it first with --pull.
// Returns the exit status of a failure (logged, naming `flag`), kExitOk otherwise.
int resolve_model_argument(std::string& model, const ModelSourceFlags& flags, std::string_view flag,
                           const std::filesystem::path& relative_to = {});

// The pull itself, with a progress bar on a terminal unless `quiet`; logs the
// failure and returns its exit status in `status`.
Expected<hub::PullResult> pull_with_progress(const hub::ModelRef& ref, const hub::ModelStore& store,
                                             const ModelSourceFlags& flags, int* status);

// {ref, repo, store, model, bytes, files: [{name, path, bytes, sha256, cached,
// resumed_from, downloaded}]}: pull --json and models show/rm --json.
nlohmann::json pulled_json(const hub::PullResult& result, const hub::ModelStore& store);

}  // namespace ferrox::cli
