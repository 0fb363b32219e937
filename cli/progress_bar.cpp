#include "progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "output.h"

namespace ferrox::cli {

namespace {
constexpr auto kRedraw = std::chrono::milliseconds(100);
constexpr int kBarWidth = 24;
double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
}  // namespace

ProgressBar::ProgressBar(bool wanted) : enabled_(wanted && ::isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(const std::string& file, uint64_t done, uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (file != file_) {
        finish();
        file_ = file;
        started_ = now;
        first_done_ = done;  // a resumed part's bytes are not this run's speed
        last_done_ = UINT64_MAX;
    } else if ((now - last_draw_ < kRedraw && done != total) || done == last_done_) {
        return;  // curl reports progress far more often than a line is worth redrawing
    }
    last_draw_ = now;
    last_done_ = done;
    const double seconds = std::chrono::duration<double>(now - started_).count();
    const double speed = seconds > 0 ? mib(done - first_done_) / seconds : 0.0;
    const double fraction = total ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
    const int filled = static_cast<int>(fraction * kBarWidth);
    const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                            std::string(static_cast<size_t>(kBarWidth - filled), '.');
    std::fprintf(stderr, "\r\x1b[K%s [%s] %3d%% %.1f/%.1f MiB %.1f MiB/s", shown(file).c_str(),
                 bar.c_str(), static_cast<int>(fraction * 100), mib(done), mib(total), speed);
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::finish() {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
}

}  // namespace ferrox::cli
