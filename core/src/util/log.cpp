#include "ferrox/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ferrox {

spdlog::logger& logger() {
    // stderr only: stdout carries generated text and --json documents.
    static const std::shared_ptr<spdlog::logger> instance = [] {
        auto l = spdlog::stderr_color_mt("ferrox");
        l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
        l->set_level(spdlog::level::info);
        return l;
    }();
    return *instance;
}

Expected<void> set_log_level(std::string_view level) {
    const spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
    // from_str maps unknown names to "off"; only "off" itself may mean off.
    if (parsed == spdlog::level::off && level != "off")
        return make_error("unknown log level '{}' (trace, debug, info, warn, error, off)", level);
    logger().set_level(parsed);
    return {};
}

}  // namespace ferrox
