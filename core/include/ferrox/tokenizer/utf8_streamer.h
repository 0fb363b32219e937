// Streaming output: a UTF-8 character may be split across tokens, so printing
// each token's piece as it comes can emit half a character. Feed pieces in;
// take out only the complete characters so far.
#pragma once

#include <string>
#include <string_view>

#include "ferrox/api.h"

namespace ferrox {

class FERROX_API Utf8Streamer {
  public:
    // Appends `bytes`; returns every complete character now available. A byte
    // that can never start or continue a valid character is passed through as
    // is, so a broken stream still shows up rather than stalling.
    std::string feed(std::string_view bytes);
    // What is left at the end of the stream (an unfinished character), emptied.
    std::string flush();
    bool has_pending() const { return !pending_.empty(); }

  private:
    std::string pending_;
};

}  // namespace ferrox
