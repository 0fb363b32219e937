// The KV cache's element kinds: keys and values each hold one of
// kKvCacheKinds (model/resident_ops.h), and the two may differ, as
// llama.cpp's -ctk and -ctv let them (q8_0 keys over f16 values is common).
#pragma once

#include <string>

#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"

namespace ferrox::model {

struct KvKinds {
    ferrox_kind key = FERROX_KIND_F32;
    ferrox_kind value = FERROX_KIND_F32;
    static constexpr KvKinds both(ferrox_kind kind) { return {kind, kind}; }
    constexpr bool mixed() const { return key != value; }
    bool operator==(const KvKinds&) const = default;
};

// "q8_0" when keys and values hold one kind, else "K q8_0 / V f16": how
// logs, errors and reports name a cache.
inline std::string kv_kinds_name(KvKinds kinds) {
    if (!kinds.mixed()) return std::string(kind_name(kinds.key));
    return "K " + std::string(kind_name(kinds.key)) + " / V " + std::string(kind_name(kinds.value));
}

}  // namespace ferrox::model
