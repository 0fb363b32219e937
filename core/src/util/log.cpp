#include "ferrox/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "ferrox/escape.h"

namespace ferrox {
namespace {

// Messages quote file names, GGUF keys and plugin text: each passes through
// escape_text on its way to the terminal, here, once, for every caller.
class EscapingSink final : public spdlog::sinks::sink {
  public:
    explicit EscapingSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}
    void log(const spdlog::details::log_msg& msg) override {
        const std::string text =
            escape_text(std::string_view(msg.payload.data(), msg.payload.size()), EscapeFor::Text);
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
