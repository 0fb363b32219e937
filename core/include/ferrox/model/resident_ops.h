// The element ops a resident forward pass issues (ABI 1.2), for tables that
// list them without a model (`ferrox backends`).
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"

namespace ferrox::model {

// The kinds a K or V cache may hold (ModelOptions / EngineOptions kv_kinds).
// Q8_0 and Q4_0 store each head's row as ggml blocks of 32 (head dims must be
// whole blocks: check_kv_cache_shape, model.h).
inline constexpr ferrox_kind kKvCacheKinds[] = {FERROX_KIND_F32, FERROX_KIND_F16, FERROX_KIND_Q8_0,
                                                FERROX_KIND_Q4_0};
// The same kinds as the flags and keys spell them (--kv-type, -ctk, -ctv, the
// server's kv_type): lower case, in kKvCacheKinds' order.
inline constexpr std::array<std::string_view, 4> kKvCacheTypeNames{"f32", "f16", "q8_0", "q4_0"};
static_assert(std::size(kKvCacheKinds) == kKvCacheTypeNames.size());
static_assert(kind_traits(kKvCacheTypeNames[0])->id == kKvCacheKinds[0] &&
                  kind_traits(kKvCacheTypeNames[1])->id == kKvCacheKinds[1] &&
                  kind_traits(kKvCacheTypeNames[2])->id == kKvCacheKinds[2] &&
                  kind_traits(kKvCacheTypeNames[3])->id == kKvCacheKinds[3],
              "kKvCacheTypeNames spells kKvCacheKinds");

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
