#include "chat_apply.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "bounded_json.h"
#include "ferrox/template/chat_renderer.h"

namespace ferrox::api {
namespace {

using nlohmann::ordered_json;

// Bytes of a NUL-terminated string, reading at most limit + 1 of them (so a
// string without its NUL is never read past the bound).
size_t bounded_length(const char* s, size_t limit) { return strnlen(s, limit + 1); }

// `what` (messages_json, tools_json, kwargs_json) as JSON, within ferrox.h's chat bounds.
Expected<ordered_json> parse_bounded(const char* text, size_t len, const char* what) {
    return parse_bounded_json(
        text, len, what,
        {FERROX_CHAT_MAX_JSON, FERROX_CHAT_MAX_JSON_DEPTH, FERROX_CHAT_MAX_JSON_MEMBERS});
}

Expected<ordered_json> messages_from_structs(const ferrox_chat_params& p) {
    if (!p.messages) return make_error("messages is NULL with n_messages {}", p.n_messages);
    ordered_json messages = ordered_json::array();
    size_t total = 0;
    for (size_t i = 0; i < p.n_messages; ++i) {
        const ferrox_chat_message& m = p.messages[i];
        if (!m.role) return make_error("messages[{}].role is NULL", i);
        const size_t role_len = bounded_length(m.role, FERROX_CHAT_MAX_ROLE);
        if (role_len == 0) return make_error("messages[{}].role is empty", i);
        if (role_len > FERROX_CHAT_MAX_ROLE)
            return make_error("messages[{}].role: more than {} bytes", i, FERROX_CHAT_MAX_ROLE);
        if (!m.content && m.content_len)
            return make_error("messages[{}].content is NULL with content_len {}", i, m.content_len);
        if (m.content_len > FERROX_CHAT_MAX_CONTENT)
            return make_error("messages[{}].content: {} bytes; at most {}", i, m.content_len,
                              FERROX_CHAT_MAX_CONTENT);
        total += m.content_len;
        if (total > FERROX_CHAT_MAX_CONTENT)
            return make_error("messages[0..{}].content: {} bytes in all; at most {}", i, total,
                              FERROX_CHAT_MAX_CONTENT);
        messages.push_back({{"role", std::string(m.role, role_len)},
                            {"content", std::string(m.content ? m.content : "", m.content_len)}});
    }
    return messages;
}

Expected<ordered_json> messages_from_json(const ferrox_chat_params& p) {
    auto doc = parse_bounded(p.messages_json, p.messages_json_len, "messages_json");
    if (!doc) return doc.error();
    if (!doc->is_array())
        return make_error("messages_json: an array of messages, not {}", doc->type_name());
    if (doc->size() > FERROX_CHAT_MAX_MESSAGES)
        return make_error("messages_json: {} messages; at most {}", doc->size(),
                          FERROX_CHAT_MAX_MESSAGES);
    for (size_t i = 0; i < doc->size(); ++i) {
        const ordered_json& m = (*doc)[i];
        if (!m.is_object())
            return make_error("messages_json[{}]: a message is an object, not {}", i,
                              m.type_name());
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string())
            return make_error("messages_json[{}].role: missing or not a string", i);
        const size_t role_len = role->get_ref<const std::string&>().size();
        if (role_len == 0 || role_len > FERROX_CHAT_MAX_ROLE)
            return make_error("messages_json[{}].role: {} bytes; 1 to {}", i, role_len,
                              FERROX_CHAT_MAX_ROLE);
    }
    return doc;
}

Expected<ordered_json> conversation(const ferrox_chat_params& p) {
    if (!p.messages_json && p.messages_json_len)
        return make_error("messages_json is NULL with messages_json_len {}", p.messages_json_len);
    const bool structs = p.messages || p.n_messages;
    if (structs && p.messages_json) return make_error("give messages or messages_json, not both");
    if (!structs && !p.messages_json)
        return make_error("no messages: give messages (n_messages > 0) or messages_json");
    if (p.n_messages > FERROX_CHAT_MAX_MESSAGES)
        return make_error("n_messages {}; at most {}", p.n_messages, FERROX_CHAT_MAX_MESSAGES);
    return structs ? messages_from_structs(p) : messages_from_json(p);
}

Expected<ordered_json> tools(const ferrox_chat_params& p) {
    if (!p.tools_json && p.tools_json_len)
        return make_error("tools_json is NULL with tools_json_len {}", p.tools_json_len);
    if (!p.tools_json) return ordered_json(nullptr);
    auto doc = parse_bounded(p.tools_json, p.tools_json_len, "tools_json");
    if (!doc) return doc.error();
    if (!doc->is_array() && !doc->is_null())
        return make_error("tools_json: an array of tools, not {}", doc->type_name());
    return doc;
}

Expected<ordered_json> template_kwargs(const ferrox_chat_params& p) {
    if (!p.kwargs_json && p.kwargs_json_len)
        return make_error("kwargs_json is NULL with kwargs_json_len {}", p.kwargs_json_len);
    if (!p.kwargs_json) return ordered_json(nullptr);
    auto doc = parse_bounded(p.kwargs_json, p.kwargs_json_len, "kwargs_json");
    if (!doc) return doc.error();
    if (!doc->is_object())
        return make_error("kwargs_json: an object of template variables, not {}", doc->type_name());
    return doc;
}

// The caller's template, a built-in by name, or the model's own.
Expected<ChatTemplate> chosen_template(const ChatModelFacts& facts, const ferrox_chat_params& p) {
    constexpr size_t kMaxName = 256, kMaxOrigin = 4096;
    if (p.chat_template && p.template_name)
        return make_error("give chat_template or template_name, not both");
    if (p.template_name) {
        const size_t n = bounded_length(p.template_name, kMaxName);
        const std::string_view name(p.template_name, std::min(n, kMaxName));
        const auto* b = n <= kMaxName ? find_builtin_chat_template(name) : nullptr;
        if (!b)
            return make_error("template_name '{}': no built-in template of that name ({})", name,
                              builtin_chat_template_names());
        return ChatTemplate::parse(std::string(b->source), "builtin:" + std::string(b->name));
    }
    if (p.chat_template) {
        std::string origin = "chat_template";
        if (p.template_origin) {
            const size_t n = bounded_length(p.template_origin, kMaxOrigin);
            if (n > kMaxOrigin)
                return make_error("template_origin: more than {} bytes", kMaxOrigin);
            origin.assign(p.template_origin, n);
        }
        const size_t n = bounded_length(p.chat_template, kMaxChatTemplateSource);
        if (n > kMaxChatTemplateSource)
            return make_error("chat_template: more than {} bytes; a chat template is at most {}",
                              kMaxChatTemplateSource, kMaxChatTemplateSource);
        return ChatTemplate::parse(std::string(p.chat_template, n), std::move(origin));
    }
    return model_chat_template(facts, "ferrox_chat_params.chat_template or template_name");
}

}  // namespace

Expected<RenderedChat> apply_chat_template(const Engine& engine, const ferrox_chat_params& p) {
    auto messages = conversation(p);
    if (!messages) return messages.error();
    auto tool_list = tools(p);
    if (!tool_list) return tool_list.error();
    auto kwargs = template_kwargs(p);
    if (!kwargs) return kwargs.error();
    ChatModelFacts facts = chat_model_facts(engine.file(), engine.tokenizer());
    auto tmpl = chosen_template(facts, p);
    if (!tmpl) return tmpl.error();
    std::string origin = tmpl->origin();
    const ChatRenderer renderer(std::move(*tmpl), std::move(facts));
    auto prompt = renderer.render(*messages, p.add_generation_prompt != 0, *tool_list, *kwargs);
    if (!prompt) return prompt.error();
    return RenderedChat{std::move(prompt->text), std::move(prompt->client),
                        std::move(prompt->tokens), std::move(origin)};
}

}  // namespace ferrox::api
