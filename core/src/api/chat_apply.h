// ferrox_chat_apply_template in the core's terms: the caller's
// ferrox_chat_params checked field by field against ferrox.h's bounds, turned
// into the conversation the ChatRenderer takes, and rendered with the
// template the params or the model choose. The C entry wraps this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferrox/engine.h"
#include "ferrox/expected.h"
#include "ferrox/ferrox.h"
#include "ferrox/template/chat_template.h"

namespace ferrox::api {

struct RenderedChat {
    std::string text;
    std::vector<TextRange> client;  // where the conversation's bytes lie in text
    std::vector<int32_t> tokens;
    std::string origin;  // the template's: "tokenizer.chat_template", "builtin:NAME", ...
};

Expected<RenderedChat> apply_chat_template(const Engine& engine, const ferrox_chat_params& params);

}  // namespace ferrox::api
