// What every command needs before it can work: the configuration, the log
// level, and the plugins it selects -- loaded once, with one error path.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ferrox/config.h"
#include "ferrox/expected.h"
#include "ferrox/plugin_loader.h"

namespace ferrox::cli {

// Options every subcommand accepts.
struct CommonOptions {
    std::optional<std::filesystem::path> config_path;
    std::vector<std::filesystem::path> plugin_dirs;
    std::string log_level;  // empty: the config's
};

struct Session {
    Config config;
    PluginSet plugins;
};

Expected<Config> load_session_config(const CommonOptions& options);
Expected<Session> open_session(const CommonOptions& options);

// Exit codes, documented in --help.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // a required backend failed, a run failed
inline constexpr int kExitBadInput = 2;  // bad flags, config or model file

}  // namespace ferrox::cli
