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
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox {

namespace tmpl {
struct Program;
}

// Budgets that stop a hostile or broken template instead of hanging or
// exhausting memory; exceeding one is an error naming the template line and
// the budget. docs/security.md lists them with the fixed limits beside them.
struct ChatTemplateLimits {
    // statements + expressions + loop iterations + builtin work (a comparison
    // is one: `unique` pays n^2, a sort n log n, `in` over a list n)
    uint64_t max_steps = 5'000'000;
    int max_call_depth = 100;                   // nested macro calls (recursion)
    size_t max_output = 64u << 20;              // bytes of rendered text, and of any one string
    uint64_t max_memory = uint64_t{512} << 20;  // bytes of strings and list slots built, in total
    int max_eval_depth = 400;  // statements/expressions evaluated inside each other
};

// The largest template source parse() accepts (a GGUF's, a file's, a request's).
inline constexpr size_t kMaxChatTemplateSource = size_t{4} << 20;

// A byte range [begin, end) of rendered text.
struct TextRange {
    size_t begin = 0, end = 0;
};

// Rendered text, and the ranges of it that were written from client data
// (message contents and parts, names, tool calls and results, tools):
// recorded by the engine as it renders, never found by searching the text.
struct MarkedPrompt {
    std::string text;
    std::vector<TextRange> client;
};

class FERROX_API ChatTemplate {
  public:
    // `origin` names where the text came from in errors: a path,
    // "tokenizer.chat_template" or "builtin:chatml". A syntax error, an unknown
    // tag, filter or test is refused here as "<origin>:<line>: <construct>: why".
    // A source over kMaxChatTemplateSource bytes is refused before lexing.
    static Expected<ChatTemplate> parse(std::string source, std::string origin);

    // `context` is a JSON object of the template's variables (messages,
    // add_generation_prompt, bos_token, tools, ...); its key order is kept, as
    // Python dicts keep theirs, so tojson prints them in the caller's order.
    Expected<std::string> render(const nlohmann::ordered_json& context) const;
    // As render(), recording where client text went: every string (and
    // number) under a context key other than `trusted` is client text, and
    // so is everything the template computes from it. Trusted keys are the
    // caller's own (bos_token, eos_token, add_generation_prompt).
    Expected<MarkedPrompt> render_marked(const nlohmann::ordered_json& context,
                                         std::span<const std::string_view> trusted) const;

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
// documents (null when none), add_generation_prompt, bos_token, eos_token,
// then the members of `kwargs` (an object: the template's own switches, such
// as enable_thinking or reasoning_effort), as transformers passes its
// **kwargs; a member named like one of the first six is left out
// (ChatRenderer refuses it).
FERROX_API nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages,
                                               bool add_generation_prompt,
                                               const std::string& bos_token,
                                               const std::string& eos_token,
                                               const nlohmann::ordered_json& tools = nullptr,
                                               const nlohmann::ordered_json& kwargs = nullptr);
// The context keys chat_context sets itself (kwargs may not name them).
inline constexpr std::string_view kChatContextKeys[] = {
    "messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"};

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
