#include "ferrox/output/stop_strings.h"

#include <algorithm>

namespace ferrox::output {

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopScanner::Step StopScanner::push(std::string_view text) {
    if (stopped_) return {};
    if (stops_.empty()) return {std::string(text), false};
    held_ += text;
    // Earliest end, then the longer (the header says why).
    size_t first = std::string::npos, first_end = std::string::npos;
    const std::string* winner = nullptr;
    for (const std::string& stop : stops_) {
        const size_t at = held_.find(stop);
        if (at == std::string::npos) continue;
        const size_t end = at + stop.size();
        if (end < first_end || (end == first_end && at < first))
            first = at, first_end = end, winner = &stop;
    }
    if (winner) {
        matched_ = *winner;
        Step step{held_.substr(0, first), true};
        held_.clear();
        stopped_ = true;
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

}  // namespace ferrox::output
