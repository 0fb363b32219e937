// What every chat-shaped dialect (Chat Completions, Responses, Messages) does
// alike once it has the conversation in the template's shape: render it with
// the tools and template variables, set up the one parser that reads the
// answer (chat_answer.h), build the grammar that forces a call under
// tool_choice required or named (tool_call_grammar.h), and count the
// reasoning's tokens. Each dialect only translates its own request and
// answer shapes around this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat_answer.h"
#include "chat_tools.h"
#include "dialect.h"
#include "ferrox/grammar/gbnf.h"
#include "ferrox/sampler_chain.h"

namespace ferrox::server {

struct ChatTurn {
    std::vector<int32_t> prompt;
    std::optional<ChatAnswer> answer;
    std::shared_ptr<const grammar::Grammar> forced_call;  // null unless a call is forced
    LazyGrammarParams lazy_call;       // tool_choice auto: armed at the family's trigger
    bool starts_in_reasoning = false;  // the prompt opened a reasoning block
};

// `messages` already checked (checked_messages), `tools` read; `id_seed`
// makes the answer's call ids differ across requests; `field` names the
// messages in a render error.
ChatTurn start_chat_turn(const nlohmann::ordered_json& messages, const ChatToolFields& tools,
                         const ParseInput& in, uint64_t id_seed, const char* field);

// Puts a forced call's grammar on the request's sampler chain. A JSON output
// format the request has (`grammar_is_format`) gives way: the answer is then
// a call, which the format does not describe (an agent with an output type
// and tool_choice required sends both). A GBNF grammar and a forced call
// exclude each other, refused naming `field` (the dialect's tool_choice).
void force_tool_call(std::shared_ptr<const grammar::Grammar> forced, const ParseInput& in,
                     GenerationRequest& g, const char* field, bool grammar_is_format);

// Puts the lazy call grammar of tool_choice auto on the chain, unless the
// request's own grammar or output format holds the whole answer.
void arm_lazy_tool_call(LazyGrammarParams lazy, const ParseInput& in, GenerationRequest& g);

// The answer's reasoning in tokens, counted by encoding its text again: the
// answer's tokens are not kept apart by where the parser put them.
size_t reasoning_tokens(const ChatAnswer& answer, const Tokenizer& tokenizer);

}  // namespace ferrox::server
