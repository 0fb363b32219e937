// Finding a text in what a sequence generates, token by token, where a token
// boundary may split it or it may begin in the middle of a token: only the
// last (longest pattern - 1) bytes are kept between tokens, so each token
// costs its own length plus that, whatever the answer's length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ferrox/sampler_chain.h"

namespace ferrox::sampling_detail {

class TextWatch {
  public:
    struct Hit {
        size_t pattern;    // its index
        std::string from;  // the pattern's text and every byte after it in this token
    };

    // `patterns` bounds what is kept; feed() may be given any of their subsets.
    explicit TextWatch(std::span<const LazyTrigger> patterns);
    // The next token's bytes: the earliest pattern that ends inside them (an
    // `at_start` one only where the answer's first non-blank byte starts it).
    std::optional<Hit> feed(std::string_view piece, std::span<const LazyTrigger> patterns);
    void clear();

  private:
    size_t keep_ = 0;
    std::string tail_;     // the last bytes before this token, at most keep_
    uint64_t seen_ = 0;    // bytes generated so far
    uint64_t blanks_ = 0;  // leading blanks of the answer
    bool only_blanks_ = true;
    std::string text_;  // scratch: tail_ + the piece
};

}  // namespace ferrox::sampling_detail
