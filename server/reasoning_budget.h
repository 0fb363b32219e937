// A chat request's thinking budget: `thinking_token_budget` (vLLM's name;
// llama-server's `thinking_budget_tokens` is accepted as an alias), else the
// server's --reasoning-budget. Once that many tokens were generated inside
// the answer's reasoning block, the sampler chain writes the family's
// reasoning_close (reasoning_budget_stage) and the answer goes on as content.
#pragma once

#include <cstdint>
#include <string>

#include "dialect.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/sampler_chain.h"
#include "request_fields.h"

namespace ferrox::server {

// -1: unlimited; 0: no reasoning (the close is written first when the prompt
// opened the block). Out of range, both names at once, or a budget for a
// family whose reasoning markers have no text (control tokens the watch
// cannot see) is a 400 naming the field. A family without reasoning takes
// the field and ignores it. `budget` < 0 in the result: no stage.
// The stage's parameters for `budget` tokens (< 0: none); `why_not` says why
// a budget cannot be enforced for this model (the params are then empty).
ReasoningBudgetParams reasoning_budget_params(int64_t budget, const ParseInput& in,
                                              ChatFamily family, bool starts_in_reasoning,
                                              std::string& why_not);

ReasoningBudgetParams read_reasoning_budget(Fields& body, const ParseInput& in, ChatFamily family,
                                            bool starts_in_reasoning);

}  // namespace ferrox::server
