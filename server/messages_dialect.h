// Anthropic's Messages API (POST /v1/messages) as a dialect
// (server/dialect.h), and its token count (POST /v1/messages/count_tokens):
// `system` and `messages` of text blocks through the model's chat template,
// a last assistant message continued rather than answered (Anthropic's
// prefill), stop_reason end_turn / max_tokens / stop_sequence, and the
// streaming events message_start ... content_block_delta ... message_stop.
// Errors on these paths are Anthropic-shaped (server/error_shape.h).
// docs/server.md lists every field.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "dialect.h"

namespace ferrox::server {

std::unique_ptr<Dialect> anthropic_messages(ReplyIds ids);

// The prompt tokens a count_tokens body (a Messages request without
// max_tokens and the sampling fields) stands for; ApiError naming the field
// at fault.
uint32_t count_message_tokens(const nlohmann::ordered_json& body, const ParseInput& in);

}  // namespace ferrox::server
