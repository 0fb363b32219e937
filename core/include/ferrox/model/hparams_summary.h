// What ferrox will run for a model, as one list of named facts: the file's
// hyper-parameters after reading, with the architecture row's facts folded
// in (core/src/model/architectures.cpp). `ferrox inspect` prints it, as text
// and as JSON, so both say the same thing.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

struct HparamFact {
    std::string name;  // snake_case, a JSON key
    std::variant<bool, int64_t, double, std::string> value;
};

// In reading order; facts that do not apply to the model (no experts, no
// window, no soft cap) are left out rather than shown as zeros.
FERROX_API std::vector<HparamFact> summarize(const Hparams& hp);

// One character per layer: 'G' global, 'L' sliding window, 'R' recurrent
// (Gated DeltaNet), lower case when the layer attends without RoPE ("LLLLLG"
// for Gemma 3's first six, "RRRG" for Qwen3.5's).
FERROX_API std::string layer_pattern(const Hparams& hp);

}  // namespace ferrox::model
