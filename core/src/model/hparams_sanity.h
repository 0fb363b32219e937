// Hyper-parameters that parse but make no sense: refused at load, naming the
// key, instead of producing NaN logits, a division by zero or an index past a
// tensor at the first token.
#pragma once

#include <string>

#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

// `prefix` is the architecture's key prefix ("llama", "gemma3").
Expected<void> check_hparams_sane(const gguf::File& file, const Hparams& hp,
                                  const std::string& prefix);

}  // namespace ferrox::model
