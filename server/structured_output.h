// Constrained output for every dialect: a request's GBNF `grammar`, or a
// response format (json_object, json_schema) turned into the grammar the
// sampler chain enforces. Refusals are ApiErrors naming the field or the
// schema's JSON pointer. The /v1/responses and /v1/messages dialects call the
// same functions, so one schema means one grammar whichever API sent it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "ferrox/grammar/gbnf.h"
#include "request_fields.h"

namespace ferrox::server {

// A JSON schema's grammar. `where` is the field that held the schema
// ("response_format.json_schema.schema"); a refusal reads
// "'<where>/properties/age/multipleOf': not enforced". ordered_json keeps the
// schema's key order: properties are generated in the order given.
std::shared_ptr<const grammar::Grammar> grammar_for_schema(const nlohmann::ordered_json& schema,
                                                           std::string_view where);
// Any JSON object (response_format json_object); built once per process.
std::shared_ptr<const grammar::Grammar> grammar_for_json_object();
// A client's GBNF text (`where`: its field), within GrammarLimits.
std::shared_ptr<const grammar::Grammar> grammar_for_gbnf(std::string_view text,
                                                         std::string_view where);

// OpenAI's response_format object: {"type":"text"} (nullptr),
// {"type":"json_object"}, {"type":"json_schema","json_schema":{"name",
// "schema","strict","description"}}. `where` names it in errors.
std::shared_ptr<const grammar::Grammar> grammar_for_response_format(
    const nlohmann::ordered_json& format, std::string_view where);

}  // namespace ferrox::server
