// ferrox.h's chat entries: a template applied to messages (the same renderer
// as the CLI and server), and an answer parsed into content, reasoning and tool calls.
#include <string>
#include <vector>

#include "c_handles.h"
#include "chat_apply.h"
#include "chat_parse.h"
#include "ferrox/template/chat_renderer.h"

// This file defines the exported ferrox_X_params_default function (the frozen
// one older programs call); ferrox.h's macro of that name is for callers.
#undef ferrox_chat_params_default
#undef ferrox_chat_parse_params_default

using namespace ferrox;
using namespace ferrox::c_api;

namespace {

// What the exported ferrox_X_params_default functions write, frozen: each
// struct's size in the API version that introduced the function (docs/api.md,
// "Struct sizes").
constexpr size_t kChatParamsSize_0_4 = offsetof(ferrox_chat_params, kwargs_json);
// Unchanged since 0.5: when it grows, this becomes offsetof(the first new member).
constexpr size_t kChatParseParamsSize_0_5 = sizeof(ferrox_chat_parse_params);

ferrox_chat_params chat_defaults() {
    ferrox_chat_params p{};
    p.struct_size = sizeof p;
    p.add_generation_prompt = 1;
    return p;
}

ferrox_chat_parse_params chat_parse_defaults() {
    ferrox_chat_parse_params p{};
    p.struct_size = sizeof p;
    return p;
}

}  // namespace

extern "C" {

void ferrox_chat_params_init(ferrox_chat_params* p, size_t size) {
    write_defaults(p, size, chat_defaults());
}

void ferrox_chat_params_default(ferrox_chat_params* p) {
    write_defaults(p, kChatParamsSize_0_4, chat_defaults());
}

ferrox_code ferrox_chat_apply_template(const ferrox_model* m, const ferrox_chat_params* given,
                                       ferrox_chat_prompt** out, ferrox_call_status* status) {
    if (!m || !given || !out)
        return invalid(status, "ferrox_chat_apply_template: model, params or out is NULL");
    *out = nullptr;
    ferrox_chat_params p;
    ferrox_chat_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_chat_params")) return FERROX_CODE_INVALID_ARGUMENT;
    return guarded(status, [&]() -> ferrox_code {
        auto rendered = api::apply_chat_template(*m->engine, p);
        if (!rendered) return invalid(status, rendered.error().message());
        auto prompt = std::make_unique<ferrox_chat_prompt>();
        prompt->text = std::move(rendered->text);
        prompt->tokens = std::move(rendered->tokens);
        prompt->origin = std::move(rendered->origin);
        // Segments of the text in its final place (a moved short string moves its bytes).
        for (const TextSegment& seg : prompt_segments(prompt->text, rendered->client))
            prompt->segments.push_back({seg.text.data(), seg.text.size(), seg.parse_special});
        *out = prompt.release();
        return ok(status);
    });
}

void ferrox_chat_prompt_free(ferrox_chat_prompt* prompt) { delete prompt; }

const char* ferrox_chat_prompt_text(const ferrox_chat_prompt* prompt, size_t* len) {
    if (len) *len = prompt ? prompt->text.size() : 0;
    return prompt ? prompt->text.c_str() : "";
}

const ferrox_text_segment* ferrox_chat_prompt_segments(const ferrox_chat_prompt* prompt,
                                                       size_t* n) {
    if (n) *n = prompt ? prompt->segments.size() : 0;
    return prompt ? prompt->segments.data() : nullptr;
}

const int32_t* ferrox_chat_prompt_tokens(const ferrox_chat_prompt* prompt, size_t* n) {
    if (n) *n = prompt ? prompt->tokens.size() : 0;
    return prompt ? prompt->tokens.data() : nullptr;
}

const char* ferrox_chat_prompt_template(const ferrox_chat_prompt* prompt) {
    return prompt ? prompt->origin.c_str() : "";
}

void ferrox_chat_parse_params_init(ferrox_chat_parse_params* p, size_t size) {
    write_defaults(p, size, chat_parse_defaults());
}

void ferrox_chat_parse_params_default(ferrox_chat_parse_params* p) {
    write_defaults(p, kChatParseParamsSize_0_5, chat_parse_defaults());
}

ferrox_code ferrox_chat_parse(const ferrox_model* m, const ferrox_chat_parse_params* given,
                              const char* text, size_t len, ferrox_chat_parsed** out,
                              ferrox_call_status* status) {
    if (!given || !out || (!text && len))
        return invalid(status,
                       "ferrox_chat_parse: params or out is NULL, or text is NULL with len");
    *out = nullptr;
    ferrox_chat_parse_params p;
    ferrox_chat_parse_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_chat_parse_params"))
        return FERROX_CODE_INVALID_ARGUMENT;
    return guarded(status, [&]() -> ferrox_code {
        auto parsed = api::parse_chat_answer(m ? m->engine.get() : nullptr, p,
                                             std::string_view(text ? text : "", len));
        if (!parsed) return invalid(status, parsed.error().message());
        auto result = std::make_unique<ferrox_chat_parsed>();
        result->family = std::string(family_info(parsed->family).name);
        result->answer = std::move(parsed->answer);
        for (const ChatToolCall& c : result->answer.tool_calls)
            result->calls.push_back(
                {c.id.c_str(), c.name.c_str(), c.arguments.c_str(), c.arguments.size()});
        *out = result.release();
        return ok(status);
    });
}

void ferrox_chat_parsed_free(ferrox_chat_parsed* parsed) { delete parsed; }

const char* ferrox_chat_parsed_family(const ferrox_chat_parsed* parsed) {
    return parsed ? parsed->family.c_str() : "";
}

const char* ferrox_chat_parsed_content(const ferrox_chat_parsed* parsed, size_t* len) {
    if (len) *len = parsed ? parsed->answer.content.size() : 0;
    return parsed ? parsed->answer.content.c_str() : "";
}

const char* ferrox_chat_parsed_reasoning(const ferrox_chat_parsed* parsed, size_t* len) {
    if (len) *len = parsed ? parsed->answer.reasoning.size() : 0;
    return parsed ? parsed->answer.reasoning.c_str() : "";
}

size_t ferrox_chat_parsed_n_tool_calls(const ferrox_chat_parsed* parsed) {
    return parsed ? parsed->calls.size() : 0;
}

const ferrox_chat_tool_call* ferrox_chat_parsed_tool_call(const ferrox_chat_parsed* parsed,
                                                          size_t i) {
    return parsed && i < parsed->calls.size() ? &parsed->calls[i] : nullptr;
}

}  // extern "C"
