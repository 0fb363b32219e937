#include "tool_call_grammar.h"

#include <fmt/format.h>

#include <optional>
#include <regex>
#include <string>

#include "ferrox/grammar/json_schema.h"
#include "request_fields.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// How a family spells the calls of one answer: the text before and after
// the JSON, whether that JSON is one call or a list of them, and the key of
// the arguments.
struct CallSpelling {
    std::string_view before, after, between;  // between: two calls, when several are allowed
    bool json_list = false;                   // the calls are one JSON array
    std::string_view arguments_key = "arguments";
};

std::optional<CallSpelling> spelling(ChatFamily family) {
    switch (family) {
        case ChatFamily::Hermes:
        case ChatFamily::SmolLM3:
            return CallSpelling{"<tool_call>\n", "\n</tool_call>", "\n", false, "arguments"};
        case ChatFamily::Llama3:
            return CallSpelling{"", "", "", false, "parameters"};  // one call per answer
        case ChatFamily::Mistral:
            return CallSpelling{"[TOOL_CALLS]", "", "", true, "arguments"};
        case ChatFamily::Granite:
            return CallSpelling{"<|tool_call|>", "", "", true, "arguments"};
        case ChatFamily::Functools:
            return CallSpelling{"functools", "", "", true, "arguments"};
        default:
            return std::nullopt;
    }
}

// A GBNF string literal of `text` (UTF-8 kept; quotes, backslashes and
// control bytes escaped).
std::string literal(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\')
            out += fmt::format("\\{}", char(c));
        else if (c == '\n')
            out += "\\n";
        else if (c < 0x20)
            out += fmt::format("\\x{:02x}", c);
        else
            out += char(c);
    }
    return out + "\"";
}

}  // namespace

std::shared_ptr<const grammar::Grammar> tool_call_grammar(ChatFamily family,
                                                          const ChatToolFields& tools,
                                                          bool starts_in_reasoning,
                                                          CallGrammarMode mode) {
    const bool lazy = mode == CallGrammarMode::Lazy;
    const auto how = spelling(family);
    if (!how && lazy) return nullptr;  // auto stays parse-only
    if (!how)
        throw ApiError{400,
                       fmt::format("'tool_choice': a forced call is not enforced for the {} "
                                   "family (its calls are not JSON); use 'auto'",
                                   family_info(family).name),
                       "tool_choice"};
    // One call: an object naming a tool, with that tool's arguments.
    ordered_json one_of = ordered_json::array();
    for (const auto& tool : tools.tools) {
        const auto& fn = tool.at("function");
        if (tools.choice.mode == ToolChoice::Mode::Named && fn.at("name") != tools.choice.name)
            continue;
        const std::string key(how->arguments_key);
        const ordered_json parameters =
            fn.contains("parameters")
                ? fn.at("parameters")
                : ordered_json{{"type", "object"}, {"properties", ordered_json::object()}};
        one_of.push_back({{"type", "object"},
                          {"properties", {{"name", {{"const", fn.at("name")}}}, {key, parameters}}},
                          {"required", {"name", key}},
                          {"additionalProperties", false}});
    }
    const bool several = tools.parallel && family != ChatFamily::Llama3;
    ordered_json call = one_of.size() == 1 ? one_of[0] : ordered_json{{"anyOf", one_of}};
    ordered_json schema = call;
    if (how->json_list) {
        schema = {{"type", "array"}, {"items", call}, {"minItems", 1}};
        if (!several) schema["maxItems"] = 1;
    }
    // A refusal's pointer is into this schema: /anyOf/N/properties/arguments/...
    // stands for tools[N].function.parameters/...
    const grammar::JsonSchemaLimits limits;
    auto body = grammar::json_schema_to_gbnf(schema, limits);
    if (!body)
        throw ApiError{400,
                       fmt::format("'tools': a parameter schema cannot be enforced: {}",
                                   body.error().message()),
                       "tools"};
    // The converter's grammar starts "root ::= ..." and names `root` nowhere
    // else; it becomes the JSON rule under a root that adds the markers.
    std::string text = std::move(*body);
    static const std::regex kRootWord("\\broot\\b");
    if (text.rfind("root ::= ", 0) != 0 ||
        std::distance(std::sregex_iterator(text.begin(), text.end(), kRootWord),
                      std::sregex_iterator()) != 1)
        throw ApiError{500, "the tool-call grammar could not be composed", "tools"};
    text.replace(0, 4, "tool-json");
    std::string root = "root ::= ";
    // Lazy: armed at the trigger, after any reasoning; Llama 3 may open a
    // call with <|python_tag|> (a trigger) before the bare JSON.
    if (lazy && family == ChatFamily::Llama3) root += "\"<|python_tag|>\"? ";
    if (!lazy && starts_in_reasoning && !family_info(family).reasoning_close.empty())
        root += literal(std::string(family_info(family).reasoning_close) + "\n\n") + " ";
    std::string one = "tool-json";
    if (!how->before.empty()) one = literal(how->before) + " " + one;
    if (!how->after.empty()) one += " " + literal(how->after);
    root += (several && !how->json_list)
                ? fmt::format("tool-call ({} tool-call){{0,15}}\ntool-call ::= {}",
                              literal(how->between), one)
                : one;
    auto g = grammar::parse_gbnf(root + "\n" + text, grammar::json_schema_grammar_limits(limits));
    if (!g)
        throw ApiError{
            400, fmt::format("'tools': the forced-call grammar: {}", g.error().message()), "tools"};
    return std::move(*g);
}

LazyGrammarParams lazy_tool_call_grammar(ChatFamily family, const ChatToolFields& tools,
                                         bool starts_in_reasoning, const Tokenizer& tokenizer,
                                         const grammar::TokenTrie& vocab) {
    LazyGrammarParams lazy;
    try {
        lazy.grammar = tool_call_grammar(family, tools, false, CallGrammarMode::Lazy);
    } catch (const ApiError& e) {
        // A parameter schema the converter cannot enforce: under auto the
        // calls are still read, as before lazy grammars (only a forced call
        // must be enforced, so only there is it a 400).
        if (e.status != 400) throw;
        return {};
    }
    if (!lazy.grammar) return lazy;
    const ChatFamilyInfo& info = family_info(family);
    lazy.reasoning_start = std::string(info.reasoning_start);
    lazy.reasoning_end = std::string(info.reasoning_end);
    lazy.starts_in_reasoning = starts_in_reasoning;
    for (std::string_view trigger : family_info(family).tool_triggers) {
        if (trigger.empty()) continue;
        // Llama 3's bare JSON call is a call only as the whole answer.
        const bool at_start = trigger.front() == '{';
        lazy.triggers.push_back({std::string(trigger), at_start});
        // A control token has no text in the trie: it is watched by its id.
        const auto ids = tokenizer.encode(trigger, false, true);
        if (!at_start && ids.size() == 1 && ids[0] >= 0 &&
            static_cast<size_t>(ids[0]) < vocab.vocab_size() && vocab.piece(ids[0]) != trigger)
            lazy.trigger_tokens.push_back({ids[0], std::string(trigger)});
    }
    return lazy;
}

}  // namespace ferrox::server
