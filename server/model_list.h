// The models a many-models server serves (docs/server.md, "Many models"): the
// configuration's server.models entries, then every file of models_dir that
// no entry names. Each id (an entry's `alias` items, else its file name
// without .gguf) names one model: a second claim on an id refuses the start,
// naming both. Every file passes models_dir's trust rule (models_dir.h).
#pragma once

#include <vector>

#include "ferrox/config.h"
#include "ferrox/expected.h"
#include "model_registry.h"

namespace ferrox::server {

Expected<std::vector<ModelSpec>> served_model_specs(const ServerConfig& s);

}  // namespace ferrox::server
