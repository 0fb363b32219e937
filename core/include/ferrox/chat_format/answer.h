// A model's finished answer split into content, reasoning and tool calls, the
// way its family writes them (family.h). parse_answer() is the stream parser
// (stream_parser.h) fed the whole text at once, so a streamed answer and a
// finished one can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/expected.h"

namespace ferrox {

struct ChatToolCall {
    // "call_" + 16 hex digits: SipHash-2-4 of the call's name and arguments
    // under the key (id_seed, index) -- the same answer and seed give the
    // same ids, and two calls of one answer never share one.
    std::string id;
    std::string name;
    std::string arguments;  // a JSON object, compact (nlohmann's dump(), UTF-8 kept)
};

struct ParsedAnswer {
    std::string content;
    std::string reasoning;
    std::vector<ChatToolCall> tool_calls;
};

// Bounds on what an answer can make the parser do; text past them is never
// dropped: a call over a bound is content.
struct ChatParseLimits {
    size_t max_text = size_t{16} << 20;       // bytes of one answer (over: an error)
    size_t max_calls = 128;                   // calls after these are content
    size_t max_call_bytes = size_t{1} << 20;  // bytes of one call's text (over: content)
    int max_json_depth = 64;                  // arrays and objects inside each other
};

// Tool name -> the names of its parameters whose value is text
// (ChatParseOptions::text_parameters).
using ChatTextParameters = std::map<std::string, std::set<std::string, std::less<>>, std::less<>>;

struct ChatParseOptions {
    // The prompt opened the reasoning block (reasoning_open_in_prompt): the
    // answer starts as reasoning, without the start marker.
    bool starts_in_reasoning = false;
    uint64_t id_seed = 0;  // the server's request number, say: ids differ across answers
    ChatParseLimits limits;
    // Tool name -> the parameters whose value is text. The families that
    // write a parameter's value bare (qwen3-coder, glm) read such a value as
    // that text, never as JSON: "42" stays the string "42". Other values are
    // JSON when their text parses as JSON, else text. The server fills it
    // from the tools' schemas (tool_call_grammar.h).
    ChatTextParameters text_parameters;
};

// Rules every family follows:
//  - reasoning opens only at the start of the answer (after blanks); text
//    after an unterminated reasoning block is reasoning;
//  - content loses the blanks at its start and right after the reasoning
//    block; blanks between tool calls and after the last one are dropped;
//  - a call whose text does not parse (bad JSON, no name, arguments not an
//    object, a bound crossed, text ending inside it) is content, verbatim.
// An answer over limits.max_text is an error naming the size and the bound.
FERROX_API Expected<ParsedAnswer> parse_answer(ChatFamily family, std::string_view text,
                                               const ChatParseOptions& options = {});

}  // namespace ferrox
