// Token sampling: greedy, temperature, top-k, top-p, min-p and a repetition
// penalty, drawn with a seeded RNG -- the same seed and logits always give
// the same token. Plus stop-string matching for generated text.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

class FERROX_API Sampler {
  public:
    explicit Sampler(SamplerParams params);

    // Picks the next token from `logits` (vocab floats); `history` is every
    // token so far (prompt included) for the repetition penalty.
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

    const SamplerParams& params() const { return params_; }

    // The filters, public so they can be tested one by one. Each keeps the
    // candidates sorted by logit, highest first.
    struct Candidate {
        int32_t id;
        float logit;
        float p;  // set by softmax
    };
    static void apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> history,
                                     float penalty, uint32_t last_n);
    static void keep_top_k(std::vector<Candidate>& c, uint32_t k);
    static void softmax(std::vector<Candidate>& c);                  // sets p (c sorted)
    static void keep_top_p(std::vector<Candidate>& c, float p);      // needs p
    static void keep_min_p(std::vector<Candidate>& c, float min_p);  // needs p

  private:
    double uniform();  // [0, 1), same sequence on every platform for a seed

    SamplerParams params_;
    std::mt19937_64 rng_;
    std::vector<float> work_;
    std::vector<Candidate> candidates_;
};

// Greedy: the index of the largest logit (the lowest index on ties).
FERROX_API int32_t argmax(std::span<const float> logits);

// Where the earliest of `stops` starts in `text`, or npos. Also tells how many
// trailing bytes might still become a stop string (hold them back from output).
struct StopMatch {
    size_t found = std::string::npos;
    size_t hold = 0;
};
FERROX_API StopMatch find_stop(std::string_view text, std::span<const std::string> stops);

}  // namespace ferrox
