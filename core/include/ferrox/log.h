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

// "text": `[time] [level] message` lines. "json": one JSON object a line,
// {"time", "level", "msg"}, for log shippers; a record (log_record) is an
// object of its own fields instead of a message. An unknown name is an error.
FERROX_API Expected<void> set_log_format(std::string_view format);
FERROX_API bool log_format_json();

// One structured record at info level: `text_line` in text format, else
// {"time", "level", "event": event, <json_members>}, where json_members is
// the comma-separated members of a JSON object (no braces), already encoded.
FERROX_API void log_record(std::string_view event, std::string_view text_line,
                           std::string_view json_members);

}  // namespace ferrox
