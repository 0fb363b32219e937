#include "stop_strings.h"

#include <algorithm>

namespace ferrox::server {

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopScanner::Step StopScanner::push(std::string_view text) {
    held_ += text;
    // The stop that completes first, as if the text came one byte at a time
    // (so where the pieces split cannot change the answer); of two that end
    // on the same byte, the longer.
    size_t first = std::string::npos, first_end = std::string::npos;
    for (const std::string& stop : stops_) {
        const size_t at = held_.find(stop);
        if (at == std::string::npos) continue;
        const size_t end = at + stop.size();
        if (end < first_end || (end == first_end && at < first)) first = at, first_end = end;
    }
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
