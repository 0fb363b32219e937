#include "ferrox/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "ferrox/escape.h"

namespace ferrox {
namespace {

constexpr const char* kTextPattern = "[%H:%M:%S.%e] [%^%l%$] %v";

std::atomic<bool> g_json{false};
// The record being logged on this thread (log_record), so that the sink
// writes its members instead of a message; the logger is synchronous.
thread_local const std::string_view* t_record_event = nullptr;
thread_local std::string_view t_record_members;

// UTC, milliseconds: 2026-12-06T17:30:00.123Z.
std::string iso_time(std::chrono::system_clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
    const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
    std::tm utc{};
    gmtime_r(&secs, &utc);
    char text[32];
    const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    return fmt::format("{}.{:03d}Z", std::string_view(text, n),
                       static_cast<int>(ms.count() % 1000));
}

std::string json_line(const spdlog::details::log_msg& msg) {
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    std::string out = fmt::format("{{\"time\":\"{}\",\"level\":\"{}\",", iso_time(msg.time),
                                  std::string_view(level.data(), level.size()));
    if (t_record_event != nullptr) {
        out += "\"event\":" + nlohmann::json(escape_text(*t_record_event, EscapeFor::Json)).dump();
        if (!t_record_members.empty()) out += ",";
        out += t_record_members;
    } else {
        const std::string_view text(msg.payload.data(), msg.payload.size());
        out += "\"msg\":" + nlohmann::json(escape_text(text, EscapeFor::Json)).dump();
    }
    return out + "}";
}

// Messages quote file names, GGUF keys and plugin text: each passes through
// escape_text on its way to the terminal, here, once, for every caller. In
// the json format every line is one JSON object (its strings escaped as JSON).
class EscapingSink final : public spdlog::sinks::sink {
  public:
    explicit EscapingSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}
    void log(const spdlog::details::log_msg& msg) override {
        const std::string text =
            g_json.load(std::memory_order_relaxed)
                ? json_line(msg)
                : escape_text(std::string_view(msg.payload.data(), msg.payload.size()),
                              EscapeFor::Text);
        spdlog::details::log_msg copy = msg;
        copy.payload = spdlog::string_view_t(text.data(), text.size());
        inner_->log(copy);
    }
    void flush() override { inner_->flush(); }
    void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
    void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
        inner_->set_formatter(std::move(formatter));
    }

  private:
    std::shared_ptr<spdlog::sinks::sink> inner_;
};

}  // namespace

spdlog::logger& logger() {
    // stderr only: stdout carries generated text and --json documents.
    static const std::shared_ptr<spdlog::logger> instance = [] {
        auto color = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
        auto l = std::make_shared<spdlog::logger>("ferrox", std::make_shared<EscapingSink>(color));
        spdlog::register_logger(l);
        l->set_pattern(kTextPattern);
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

Expected<void> set_log_format(std::string_view format) {
    if (format != "text" && format != "json")
        return make_error("unknown log format '{}' (text, json)", escape_text(format));
    const bool json = format == "json";
    g_json = json;
    // A JSON line is the whole line: no time or level in front of it.
    logger().set_pattern(json ? "%v" : kTextPattern);
    return {};
}

bool log_format_json() { return g_json.load(std::memory_order_relaxed); }

void log_record(std::string_view event, std::string_view text_line, std::string_view json_members) {
    if (!logger().should_log(spdlog::level::info)) return;
    if (!log_format_json()) {
        logger().info("{}", text_line);
        return;
    }
    t_record_event = &event;
    t_record_members = json_members;
    logger().info("");
    t_record_event = nullptr;
    t_record_members = {};
}

}  // namespace ferrox
