// `ferrox serve --models-dir DIR` and `server.models` (docs/server.md, "Many
// models"): the models behind one server, each loaded through Engine::open on its
// first request by the registry (server/model_registry.h) and served by a
// scheduler (or an embedder) of its own.
#pragma once

#include <memory>
#include <string>

#include "ferrox/config.h"
#include "ferrox/expected.h"
#include "metrics.h"
#include "model_registry.h"
#include "session.h"

namespace ferrox::cli {

struct ServedModels {
    std::unique_ptr<server::ModelLoader> loader;
    std::unique_ptr<server::ModelRegistry> registry;
};

// The server.models entries and the models_dir folder, checked and trusted,
// and the registry over them with server.models_memory (0: MemAvailable now)
// and server.keep_alive; each entry's model loads with its own settings.
Expected<ServedModels> open_models_dir(const CommonOptions& common, const ServerConfig& s,
                                       const std::string& chat_template, unsigned threads,
                                       server::Metrics& metrics);

}  // namespace ferrox::cli
