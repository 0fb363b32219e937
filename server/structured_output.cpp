#include "structured_output.h"

#include <fmt/format.h>

#include <string>

#include "ferrox/grammar/json_schema.h"

namespace ferrox::server {

using nlohmann::ordered_json;

std::shared_ptr<const grammar::Grammar> grammar_for_schema(const ordered_json& schema,
                                                           std::string_view where) {
    if (!schema.is_object() && !schema.is_boolean())
        throw ApiError{400, fmt::format("'{}' must be a JSON schema (an object)", where),
                       std::string(where)};
    auto g = grammar::compile_json_schema(schema);
    if (!g) {
        // The converter's message starts with the JSON pointer at fault.
        const std::string& why = g.error().message();
        const size_t colon = why.find(": ");
        std::string pointer = colon == std::string::npos ? "" : why.substr(0, colon);
        if (pointer == "(root)" || pointer.empty() || pointer[0] != '/') pointer.clear();
        const std::string field = std::string(where) + pointer;
        const std::string rest = pointer.empty() ? why : why.substr(colon + 2);
        throw ApiError{400, fmt::format("'{}': {}", field, rest), field};
    }
    return std::move(*g);
}

std::shared_ptr<const grammar::Grammar> grammar_for_json_object() {
    // Built once: every json_object request shares it (grammars are immutable).
    static const std::shared_ptr<const grammar::Grammar> object = [] {
        auto g = grammar::compile_json_object();
        return g ? std::move(*g) : nullptr;
    }();
    if (!object) throw ApiError{500, "the JSON object grammar failed to build", "response_format"};
    return object;
}

std::shared_ptr<const grammar::Grammar> grammar_for_gbnf(std::string_view text,
                                                         std::string_view where) {
    auto g = grammar::parse_gbnf(text);
    if (!g)
        throw ApiError{400, fmt::format("'{}': {}", where, g.error().message()),
                       std::string(where)};
    return std::move(*g);
}

std::shared_ptr<const grammar::Grammar> grammar_for_response_format(const ordered_json& format,
                                                                    std::string_view where) {
    Fields rf(format, std::string(where));
    const std::string type = rf.string("type", "");
    std::shared_ptr<const grammar::Grammar> g;
    if (type == "json_object") {
        g = grammar_for_json_object();
    } else if (type == "json_schema") {
        const std::string at = std::string(where) + ".json_schema";
        if (!rf.has("json_schema")) rf.fail("json_schema", "is required with type json_schema");
        Fields js(rf.raw("json_schema"), at);
        const std::string name = js.string("name", "");
        if (name.empty() || name.size() > 64)
            js.fail("name", "must be a string of 1 to 64 characters");
        (void)js.string("description", "");
        // strict: false lets OpenAI's models stray from the schema; ferrox
        // enforces every schema it accepts, so both values mean the same.
        (void)js.boolean("strict", false);
        const ordered_json schema = js.has("schema") ? js.raw("schema") : ordered_json::object();
        js.refuse_the_rest();
        g = grammar_for_schema(schema, at + ".schema");
    } else if (type != "text") {
        rf.fail("type", "must be one of text, json_object, json_schema");
    }
    rf.refuse_the_rest();
    return g;
}

}  // namespace ferrox::server
