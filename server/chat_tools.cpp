#include "chat_tools.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxFunctionName = 64;
constexpr size_t kMaxDescriptionBytes = 64 * 1024;

ordered_json read_tools(Fields& body, uint32_t max_tools) {
    const ordered_json* checked =
        checked_tool_list(body, max_tools, "must be an array of function tools");
    if (!checked) return nullptr;
    const ordered_json& list = *checked;
    ordered_json out = ordered_json::array();
    std::set<std::string, std::less<>> names;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string where = fmt::format("tools[{}]", i);
        Fields tool(list[i], where);
        if (tool.string("type", "") != "function")
            tool.fail("type", "must be 'function' (the only kind of tool ferrox runs)");
        if (!tool.has("function")) tool.fail("function", "is required");
        Fields fn(tool.raw("function"), where + ".function");
        ordered_json function = read_function_tool(fn, "parameters", names);
        fn.refuse_the_rest();
        tool.refuse_the_rest();
        out.push_back(std::move(function));
    }
    return out;
}

ToolChoice read_choice(Fields& body, const ordered_json& tools) {
    ToolChoice c;
    const ordered_json& raw = body.raw("tool_choice");
    if (raw.is_string()) {
        const std::string mode = raw.get<std::string>();
        if (mode == "auto")
            c.mode = ToolChoice::Mode::Auto;
        else if (mode == "none")
            c.mode = ToolChoice::Mode::None;
        else if (mode == "required")
            c.mode = ToolChoice::Mode::Required;
        else
            body.fail("tool_choice", "must be 'auto', 'none', 'required' or a function");
    } else {
        Fields choice(raw, "tool_choice");
        if (choice.string("type", "") != "function") choice.fail("type", "must be 'function'");
        if (!choice.has("function")) choice.fail("function", "is required");
        Fields fn(choice.raw("function"), "tool_choice.function");
        c.mode = ToolChoice::Mode::Named;
        c.name = fn.string("name", "");
        fn.refuse_the_rest();
        choice.refuse_the_rest();
        if (!names_tool(tools, c.name))
            throw ApiError{
                400,
                fmt::format("'tool_choice.function.name' '{}' names no tool of 'tools'", c.name),
                "tool_choice.function.name"};
    }
    if (tools.is_null() && c.mode != ToolChoice::Mode::None && c.mode != ToolChoice::Mode::Auto)
        body.fail("tool_choice", "needs 'tools'");
    return c;
}

ordered_json read_kwargs(Fields& body) {
    ordered_json kwargs = nullptr;
    if (body.has("chat_template_kwargs")) {
        const ordered_json& k = body.raw("chat_template_kwargs");
        if (!k.is_object()) body.fail("chat_template_kwargs", "must be an object");
        kwargs = k;  // the renderer bounds the count and refuses reserved names
    }
    if (body.has("reasoning_effort")) {
        const std::string effort = body.string("reasoning_effort", "");
        if (!valid_reasoning_effort(effort))
            body.fail("reasoning_effort", "must be 'minimal', 'low', 'medium' or 'high'");
        if (kwargs.is_null()) kwargs = ordered_json::object();
        kwargs["reasoning_effort"] = effort;  // the template reads it (gpt-oss's does)
    }
    return kwargs;
}

}  // namespace

const ordered_json* checked_tool_list(Fields& body, uint32_t max_tools, const char* must_be) {
    if (!body.has("tools")) return nullptr;
    const ordered_json& list = body.raw("tools");
    if (!list.is_array()) body.fail("tools", must_be);
    if (list.empty()) return nullptr;
    if (list.size() > max_tools)
        body.fail("tools", fmt::format("has {} entries; at most {}", list.size(), max_tools));
    return &list;
}

ordered_json read_function_tool(Fields& fn, const char* schema_key,
                                std::set<std::string, std::less<>>& names) {
    const std::string name = fn.string("name", "");
    if (!valid_function_name(name))
        fn.fail("name", "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
    if (!names.insert(name).second)
        fn.fail("name", fmt::format("'{}' names an earlier tool too", name));
    ordered_json function{{"name", name}};
    if (fn.has("description")) {
        const std::string description = fn.string("description", "");
        if (description.size() > kMaxDescriptionBytes)
            fn.fail("description", fmt::format("is over {} bytes", kMaxDescriptionBytes));
        function["description"] = description;
    }
    if (fn.has(schema_key)) {
        // A JSON schema; checked by the grammar builder when a call is
        // forced, and read by the template otherwise.
        if (!fn.raw(schema_key).is_object()) fn.fail(schema_key, "must be a JSON schema object");
        function["parameters"] = fn.raw(schema_key);
    } else {
        function["parameters"] = {{"type", "object"}, {"properties", ordered_json::object()}};
    }
    if (fn.has("strict")) function["strict"] = fn.boolean("strict", false);
    return {{"type", "function"}, {"function", std::move(function)}};
}

void check_family_takes_tools(const DetectedChatFamily& family, const char* field) {
    if (family.supports_tools) return;
    throw ApiError{400,
                   fmt::format("'{}': this model's chat template ({} family) has no tool "
                               "calls ferrox reads; serve it with a --chat-template that has",
                               field, family_info(family.family).name),
                   field};
}

bool names_tool(const ordered_json& tools, std::string_view name) {
    if (!tools.is_array()) return false;
    for (const auto& t : tools)
        if (t.at("function").at("name").get<std::string>() == name) return true;
    return false;
}

bool valid_reasoning_effort(std::string_view effort) {
    return effort == "minimal" || effort == "low" || effort == "medium" || effort == "high";
}

bool valid_function_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxFunctionName) return false;
    for (unsigned char c : name)
        if (!(std::isalnum(c) || c == '_' || c == '-')) return false;
    return true;
}

ChatToolFields read_chat_tools(Fields& body, const DetectedChatFamily& family, uint32_t max_tools) {
    ChatToolFields out;
    if (body.has("tools")) out.tools = read_tools(body, max_tools);
    if (!out.tools.is_null()) check_family_takes_tools(family, "tools");
    if (body.has("tool_choice")) out.choice = read_choice(body, out.tools);
    out.parallel = body.boolean("parallel_tool_calls", true);
    out.kwargs = read_kwargs(body);
    return out;
}

}  // namespace ferrox::server
