// The grammar's filter over a chain's candidates, shared by grammar_stage and
// the lazy grammar stage once it is armed.
#pragma once

#include <string>
#include <vector>

#include "ferrox/grammar/matcher.h"
#include "ferrox/sampler_chain.h"

namespace ferrox::sampling_detail {

// Keeps the candidates whose bytes can continue the matcher's text (the order
// stays; the probabilities must be recomputed). Sets `error` when none is left.
void keep_grammar_allowed(grammar::GrammarMatcher& matcher, std::vector<uint64_t>& mask,
                          Candidates& c, std::string& error);

}  // namespace ferrox::sampling_detail
