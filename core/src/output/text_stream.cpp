#include "ferrox/output/text_stream.h"

namespace ferrox::output {

TextStream::Step TextStream::finish() {
    Step step = stops_.push(utf8_.flush());
    if (!step.stopped) step.emit += stops_.flush();
    return step;
}

}  // namespace ferrox::output
