// The element ops a resident forward pass issues (ABI 1.2), for tables that
// list them without a model (`ferrox backends`).
#pragma once

#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"

namespace ferrox::model {

// The kinds a KV cache may hold (ModelOptions / EngineOptions kv_kind).
inline constexpr ferrox_kind kKvCacheKinds[] = {FERROX_KIND_F32, FERROX_KIND_F16};

struct ResidentElementOp {
    ferrox_op op;
    ferrox_kind kind;  // the element kind: f32 activations, or the KV cache's
    bool operator==(const ResidentElementOp&) const = default;
};

// Every (op, kind) a resident pass can issue besides the weight products and
// GET_ROWS (keyed by their weight's kind), in the order a pass first issues
// them. Recorded from the resident steps themselves, driven through each entry
// the decoder calls with every variant a pass takes (norms fused or apart,
// each architecture row's FFN activation, each KV cache kind), so the list
// cannot drift from what a pass issues.
FERROX_API std::vector<ResidentElementOp> resident_element_ops();

}  // namespace ferrox::model
