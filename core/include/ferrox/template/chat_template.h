// Chat templates: the Jinja text a GGUF file carries in tokenizer.chat_template,
// rendered the way Hugging Face transformers renders it (jinja2's sandbox with
// trim_blocks and lstrip_blocks, raise_exception, strftime_now, and a tojson
// that does not escape non-ASCII). Our own engine: docs/templates.md lists
// what it covers; tests/template/ holds it to jinja2 byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox {

namespace tmpl {
struct Program;
}

// Budgets that stop a hostile or broken template instead of hanging or
// exhausting memory; exceeding one is an error naming the line.
struct ChatTemplateLimits {
    uint64_t max_steps = 5'000'000;  // statements + expressions + loop iterations
    int max_call_depth = 100;        // nested macro calls (recursion)
    size_t max_output = 64u << 20;   // bytes of rendered text
};

class FERROX_API ChatTemplate {
  public:
    // `origin` names where the text came from in errors: a path,
    // "tokenizer.chat_template" or "builtin:chatml". A syntax error, an unknown
    // tag, filter or test is refused here as "<origin>:<line>: <construct>: why".
    static Expected<ChatTemplate> parse(std::string source, std::string origin);

    // `context` is a JSON object of the template's variables (messages,
    // add_generation_prompt, bos_token, tools, ...); its key order is kept, as
    // Python dicts keep theirs, so tojson prints them in the caller's order.
    Expected<std::string> render(const nlohmann::ordered_json& context) const;

    const std::string& source() const { return source_; }
    const std::string& origin() const { return origin_; }
    void set_limits(const ChatTemplateLimits& limits) { limits_ = limits; }

  private:
    ChatTemplate() = default;
    std::shared_ptr<const tmpl::Program> program_;
    std::string source_, origin_;
    ChatTemplateLimits limits_;
};

// The variables transformers' apply_chat_template passes: messages, tools and
// documents (null when none), add_generation_prompt, bos_token, eos_token.
FERROX_API nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages,
                                               bool add_generation_prompt,
                                               const std::string& bos_token,
                                               const std::string& eos_token,
                                               const nlohmann::ordered_json& tools = nullptr);

// Templates ferrox ships, for files that carry none (and `--chat-template NAME`).
struct BuiltinChatTemplate {
    std::string_view name;
    std::string_view description;
    std::string_view source;
};
FERROX_API std::span<const BuiltinChatTemplate> builtin_chat_templates();
FERROX_API const BuiltinChatTemplate* find_builtin_chat_template(std::string_view name);
// The built-in a model family falls back to (general.architecture), or null.
FERROX_API const BuiltinChatTemplate* builtin_chat_template_for_arch(std::string_view arch);

}  // namespace ferrox
