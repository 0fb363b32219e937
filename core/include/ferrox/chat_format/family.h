// Tool-call and reasoning families: how a model writes a tool call and its
// reasoning, recognised from its chat template's text (the template renders
// past calls the way the model was trained to write them).
//
// Intended use by the server (one source for every dialect):
//   - at load: `detect_family(template.source())` once; `supports_tools` says
//     whether a request with `tools` can be served (else a 400 naming the
//     family) -- a `--chat-template` override is detected the same way;
//   - per request: render with ChatRenderer (tools, tool results, and
//     `enable_thinking` / `reasoning_effort` as extra context), then one
//     ChatStreamParser (stream_parser.h) fed the detokenized deltas: its
//     events are `delta.content`, `delta.reasoning_content` and
//     `delta.tool_calls`; `reasoning_open_in_prompt` says whether the prompt
//     already opened the reasoning block (DeepSeek-R1's `<think>\n`);
//   - grammars: a lazy grammar arms at `tool_triggers` and constrains the
//     body to the tools' parameter schemas (`call_grammar_hint` says how the
//     family spells a call); `tool_choice: required` starts it armed;
//   - a thinking budget forces `reasoning_close` once the budget is spent.
// The table of families and the templates each is recognised in:
// docs/structured-output.md, "Tool-call and reasoning families".
#pragma once

#include <span>
#include <string_view>

#include "ferrox/api.h"

namespace ferrox {

enum class ChatFamily {
    Generic,     // no tool calls, no reasoning: all text is content
    ThinkOnly,   // `<think>...</think>` reasoning, no tool-call format ferrox parses
    Hermes,      // Hermes 2/3, Qwen2.5, Qwen3, QwQ, Granite 4: <tool_call>{json}</tool_call>
    Qwen3Coder,  // <tool_call><function=NAME><parameter=P>v</parameter></function></tool_call>
    Llama3,      // Llama 3.1-3.3: {"name":..,"parameters":..} or <|python_tag|>
    Mistral,     // [TOOL_CALLS][{..}] or [TOOL_CALLS]NAME[ARGS]{..}; [THINK]..[/THINK]
    Harmony,     // gpt-oss: <|channel|>analysis / final / commentary to=functions.NAME
    DeepSeek,    // R1 / V3 / V3.1: <｜tool▁calls▁begin｜>...
    Glm,         // GLM-4.5+: <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>
    Granite,     // Granite 3.x: <|tool_call|>[{..}], <think>, <response>
    Functools,   // Phi-4-mini, FireFunction v2: functools[{..}]
    SmolLM3,     // <think> reasoning, <tool_call>{json}</tool_call>
};

// What one family writes. Empty strings: the family has no such marker.
struct ChatFamilyInfo {
    ChatFamily family;
    std::string_view name;  // "hermes", ... (docs, logs, the C API)
    // Texts that begin a tool call (a lazy grammar arms at the first one).
    // Llama 3's `{"name"` begins a call only at the start of the answer.
    std::span<const std::string_view> tool_triggers;
    std::string_view reasoning_start;  // opens a reasoning block
    std::string_view reasoning_end;    // ends one
    // What to write to end reasoning and begin the answer (a thinking
    // budget spent): reasoning_end, or harmony's switch to the final channel.
    std::string_view reasoning_close;
    std::string_view call_grammar_hint;  // how one call is spelled, for a grammar builder
};

FERROX_API const ChatFamilyInfo& family_info(ChatFamily family);
FERROX_API std::span<const ChatFamilyInfo> all_chat_families();
// By name ("hermes"); null when none has it.
FERROX_API const ChatFamilyInfo* find_chat_family(std::string_view name);

struct DetectedChatFamily {
    ChatFamily family = ChatFamily::Generic;
    // The template renders `tools` and ferrox parses the family's calls.
    bool supports_tools = false;
    // DeepSeek R1's spelling of a call, `function<｜tool▁sep｜>NAME` and the
    // arguments in a ```json fence, where V3 / V3.1 write NAME<｜tool▁sep｜>ARGS
    // (the parser reads both; a forced call follows the template's).
    bool fenced_call_arguments = false;
};

// The family of a chat template's source, by the markers it writes (first
// rule that matches; the rules are in family.cpp, the table in the docs).
FERROX_API DetectedChatFamily detect_family(std::string_view template_source);

// Whether a rendered prompt ends inside an opened reasoning block (its last
// non-blank text is the family's reasoning_start, as DeepSeek-R1's and
// Qwen3-thinking's generation prompts write): the answer then starts in
// reasoning (ChatParseOptions::starts_in_reasoning).
FERROX_API bool reasoning_open_in_prompt(ChatFamily family, std::string_view prompt);

}  // namespace ferrox
