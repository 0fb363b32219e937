// Logging through the host table the core lends: the plugin links no logger
// of its own, so its lines reach the core's sinks (spdlog) with the core's
// format and level filter.
#pragma once

#include <cstddef>
#include <string>

#include "ferrox/backend_abi.h"

namespace ferrox::cuda {

class HostLog {
  public:
    HostLog() = default;
    // A null host, or one whose table is too short to hold `log`, logs nowhere.
    explicit HostLog(const ferrox_host* host) {
        if (host != nullptr &&
            host->struct_size >= offsetof(ferrox_host, log) + sizeof(host->log)) {
            context_ = host->context;
            log_ = host->log;
        }
    }

    void write(ferrox_log_level level, const std::string& message) const {
        if (log_ != nullptr) log_(context_, level, message.c_str());
    }
    void debug(const std::string& message) const { write(FERROX_LOG_DEBUG, message); }
    void info(const std::string& message) const { write(FERROX_LOG_INFO, message); }
    void warn(const std::string& message) const { write(FERROX_LOG_WARN, message); }
    void error(const std::string& message) const { write(FERROX_LOG_ERROR, message); }

  private:
    void* context_ = nullptr;
    void (*log_)(void*, ferrox_log_level, const char*) = nullptr;
};

}  // namespace ferrox::cuda
