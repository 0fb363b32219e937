// How each API words a refusal. OpenAI's dialects answer
// {"error": {"message", "type", "param", "code"}}; Anthropic's Messages API
// answers {"type": "error", "error": {"type", "message"}}. The shape is a
// property of the request's path (error_shape_of), so that every error on an
// Anthropic path -- a 401 from the key check, a 404, a 503 while the model
// loads, a 400 from a field -- reads as Anthropic's SDK expects.
#pragma once

#include <string>
#include <string_view>

#include "request_fields.h"

namespace ferrox::server {

enum class ErrorShape { OpenAI, Anthropic };

// Anthropic's shape for /v1/messages and every path under it; OpenAI's elsewhere.
ErrorShape error_shape_of(std::string_view path);

// Anthropic's error type for an HTTP status (its SDK's ErrorType).
const char* anthropic_error_type(int status);

// The JSON body of `e` in `shape`.
std::string error_json(ErrorShape shape, const ApiError& e);

}  // namespace ferrox::server
