// Hyper-parameters that parse but make no sense: refused at load, naming the
// key, instead of producing NaN logits, a division by zero or an index past a
// tensor at the first token.
#pragma once

#include <string>
#include <string_view>

#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

// The error for a metadata key the file gets wrong, read_hparams' and the
// sanity checks' alike: "<file>: metadata key '<key>': <why>".
Error refuse(const gguf::File& f, std::string_view key, std::string_view why);

// `prefix` is the architecture's key prefix ("llama", "gemma3").
Expected<void> check_hparams_sane(const gguf::File& file, const Hparams& hp,
                                  const std::string& prefix);

}  // namespace ferrox::model
