// The tensor rules (ferrox/model/tensor_rules.h) with where binding puts
// each tensor: the one list both are read from.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "ferrox/model/tensor_rules.h"
#include "weights.h"

namespace ferrox::model {

using LayerMatrix = std::optional<WeightMatrix> LayerWeights::*;

// Where a bound tensor goes.
using TensorSlot = std::variant<std::monostate,                        // a fused tensor's parts
                                const gguf::Tensor * ModelWeights::*,  // read by rows
                                std::optional<WeightMatrix> ModelWeights::*,  // the output matrix
                                std::vector<float> ModelWeights::*,           // the output norm
                                std::vector<float> RopeFactors::*,            // per-pair divisors
                                LayerMatrix, std::vector<WeightMatrix> LayerWeights::*,
                                std::vector<float> LayerWeights::*>;

struct TensorBinding {
    TensorRule rule;
    TensorSlot slot;
    std::array<LayerMatrix, 3> part_slots{};  // a fused tensor's parts, as rule.parts
    // A fused Experts tensor's parts: each expert's rows split as rule.parts.
    std::array<std::vector<WeightMatrix> LayerWeights::*, 3> expert_part_slots{};
};

std::vector<TensorBinding> tensor_table(const ArchSpec& spec);

}  // namespace ferrox::model
