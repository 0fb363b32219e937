#include "sampler_grammar.h"

#include <fmt/format.h>

#include <string_view>

#include "bounded_json.h"
#include "ferrox/grammar/json_schema.h"

namespace ferrox::api {

Expected<std::shared_ptr<const grammar::Grammar>> sampler_grammar(const ferrox_sampler_params& p) {
    if (!p.grammar && p.grammar_len)
        return make_error("grammar is NULL with grammar_len {}", p.grammar_len);
    if (!p.json_schema && p.json_schema_len)
        return make_error("json_schema is NULL with json_schema_len {}", p.json_schema_len);
    if (p.grammar && p.json_schema) return make_error("grammar and json_schema are both set");
    if (p.grammar) {
        if (p.grammar_len > FERROX_GRAMMAR_MAX_BYTES)
            return make_error("grammar: {} bytes; at most {}", p.grammar_len,
                              FERROX_GRAMMAR_MAX_BYTES);
        // Its errors read "grammar:LINE:COL: ...".
        return grammar::parse_gbnf(std::string_view(p.grammar, p.grammar_len));
    }
    if (!p.json_schema) return std::shared_ptr<const grammar::Grammar>();
    auto schema = parse_bounded_json(p.json_schema, p.json_schema_len, "json_schema",
                                     {FERROX_JSON_SCHEMA_MAX_BYTES, FERROX_JSON_SCHEMA_MAX_DEPTH,
                                      FERROX_JSON_SCHEMA_MAX_MEMBERS});
    if (!schema) return schema.error();
    auto compiled = grammar::compile_json_schema(*schema);  // errors name the JSON pointer
    if (!compiled) return make_error("json_schema: {}", compiled.error().message());
    return std::move(*compiled);
}

}  // namespace ferrox::api
