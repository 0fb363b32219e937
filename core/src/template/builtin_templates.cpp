// The chat formats ferrox knows without a template in the file, written as
// Jinja for the same engine (so a fallback renders exactly as a file's would).
// They take no bos_token: the tokenizer adds BOS itself.
#include "ferrox/template/chat_template.h"

namespace ferrox {
namespace {

constexpr std::string_view kChatml = R"({%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)";

constexpr std::string_view kLlama3 = R"({%- for message in messages -%}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)";

// Gemma has no system role: a system message is prefixed to the first user turn.
constexpr std::string_view kGemma = R"({%- if messages and messages[0]['role'] == 'system' -%}
{%- set prefix = messages[0]['content'] + '\n\n' -%}
{%- set turns = messages[1:] -%}
{%- else -%}
{%- set prefix = '' -%}
{%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<start_of_turn>' + role + '\n' + (prefix if loop.first else '') + message['content'] + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\n' -}}
{%- endif -%}
)";

constexpr BuiltinChatTemplate kBuiltins[] = {
    {"chatml", "ChatML (<|im_start|>role ... <|im_end|>): Qwen 2/2.5/3", kChatml},
    {"llama3", "Llama 3 headers (<|start_header_id|>role<|end_header_id|>)", kLlama3},
    {"gemma", "Gemma (<start_of_turn>user/model ... <end_of_turn>)", kGemma},
};

}  // namespace

std::span<const BuiltinChatTemplate> builtin_chat_templates() { return kBuiltins; }

const BuiltinChatTemplate* find_builtin_chat_template(std::string_view name) {
    for (const BuiltinChatTemplate& t : kBuiltins)
        if (t.name == name) return &t;
    return nullptr;
}

const BuiltinChatTemplate* builtin_chat_template_for_arch(std::string_view arch) {
    if (arch == "gemma3" || arch == "gemma2" || arch == "gemma")
        return find_builtin_chat_template("gemma");
    if (arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" || arch == "qwen2vl" ||
        arch == "qwen3vl")
        return find_builtin_chat_template("chatml");
    if (arch == "llama") return find_builtin_chat_template("llama3");
    return nullptr;
}

}  // namespace ferrox
