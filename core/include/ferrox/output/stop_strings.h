// Stop strings over streamed text: a stop string may arrive split across
// tokens, so text that could still grow into one is held back until it
// either completes the stop (the output ends before it) or cannot.
//
// The rule: the output ends at the stop string that *completes first*, as if
// the text came one byte at a time; of two completing on the same byte, the
// longer (so the one that starts first). Why earliest end and not earliest
// start: a streaming reader cannot know about a stop that has not finished
// yet, so earliest start would make the answer depend on how the text was
// split into tokens (stops "abcd" and "bc" over "abcd": under earliest start
// one token "abcd" gives "", the pieces "abc","d" give "a"). Earliest end
// gives "a" for every split: what a byte-by-byte scan of the whole text gives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"

namespace ferrox::output {

class FERROX_API StopScanner {
  public:
    // Empty strings are dropped (they would stop before any output).
    explicit StopScanner(std::vector<std::string> stops = {});

    struct Step {
        std::string emit;      // text that may be shown now
        bool stopped = false;  // a stop string completed; emit ends before it
    };
    // `text` is the next piece of output. After a stop, push gives nothing.
    Step push(std::string_view text);
    // The end of the output: whatever was held back (nothing after a stop).
    std::string flush();

    bool stopped() const { return stopped_; }
    // The stop string that ended the output ("" until one did): Anthropic's
    // Messages API names it in its answer.
    const std::string& matched() const { return matched_; }
    bool empty() const { return stops_.empty(); }

  private:
    std::vector<std::string> stops_;
    std::string held_, matched_;
    bool stopped_ = false;
};

}  // namespace ferrox::output
