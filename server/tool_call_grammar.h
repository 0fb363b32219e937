// The grammar that makes an answer tool calls: tool_choice "required" (any
// of the tools) or a named function, for the families whose calls are JSON
// between fixed markers (Hermes / Qwen, SmolLM3, Llama 3, Mistral, Granite,
// Functools). Each call's arguments follow its tool's parameter schema
// (structured_output.h's converter: what it cannot enforce is refused with
// the tool's JSON pointer). Other families are refused by name: their calls
// are not JSON (XML parameters, harmony headers, GLM's arg tags) and ferrox
// does not force them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "chat_tools.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/grammar/gbnf.h"

namespace ferrox::server {

// `starts_in_reasoning`: the prompt opened a reasoning block, so the grammar
// first closes it (the family's reasoning_close) -- a forced call has no
// reasoning. Throws ApiError naming the field at fault.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(ChatFamily family,
                                                          const ChatToolFields& tools,
                                                          bool starts_in_reasoning);

}  // namespace ferrox::server
