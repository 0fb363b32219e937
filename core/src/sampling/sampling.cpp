#include "ferrox/sampling.h"

#include <algorithm>

namespace ferrox {

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace ferrox
