// ferrox_chat_parse in the core's terms: the family chosen from the params
// (a name, a template's text, or the model's template) and the answer parsed.
#pragma once

#include <string_view>

#include "ferrox/chat_format/answer.h"
#include "ferrox/engine.h"
#include "ferrox/expected.h"
#include "ferrox/ferrox.h"

namespace ferrox::api {

struct ParsedChat {
    ChatFamily family;
    ParsedAnswer answer;
};

// `engine` may be null when the params name a family or give a template.
Expected<ParsedChat> parse_chat_answer(const Engine* engine, const ferrox_chat_parse_params& params,
                                       std::string_view text);

}  // namespace ferrox::api
