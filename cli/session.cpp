#include "session.h"

#include "ferrox/log.h"

namespace ferrox::cli {

Expected<Config> load_session_config(const CommonOptions& options) {
    // A refusal names the flag that chose what was refused (exit_status.h: usage).
    auto config = load_config({options.config_path, {}});
    if (!config && options.config_path) return make_error("--config: {}", config.error().message());
    if (!config) return config;
    const bool flag = !options.log_level.empty();
    if (auto set = set_log_level(flag ? options.log_level : config->log_level); !set)
        return flag ? make_error("--log-level: {}", set.error().message()) : set.error();
    const bool format_flag = !options.log_format.empty();
    if (auto set = set_log_format(format_flag ? options.log_format : config->log_format); !set)
        return format_flag ? make_error("--log-format: {}", set.error().message()) : set.error();
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
