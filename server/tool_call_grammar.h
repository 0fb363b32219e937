// The grammar that makes an answer tool calls: tool_choice "required" (any
// of the tools) or a named function, in the spelling of the model's family
// (docs/structured-output.md, "Forced calls per family"):
//   - JSON between fixed markers: Hermes / Qwen, SmolLM3, Llama 3, Mistral,
//     Granite, Functools; DeepSeek (R1's fenced or V3.1's bare arguments,
//     as the template writes them); harmony (gpt-oss's commentary channel);
//   - tagged parameters: Qwen3-Coder (<parameter=K>) and GLM (<arg_key>),
//     whose plain-string parameters are written bare (text_parameters).
// Each call's arguments follow its tool's parameter schema (structured_output.h's
// converter: what it cannot enforce is refused with the JSON pointer).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "chat_tools.h"
#include "ferrox/chat_format/answer.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/grammar/gbnf.h"
#include "ferrox/sampler_chain.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::server {

// What the grammar is for.
enum class CallGrammarMode {
    Forced,  // the whole answer is the calls (tool_choice "required" or a named function)
    // The calls from their trigger on (tool_choice "auto"): a lazy grammar
    // whose sentences begin with the family's trigger text (docs/grammar.md,
    // "Lazy grammars"); null for a family whose grammar does not begin with
    // its trigger (parse-only).
    Lazy,
};

// `starts_in_reasoning` (Forced only): the prompt opened a reasoning block,
// so the grammar first closes it (the family's reasoning_close) -- a forced
// call has no reasoning. Throws ApiError naming the field at fault.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(
    const DetectedChatFamily& family, const ChatToolFields& tools, bool starts_in_reasoning,
    CallGrammarMode mode = CallGrammarMode::Forced);

// tool_choice "auto": the lazy call grammar armed at the family's
// tool_triggers (Llama 3's `{"name"` only at the answer's start; a trigger
// that is one control token, such as `<|python_tag|>`, also by its id).
// `grammar` is null where the family has no lazy builder, or a tool's
// parameter schema cannot be enforced (auto then stays parse-only). Triggers
// inside the answer's reasoning block do not count (`starts_in_reasoning`:
// the prompt opened it).
LazyGrammarParams lazy_tool_call_grammar(const DetectedChatFamily& family,
                                         const ChatToolFields& tools, bool starts_in_reasoning,
                                         const Tokenizer& tokenizer,
                                         const grammar::TokenTrie& vocab);

// The parameters `family` writes bare and the parser must read as text
// (ChatParseOptions::text_parameters): for qwen3-coder and glm, those whose
// schema is a plain string or an enum / const of strings -- the same test
// the grammar applies. Empty for the other families.
ChatTextParameters text_parameters(ChatFamily family, const ChatToolFields& tools);

}  // namespace ferrox::server
