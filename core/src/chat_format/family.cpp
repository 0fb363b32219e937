#include "ferrox/chat_format/family.h"

#include <array>

namespace ferrox {
namespace {

using namespace std::string_view_literals;

constexpr std::string_view kNoTriggers[1] = {""};
constexpr std::string_view kToolCallTag[] = {"<tool_call>"};
constexpr std::string_view kLlama3Triggers[] = {"<|python_tag|>", "{\"name\""};
constexpr std::string_view kMistralTriggers[] = {"[TOOL_CALLS]"};
constexpr std::string_view kHarmonyTriggers[] = {" to=functions."};
constexpr std::string_view kDeepSeekTriggers[] = {"<｜tool▁calls▁begin｜>"};
constexpr std::string_view kGraniteTriggers[] = {"<|tool_call|>"};
constexpr std::string_view kFunctoolsTriggers[] = {"functools["};

constexpr std::string_view kHarmonyClose = "<|end|><|start|>assistant<|channel|>final<|message|>";

const std::array<ChatFamilyInfo, 12> kFamilies = {{
    {ChatFamily::Generic, "generic", std::span(kNoTriggers, 0), "", "", "", ""},
    {ChatFamily::ThinkOnly, "think", std::span(kNoTriggers, 0), "<think>", "</think>", "</think>",
     ""},
    {ChatFamily::Hermes, "hermes", kToolCallTag, "<think>", "</think>", "</think>",
     "<tool_call>\\n{\"name\": NAME, \"arguments\": ARGS}\\n</tool_call>"},
    {ChatFamily::Qwen3Coder, "qwen3-coder", kToolCallTag, "<think>", "</think>", "</think>",
     "<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</"
     "tool_call>"},
    {ChatFamily::Llama3, "llama3", kLlama3Triggers, "", "", "",
     "{\"name\": NAME, \"parameters\": ARGS} (the whole answer)"},
    {ChatFamily::Mistral, "mistral", kMistralTriggers, "[THINK]", "[/THINK]", "[/THINK]",
     "[TOOL_CALLS][{\"name\": NAME, \"arguments\": ARGS}] or [TOOL_CALLS]NAME[ARGS]ARGS"},
    {ChatFamily::Harmony, "harmony", kHarmonyTriggers, "<|channel|>analysis<|message|>", "<|end|>",
     kHarmonyClose,
     "<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>"},
    {ChatFamily::DeepSeek, "deepseek", kDeepSeekTriggers, "<think>", "</think>", "</think>",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜><"
     "｜tool▁calls▁end｜>"},
    {ChatFamily::Glm, "glm", kToolCallTag, "<think>", "</think>", "</think>",
     "<tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n</tool_call>"},
    {ChatFamily::Granite, "granite", kGraniteTriggers, "<think>", "</think>", "</think>",
     "<|tool_call|>[{\"name\": NAME, \"arguments\": ARGS}]"},
    {ChatFamily::Functools, "functools", kFunctoolsTriggers, "", "", "",
     "functools[{\"name\": NAME, \"arguments\": ARGS}]"},
    {ChatFamily::SmolLM3, "smollm3", kToolCallTag, "<think>", "</think>", "</think>",
     "<tool_call>\\n{\"name\": NAME, \"arguments\": ARGS}\\n</tool_call>"},
}};

bool has(std::string_view text, std::string_view needle) {
    return text.find(needle) != std::string_view::npos;
}

// The first rule that matches names the family. Order matters where one
// family's markers are a subset of another's (GLM and Qwen3-Coder also write
// <tool_call>; Granite 4 writes <tool_call> and is Hermes, Granite 3 does not).
ChatFamily family_of(std::string_view s) {
    if (has(s, "<|channel|>") && has(s, "<|message|>")) return ChatFamily::Harmony;
    if (has(s, "<｜tool▁calls▁begin｜>") || has(s, "tool▁calls▁begin")) return ChatFamily::DeepSeek;
    if (has(s, "<tool_call>") && has(s, "<arg_key>")) return ChatFamily::Glm;
    if (has(s, "<tool_call>") && has(s, "<function=") && has(s, "<parameter="))
        return ChatFamily::Qwen3Coder;
    if (has(s, "[TOOL_CALLS]")) return ChatFamily::Mistral;
    if (has(s, "<|start_of_role|>") && has(s, "<|tool_call|>")) return ChatFamily::Granite;
    if (has(s, "functools[") || (has(s, "<|tool|>") && has(s, "<|/tool|>")))
        return ChatFamily::Functools;
    if (has(s, "SmolLM")) return ChatFamily::SmolLM3;
    // MiniMax (<invoke>) and Apriel (<tool_calls>[...]) mention <tool_call> but write otherwise.
    if (has(s, "<tool_call>") && !has(s, "<invoke") && !has(s, "<tool_calls>"))
        return ChatFamily::Hermes;
    // Functionary 3.1 is Llama 3 based but writes <function=NAME>.
    if (has(s, "<|start_header_id|>") && (has(s, "<|python_tag|>") || has(s, "ipython")) &&
        !has(s, "<function="))
        return ChatFamily::Llama3;
    if (has(s, "<think>") || has(s, "</think>")) return ChatFamily::ThinkOnly;
    return ChatFamily::Generic;
}

}  // namespace

const ChatFamilyInfo& family_info(ChatFamily family) {
    for (const auto& f : kFamilies)
        if (f.family == family) return f;
    return kFamilies[0];
}

std::span<const ChatFamilyInfo> all_chat_families() { return kFamilies; }

const ChatFamilyInfo* find_chat_family(std::string_view name) {
    for (const auto& f : kFamilies)
        if (f.name == name) return &f;
    return nullptr;
}

DetectedChatFamily detect_family(std::string_view template_source) {
    DetectedChatFamily d;
    d.family = family_of(template_source);
    // A template that never reads `tools` cannot tell the model about them.
    d.supports_tools =
        !family_info(d.family).tool_triggers.empty() && has(template_source, "tools");
    d.fenced_call_arguments = d.family == ChatFamily::DeepSeek && has(template_source, "```json");
    return d;
}

bool reasoning_open_in_prompt(ChatFamily family, std::string_view prompt) {
    const std::string_view start = family_info(family).reasoning_start;
    if (start.empty()) return false;
    while (!prompt.empty() && (prompt.back() == ' ' || prompt.back() == '\n' ||
                               prompt.back() == '\t' || prompt.back() == '\r'))
        prompt.remove_suffix(1);
    return prompt.ends_with(start);
}

}  // namespace ferrox
