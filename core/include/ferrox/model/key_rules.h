// The metadata keys an architecture's files are read for (`<arch>.` + the
// suffix): required, optional with the value that stands in, refused unless
// at its default, or read and not applied, derived from the row in one place
// (core/src/model/key_rules.cpp). `ferrox architectures` prints the list;
// ctest holds read_hparams to it by tracing its reads (KeyTrace), so the list
// cannot drift from the reader.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

struct KeyRule {
    std::string_view suffix;
    KeyUse use = KeyUse::Required;
    // Optional: what stands in when the key is absent; Refused: the only value
    // accepted (a value or a key name, as text).
    std::string fallback;
    // When the rule applies, if not always ("with experts", ...).
    std::string_view when;
};

FERROX_API std::vector<KeyRule> key_rules(const ArchSpec& spec);
FERROX_API std::string_view key_use_name(KeyUse use);

}  // namespace ferrox::model
