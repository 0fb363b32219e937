// OpenAI's Responses API (POST /v1/responses) as a dialect (server/dialect.h),
// stateless: the whole conversation comes as `input` every time (a string, or
// message items), nothing is stored, so `store: true`, `previous_response_id`
// and `conversation` are refused by name. The answer is a `response` object
// with one assistant message item; a stream is the typed event sequence
// (response.created ... response.output_text.delta ... response.completed),
// each event with its sequence_number. docs/server.md lists every field.
#pragma once

#include <memory>

#include "dialect.h"

namespace ferrox::server {

std::unique_ptr<Dialect> responses(ReplyIds ids);

}  // namespace ferrox::server
