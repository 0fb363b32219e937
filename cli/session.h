// What every command needs before it can work: the configuration, the log
// level, and the plugins it selects -- loaded once, with one error path.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "exit_status.h"
#include "ferrox/config.h"
#include "ferrox/expected.h"
#include "ferrox/plugin_loader.h"

namespace ferrox::cli {

// Options every subcommand accepts.
struct CommonOptions {
    std::optional<std::filesystem::path> config_path;
    std::vector<std::filesystem::path> plugin_dirs;
    std::string log_level;   // empty: the config's
    std::string log_format;  // empty: the config's
};

struct Session {
    Config config;
    PluginSet plugins;
};

Expected<Config> load_session_config(const CommonOptions& options);
Expected<Session> open_session(const CommonOptions& options);

}  // namespace ferrox::cli
