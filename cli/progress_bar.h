// A download's progress on one stderr line, redrawn at most 10 times a second,
// and only when stderr is a terminal: logs and pipes get no carriage returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ferrox::cli {

class ProgressBar {
  public:
    // Draws only when `wanted` (no --quiet) and stderr is a terminal.
    explicit ProgressBar(bool wanted);
    void update(const std::string& file, uint64_t done, uint64_t total);
    void finish();  // ends the line drawn, if any
    ~ProgressBar() { finish(); }

  private:
    bool enabled_;
    bool drawn_ = false;
    std::string file_;
    std::chrono::steady_clock::time_point started_, last_draw_;
    uint64_t first_done_ = 0;
    uint64_t last_done_ = UINT64_MAX;  // the bytes the line shows
};

}  // namespace ferrox::cli
