// OpenAI's two generation APIs as dialects (server/dialect.h): Chat
// Completions (/v1/chat/completions) and the legacy Completions
// (/v1/completions). They share the request fields and the envelope
// ({id, object, created, model, choices, usage}); they differ in the prompt
// (messages or text), the logprobs form and the shape of a choice.
#pragma once

#include <memory>

#include "dialect.h"

namespace ferrox::server {

std::unique_ptr<Dialect> chat_completions(ReplyIds ids);
std::unique_ptr<Dialect> completions(ReplyIds ids);

}  // namespace ferrox::server
