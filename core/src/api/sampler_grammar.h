// ferrox_sampler_params' grammar members (API 0.6) in the core's terms: the
// GBNF text or the JSON schema checked against ferrox.h's bounds and
// compiled, with errors that name the place (line:column, JSON pointer).
#pragma once

#include <memory>

#include "ferrox/expected.h"
#include "ferrox/ferrox.h"
#include "ferrox/grammar/gbnf.h"

namespace ferrox::api {

// The grammar `params` asks for; nullptr when it asks for none.
Expected<std::shared_ptr<const grammar::Grammar>> sampler_grammar(
    const ferrox_sampler_params& params);

}  // namespace ferrox::api
