// Stop strings over streamed text: a stop string may arrive split across
// tokens, so text that could still grow into one is held back until it
// either completes the stop (the generation ends before it) or cannot.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferrox::server {

class StopScanner {
  public:
    explicit StopScanner(std::vector<std::string> stops);

    struct Step {
        std::string emit;      // text that may be sent now
        bool stopped = false;  // a stop string completed; emit ends before it
    };
    // `text` is the next piece of output, whole UTF-8 characters.
    Step push(std::string_view text);
    // The end of the output without a stop: whatever was held back.
    std::string flush();

  private:
    std::vector<std::string> stops_;
    std::string held_;
};

}  // namespace ferrox::server
