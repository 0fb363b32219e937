// A conversation to prompt tokens: the chat template renders it, the engine
// records which bytes were written from the request (contents and content
// parts, names, tool calls and their ids and arguments, tool results, tools),
// and those bytes are tokenized without special-token parsing while the
// template's own text keeps its control tokens. Used by `run --chat`, `chat`
// and the server alike.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/template/chat_template.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox {

namespace gguf {
class File;
}

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
    // The segments as one text (merges run across their edges), special tokens
    // only inside segments that allow them (Tokenizer::encode). When absent,
    // each segment is encoded on its own.
    std::function<std::vector<int32_t>(std::span<const TextSegment> segments, bool add_special)>
        encode_segments;
};
// The file's side alone (choosing a template needs no tokenizer).
FERROX_API ChatModelFacts chat_template_facts(const gguf::File& file);
FERROX_API ChatModelFacts chat_model_facts(const gguf::File& file, const Tokenizer& tok);

struct ChatPrompt {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TextRange> client;  // where text from the request lies in `text`
};

// The model's own template: the file's tokenizer.chat_template, or, when the
// file has none, its family's built-in (with a warning naming it in the log).
// An unreadable key, or a file with neither, is an error naming the file;
// `give_one` says how a caller names another ("--chat-template FILE|NAME").
FERROX_API Expected<ChatTemplate> model_chat_template(const ChatModelFacts& model,
                                                      std::string_view give_one);
// The built-ins' names, "chatml, llama3, gemma", for messages.
FERROX_API std::string builtin_chat_template_names();

// The context keys the renderer supplies itself; every other one is client text.
inline constexpr std::string_view kTrustedChatKeys[] = {"add_generation_prompt", "bos_token",
                                                        "eos_token"};

inline constexpr size_t kMaxChatKwargs = 64;

// The template's own text and the client's, as tokenizer segments, in order.
FERROX_API std::vector<TextSegment> prompt_segments(std::string_view text,
                                                    std::span<const TextRange> client);

class FERROX_API ChatRenderer {
  public:
    ChatRenderer(ChatTemplate tmpl, ChatModelFacts model);
    ChatRenderer(ChatTemplate tmpl, const gguf::File& file, const Tokenizer& tok);
    // BOS is added as the vocabulary says unless the template wrote it already.
    // `kwargs`: null or an object of extra template variables (enable_thinking,
    // reasoning_effort, a request's chat_template_kwargs), client data like
    // the messages; at most kMaxChatKwargs members, none named like a key of
    // kChatContextKeys (an error names it).
    Expected<ChatPrompt> render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const nlohmann::ordered_json& tools = nullptr,
                                const nlohmann::ordered_json& kwargs = nullptr) const;
    const ChatTemplate& chat_template() const { return template_; }

  private:
    ChatTemplate template_;
    ChatModelFacts model_;
};

}  // namespace ferrox
