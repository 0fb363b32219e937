// The text side of one sequence's output: token pieces in, text safe to show
// out. A UTF-8 character split across tokens waits for its last byte, then
// the stop strings see it (StopScanner: earliest end). What is held back --
// half a character, or text that may begin a stop string -- comes out at
// finish() when no stop completed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/output/stop_strings.h"
#include "ferrox/tokenizer/utf8_streamer.h"

namespace ferrox::output {

class FERROX_API TextStream {
  public:
    explicit TextStream(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {}

    using Step = StopScanner::Step;  // emit: the text to show; stopped: a stop string completed
    Step push(std::string_view piece) { return stops_.push(utf8_.feed(piece)); }
    // The end of the stream: the unfinished character (as is) and the held
    // text, unless a stop string completes in them.
    Step finish();

    bool stopped() const { return stops_.stopped(); }
    const std::string& stop_matched() const { return stops_.matched(); }  // "" before a stop

  private:
    Utf8Streamer utf8_;
    StopScanner stops_;
};

}  // namespace ferrox::output
