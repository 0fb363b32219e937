// What a sampler is built from (SamplerParams: the settings `ferrox run`,
// `ferrox chat` and ferrox_sampler_params share) and greedy's argmax. The
// sampler itself is SamplerChain (ferrox/sampler_chain.h).
#pragma once

#include <cstdint>
#include <span>

#include "ferrox/api.h"

namespace ferrox {

struct SamplerParams {
    float temperature = 0.8f;     // <= 0: greedy (argmax)
    uint32_t top_k = 40;          // 0: off
    float top_p = 0.95f;          // 1: off
    float min_p = 0.05f;          // 0: off
    float repeat_penalty = 1.0f;  // 1: off; divides positive logits, multiplies negative
    uint32_t repeat_last_n = 64;  // how much history the penalty sees
    uint64_t seed = 0;
};

// Greedy: the index of the largest logit (the lowest index on ties).
FERROX_API int32_t argmax(std::span<const float> logits);

}  // namespace ferrox
