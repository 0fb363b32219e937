// The core's logger: spdlog on stderr. Plugins reach it through ferrox_host.log.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox {

FERROX_API spdlog::logger& logger();
// "trace|debug|info|warn|error|off"; an unknown name is an error.
FERROX_API Expected<void> set_log_level(std::string_view level);

}  // namespace ferrox
