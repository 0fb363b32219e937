// The text of one tool call (what lies between a family's markers) to a name
// and compact JSON arguments. Every function answers nullopt for text that is
// not a well-formed call; the caller then keeps the text as content.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/chat_format/answer.h"

namespace ferrox::chat_format {

struct CallText {
    std::string name;
    std::string arguments;  // compact JSON object
};
using Calls = std::vector<CallText>;
using TextParameters = ChatTextParameters;  // answer.h

// Where a JSON object or array that starts at the scanner's first non-blank
// byte ends, found incrementally as text arrives (strings and escapes
// respected, nesting bounded).
class JsonExtent {
  public:
    enum class Result { NeedMore, Done, Invalid };
    // Scans text from where the last call stopped (the text only grows).
    Result scan(std::string_view text, int max_depth);
    size_t end() const { return pos_; }  // Done: one past the value; Invalid: the bad byte

  private:
    size_t pos_ = 0;
    int depth_ = 0;
    bool started_ = false, in_string_ = false, escape_ = false;
};

// {"name": N, "arguments" | "parameters": {..} or a string holding one} or
// an array of them (`list_ok`); blanks around.
std::optional<Calls> json_calls(std::string_view text, bool list_ok, int max_depth);
// Several JSON calls one after another, separated by blanks or ';' (Llama 3).
std::optional<Calls> json_call_sequence(std::string_view text, int max_depth);
// <function=NAME><parameter=P>\nVALUE\n</parameter>...</function> (Qwen3-Coder).
std::optional<CallText> xml_function_call(std::string_view text, int max_depth,
                                          const TextParameters& text_parameters);
// NAME<arg_key>K</arg_key><arg_value>V</arg_value>... (GLM).
std::optional<CallText> arg_key_call(std::string_view text, int max_depth,
                                     const TextParameters& text_parameters);
// <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> entries (DeepSeek R1 and V3.1).
std::optional<Calls> deepseek_calls(std::string_view text, int max_depth);
// What follows <|python_tag|> (Llama 3): JSON calls, else code for "python".
std::optional<Calls> python_tag_calls(std::string_view text, int max_depth);
// harmony: the JSON arguments of a call to `name`.
std::optional<CallText> named_json_call(std::string name, std::string_view text, int max_depth);

bool is_blank(char c);
std::string_view trim_blanks(std::string_view s);

}  // namespace ferrox::chat_format
