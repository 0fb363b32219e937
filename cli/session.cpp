#include "session.h"

#include "ferrox/log.h"

namespace ferrox::cli {

Expected<Config> load_session_config(const CommonOptions& options) {
    auto config = load_config({options.config_path, {}});
    if (!config) return config;
    const std::string& level = options.log_level.empty() ? config->log_level : options.log_level;
    if (auto set = set_log_level(level); !set) return set.error();
    logger().debug("configuration from {}", config->source);
    return config;
}

Expected<Session> open_session(const CommonOptions& options) {
    auto config = load_session_config(options);
    if (!config) return config.error();
    LoaderOptions loader;
    loader.plugin_dirs = options.plugin_dirs;
    PluginSet plugins = PluginSet::load(*config, loader);
    // A section its plugin refused is a configuration error (exit 2), required or not.
    for (const PluginRecord* r : plugins.option_errors()) return Error(r->reason);
    return Session{std::move(*config), std::move(plugins)};
}

}  // namespace ferrox::cli
