// Chat prompts for `run --chat` and `ferrox chat`: which template (the file's
// tokenizer.chat_template, --chat-template FILE|NAME, or the family's built-in
// with a warning), rendering a conversation, and tokenizing the result so that
// the template's own text may hold special tokens while message text may not.
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

// What choosing and rendering a template reads from a model: its file's
// template, architecture and BOS / EOS text, and its tokenizer. Built from
// the C++ core's file and tokenizer, or through ferrox.h (`ferrox run`).
struct ChatModelFacts {
    std::string path;                          // the model file, for messages
    std::optional<std::string> file_template;  // tokenizer.chat_template, when the file has one
    std::string template_error;                // the key is there but unreadable
    std::string arch;                          // general.architecture, "" when absent
    int32_t bos = -1;
    std::string bos_text, eos_text;  // the vocabulary's text of BOS / EOS; "" when none
    // Text to token ids: BOS as the vocabulary says when add_special, control
    // tokens written in the text when parse_special.
    std::function<std::vector<int32_t>(std::string_view text, bool add_special, bool parse_special)>
        encode;
};
ChatModelFacts chat_model_facts(const gguf::File& file, const Tokenizer& tok);

// The template to use and where it came from. The GGUF's own unless `flag`
// names a file or a built-in; a file without one falls back to the family's
// built-in, with a warning naming it.
Expected<ChatTemplate> choose_chat_template(const ChatModelFacts& model, const std::string& flag);
Expected<ChatTemplate> choose_chat_template(const gguf::File& file, const std::string& flag);

struct ChatPrompt {
    std::string text;
    std::vector<int32_t> tokens;
};

// The conversation to tokens. Each message's content is found in the rendered
// text and tokenized without special-token parsing (its "<|im_end|>" stays
// text); the rest with it. BOS is added as the vocabulary says unless the
// template wrote it already.
class ChatRenderer {
  public:
    ChatRenderer(ChatTemplate tmpl, ChatModelFacts model);
    ChatRenderer(ChatTemplate tmpl, const gguf::File& file, const Tokenizer& tok);
    Expected<ChatPrompt> render(const nlohmann::ordered_json& messages,
                                bool add_generation_prompt) const;
    const ChatTemplate& chat_template() const { return template_; }

  private:
    ChatTemplate template_;
    ChatModelFacts model_;
};

// --verbose-prompt: the rendered prompt (escaped for the terminal) and its token ids, on stderr.
void print_verbose_prompt(const ChatPrompt& prompt);

}  // namespace ferrox::cli

namespace ferrox::cli {

// For `inspect`: which template a chat would use (origin, bytes, built-in
// fallback or not) and whether it renders a system + user conversation.
nlohmann::json chat_template_report(const gguf::File& file);
std::string chat_template_summary(const nlohmann::json& report);  // one line, terminal-safe

// `run --chat`: one user turn through the chosen template, ready to generate.
Expected<ChatPrompt> single_turn_prompt(const ChatModelFacts& model, const ChatOptions& options,
                                        const std::string& user);

}  // namespace ferrox::cli
