#include "text_watch.h"

#include <algorithm>

namespace ferrox::sampling_detail {

namespace {
bool watch_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
}  // namespace

TextWatch::TextWatch(std::span<const LazyTrigger> patterns) {
    for (const LazyTrigger& p : patterns) keep_ = std::max(keep_, p.text.size());
    if (keep_ > 0) --keep_;  // a whole pattern in the tail was found when it ended
}

void TextWatch::clear() {
    tail_.clear();
    seen_ = blanks_ = 0;
    only_blanks_ = true;
}

std::optional<TextWatch::Hit> TextWatch::feed(std::string_view piece,
                                              std::span<const LazyTrigger> patterns) {
    for (size_t i = 0; i < piece.size() && only_blanks_; ++i) {
        if (watch_blank(piece[i]))
            ++blanks_;
        else
            only_blanks_ = false;
    }
    text_.assign(tail_);
    text_.append(piece);
    const uint64_t base = seen_ - tail_.size();  // where text_ starts in the answer
    size_t best = std::string::npos, which = 0;
    for (size_t k = 0; k < patterns.size(); ++k) {
        const std::string& p = patterns[k].text;
        if (p.empty()) continue;
        size_t at = std::string::npos;
        if (patterns[k].at_start) {
            // Only the answer's first non-blank byte may start it.
            if (!only_blanks_ && blanks_ >= base) {
                const auto local = static_cast<size_t>(blanks_ - base);
                if (local + p.size() <= text_.size() && text_.compare(local, p.size(), p) == 0)
                    at = local;
            }
        } else {
            at = text_.find(p);
            while (at != std::string::npos && at + p.size() <= tail_.size())
                at = text_.find(p, at + 1);
        }
        // One ending inside the tail was found with an earlier token.
        if (at != std::string::npos && at + p.size() > tail_.size() && at < best) {
            best = at;
            which = k;
        }
    }
    seen_ += piece.size();
    std::optional<Hit> hit;
    if (best != std::string::npos) hit = Hit{which, text_.substr(best)};
    const size_t keep = std::min(keep_, text_.size());
    tail_.assign(text_, text_.size() - keep, keep);
    return hit;
}

}  // namespace ferrox::sampling_detail
