#include "stop_strings.h"

#include <algorithm>

namespace ferrox::server {

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopScanner::Step StopScanner::push(std::string_view text) {
    held_ += text;
    size_t first = std::string::npos;
    for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
    if (first != std::string::npos) {
        Step step{held_.substr(0, first), true};
        held_.clear();
        return step;
    }
    // The longest tail of the held text that begins some stop string.
    size_t keep = 0;
    for (const std::string& stop : stops_) {
        const size_t most = std::min(stop.size() - 1, held_.size());
        for (size_t n = most; n > keep; --n)
            if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
                keep = n;
                break;
            }
    }
    Step step{held_.substr(0, held_.size() - keep), false};
    held_.erase(0, held_.size() - keep);
    return step;
}

std::string StopScanner::flush() {
    std::string rest;
    rest.swap(held_);
    return rest;
}

}  // namespace ferrox::server
