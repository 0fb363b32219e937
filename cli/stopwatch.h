// Wall-clock timing for the commands that report seconds (run, batched-bench).
#pragma once

#include <chrono>

namespace ferrox::cli {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace ferrox::cli
