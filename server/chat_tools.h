// The tool and reasoning fields of a chat request -- OpenAI's `tools`,
// `tool_choice`, `parallel_tool_calls`, `reasoning_effort` and the
// `chat_template_kwargs` extension -- checked and bounded before anything is
// rendered or run. The tools reach the template as the client sent them
// (transformers' `tools` variable); the choice decides how the answer is
// read (chat_answer.h) and whether a grammar forces a call
// (tool_call_grammar.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "ferrox/chat_format/family.h"
#include "request_fields.h"

namespace ferrox::server {

struct ToolChoice {
    enum class Mode { Auto, None, Required, Named };
    Mode mode = Mode::Auto;
    std::string name;  // Named: the function the answer must call
};

struct ChatToolFields {
    nlohmann::ordered_json tools;  // null, or the checked list of function tools
    ToolChoice choice;
    bool parallel = true;           // parallel_tool_calls: more than one call per answer
    nlohmann::ordered_json kwargs;  // null, or the extra template variables
    // Whether the answer's tool calls are read out of its text: tools were
    // given and tool_choice is not "none".
    bool reads_calls() const { return !tools.is_null() && choice.mode != ToolChoice::Mode::None; }
};

// Reads the fields from a chat request's body. `family` is the model's
// (its template's): tools for a family whose calls ferrox cannot read, or
// whose template renders no tools, are refused naming it.
ChatToolFields read_chat_tools(Fields& body, const DetectedChatFamily& family, uint32_t max_tools);

// The name OpenAI allows a function: 1 to 64 of a-z A-Z 0-9 _ -.
bool valid_function_name(std::string_view name);

// The body's `tools` list, checked to be a list (`must_be` says of what, for
// the error) of at most `max_tools` entries; null when absent or empty (as if
// absent, as OpenAI and Anthropic take it). Every dialect's tools start here.
const nlohmann::ordered_json* checked_tool_list(Fields& body, uint32_t max_tools,
                                                const char* must_be);

// What every dialect's function tool holds, read from `fn` (Chat
// Completions' `function` object, a Responses tool, an Anthropic tool): its
// `name` (unique among `names`, which it joins), `description`, the
// parameters' JSON schema under `schema_key` ("parameters" or Anthropic's
// "input_schema") and `strict`. Returns the tool in the chat template's shape
// ({"type":"function","function":{...}}); the caller refuses fn's other fields.
nlohmann::ordered_json read_function_tool(Fields& fn, const char* schema_key,
                                          std::set<std::string, std::less<>>& names);

// Tools for a family whose calls ferrox cannot read (or whose template
// renders none) are refused, naming `field`.
void check_family_takes_tools(const DetectedChatFamily& family, const char* field);

// Whether `tools` (the chat template's shape, or null) has a function `name`.
bool names_tool(const nlohmann::ordered_json& tools, std::string_view name);

// OpenAI's reasoning efforts, which a template (gpt-oss's) reads as
// `reasoning_effort`: minimal, low, medium, high.
bool valid_reasoning_effort(std::string_view effort);

}  // namespace ferrox::server
