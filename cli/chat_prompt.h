// Chat prompts for `run --chat`, `ferrox chat` and `serve`: which template (the
// file's tokenizer.chat_template, --chat-template FILE|NAME, or the family's
// built-in with a warning). Rendering and tokenizing is the core's ChatRenderer.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/template/chat_renderer.h"
#include "ferrox/template/chat_template.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::cli {

// Registers --chat-template and --verbose-prompt on `cmd`.
struct ChatOptions {
    std::string chat_template;  // a file, or a built-in's name; empty: the GGUF's
    bool verbose_prompt = false;
};
void add_chat_options(CLI::App& cmd, ChatOptions& options);
// --chat-template alone (serve renders many prompts: it has no --verbose-prompt).
void add_chat_template_option(CLI::App& cmd, std::string& chat_template);

// ChatModelFacts, ChatPrompt and ChatRenderer live in the core
// (ferrox/template/chat_renderer.h), beside the engine that records provenance.

// --chat-template as ferrox.h takes it: a file's text with its path as the
// origin, or a built-in's name; all empty for an empty flag (the model's own).
// Neither a file nor a built-in is an error naming the flag.
struct TemplateFlag {
    std::string source, origin, name;
};
Expected<TemplateFlag> read_chat_template_flag(const std::string& flag);

// The template to use and where it came from. The GGUF's own unless `flag`
// names a file or a built-in; a file without one falls back to the family's
// built-in, with a warning naming it.
Expected<ChatTemplate> choose_chat_template(const ChatModelFacts& model, const std::string& flag);
Expected<ChatTemplate> choose_chat_template(const gguf::File& file, const std::string& flag);

// --verbose-prompt: the rendered prompt (escaped for the terminal) and its token ids, on stderr.
void print_verbose_prompt(const ChatPrompt& prompt);

}  // namespace ferrox::cli

namespace ferrox::cli {

// For `inspect`: which template a chat would use (origin, bytes, built-in
// fallback or not) and whether it renders a system + user conversation.
nlohmann::json chat_template_report(const gguf::File& file);
std::string chat_template_summary(const nlohmann::json& report);  // one line, terminal-safe

}  // namespace ferrox::cli
