// JSON schema -> GBNF: a grammar whose every sentence is a JSON text that
// validates against the schema (docs/structured-output.md lists the subset).
// The converter writes GBNF text and parse_gbnf compiles it, so a schema's
// grammar passes the same checks (left recursion, every GrammarLimits bound)
// as a grammar a client sends, and the text can be printed and read.
//
// A keyword the grammar does not enforce is refused with its JSON pointer
// ("/properties/age/multipleOf: not enforced"), never ignored: llama-server
// once accepted a schema without enforcing it (llama.cpp#24097). Annotations
// (title, description, examples, default, $schema, $id, $comment, ...) are
// accepted. The grammar may produce fewer texts than the schema allows (only
// the listed properties, in schema order; bounded digits), never more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/grammar/gbnf.h"

namespace ferrox::grammar {

// Schemas come from clients: each bound is an error that names it.
struct JsonSchemaLimits {
    uint32_t max_depth = 32;             // subschemas inside subschemas
    uint32_t max_repetition = 1000;      // min/maxItems, min/maxLength, a pattern's {m,n}
    uint32_t max_properties = 256;       // per object (optional ones multiply parse stacks)
    uint32_t max_refs = 256;             // distinct $ref targets, each compiled once
    uint32_t max_enum = 1024;            // enum values
    size_t max_pattern_bytes = 4096;     // one pattern
    size_t max_grammar_bytes = 1 << 20;  // the GBNF text produced
    uint32_t max_indent = 20;            // spaces/tabs after a newline between tokens
};

// The GBNF text for `schema` (ordered: properties are emitted in schema
// order); an error names the JSON pointer at fault and the limit passed.
FERROX_API Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                                     const JsonSchemaLimits& limits = {});
// The same, compiled by parse_gbnf.
FERROX_API Expected<std::shared_ptr<const Grammar>> compile_json_schema(
    const nlohmann::ordered_json& schema, const JsonSchemaLimits& limits = {});

// Any JSON object (OpenAI's response_format json_object), with the same
// whitespace rule.
FERROX_API std::string json_object_gbnf(const JsonSchemaLimits& limits = {});
FERROX_API Expected<std::shared_ptr<const Grammar>> compile_json_object(
    const JsonSchemaLimits& limits = {});

// The GrammarLimits a schema's grammar is compiled under: GBNF's defaults,
// with room for the rules bounded repetitions synthesize (one per count).
FERROX_API GrammarLimits json_schema_grammar_limits(const JsonSchemaLimits& limits);

}  // namespace ferrox::grammar
