#include "chat_prompt.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ferrox/escape.h"
#include "ferrox/log.h"

namespace ferrox::cli {
namespace {

constexpr const char* kTemplateKey = "tokenizer.chat_template";
constexpr uintmax_t kMaxTemplateFile = 4u << 20;  // real templates are a few KiB

std::string builtin_names() {
    std::string names;
    for (const auto& b : builtin_chat_templates())
        names += (names.empty() ? "" : ", ") + std::string(b.name);
    return names;
}

Expected<std::string> read_template_file(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return make_error("--chat-template {}: {}", path, ec.message());
    if (size > kMaxTemplateFile)
        return make_error("--chat-template {}: {} bytes; a chat template is at most {} bytes", path,
                          size, kMaxTemplateFile);
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("--chat-template {}: cannot open: {}", path, std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string token_text(const gguf::File& file, int32_t id) {
    if (id < 0) return {};
    auto tokens = file.get_string_array("tokenizer.ggml.tokens");
    if (!tokens || static_cast<size_t>(id) >= tokens->size()) return {};
    return (*tokens)[static_cast<size_t>(id)];
}

// The file's side of the facts (no tokenizer needed to choose a template).
ChatModelFacts template_facts(const gguf::File& file) {
    ChatModelFacts f;
    f.path = file.path().string();
    if (file.find(kTemplateKey)) {
        auto text = file.get_string(kTemplateKey);
        if (text)
            f.file_template = std::move(*text);
        else
            f.template_error = text.error().message();
    }
    const auto arch = file.get_string_or("general.architecture", "");
    if (arch) f.arch = *arch;
    return f;
}

}  // namespace

void add_chat_template_option(CLI::App& cmd, std::string& chat_template) {
    cmd.add_option("--chat-template", chat_template,
                   "Chat template: a Jinja file, or a built-in (" + builtin_names() +
                       "); default: the model file's tokenizer.chat_template");
}

void add_chat_options(CLI::App& cmd, ChatOptions& options) {
    add_chat_template_option(cmd, options.chat_template);
    cmd.add_flag("--verbose-prompt", options.verbose_prompt,
                 "Print the rendered prompt and its token ids to stderr before generating");
}

ChatModelFacts chat_model_facts(const gguf::File& file, const Tokenizer& tok) {
    ChatModelFacts f = template_facts(file);
    f.bos = tok.bos();
    f.bos_text = token_text(file, tok.bos());
    f.eos_text = token_text(file, tok.eos());
    f.encode = [&tok](std::string_view text, bool add_special, bool parse_special) {
        return tok.encode(text, add_special, parse_special);
    };
    return f;
}

Expected<ChatTemplate> choose_chat_template(const gguf::File& file, const std::string& flag) {
    return choose_chat_template(template_facts(file), flag);
}

Expected<ChatTemplate> choose_chat_template(const ChatModelFacts& model, const std::string& flag) {
    if (!flag.empty()) {
        std::error_code ec;
        if (std::filesystem::exists(flag, ec)) {
            auto text = read_template_file(flag);
            if (!text) return text.error();
            return ChatTemplate::parse(std::move(*text), flag);
        }
        if (const auto* b = find_builtin_chat_template(flag))
            return ChatTemplate::parse(std::string(b->source), "builtin:" + std::string(b->name));
        return make_error("--chat-template {}: neither a file nor a built-in template ({})", flag,
                          builtin_names());
    }
    if (!model.template_error.empty()) return make_error("{}", model.template_error);
    if (model.file_template) return ChatTemplate::parse(*model.file_template, kTemplateKey);
    const std::string& arch = model.arch;
    const auto* b = builtin_chat_template_for_arch(arch);
    if (!b)
        return make_error(
            "{}: the file has no {} and ferrox has no built-in template for architecture '{}'; "
            "give one with --chat-template FILE|NAME ({})",
            model.path, kTemplateKey, arch, builtin_names());
    logger().warn("the model file has no {}; using the built-in '{}' template for '{}' ({})",
                  kTemplateKey, b->name, arch, b->description);
    return ChatTemplate::parse(std::string(b->source), "builtin:" + std::string(b->name));
}

ChatRenderer::ChatRenderer(ChatTemplate tmpl, ChatModelFacts model)
    : template_(std::move(tmpl)), model_(std::move(model)) {}

ChatRenderer::ChatRenderer(ChatTemplate tmpl, const gguf::File& file, const Tokenizer& tok)
    : ChatRenderer(std::move(tmpl), chat_model_facts(file, tok)) {}

Expected<ChatPrompt> ChatRenderer::render(const nlohmann::ordered_json& messages,
                                          bool add_generation_prompt) const {
    auto text = template_.render(
        chat_context(messages, add_generation_prompt, model_.bos_text, model_.eos_text));
    if (!text) return text.error();
    ChatPrompt p{std::move(*text), {}};

    // Segments of the rendered text: [begin, end) spans of message content,
    // found in order. Content the template rewrote (trimmed, say) is looked for
    // trimmed; content that cannot be found but holds special-token text is
    // refused rather than parsed as tokens.
    std::vector<std::pair<size_t, size_t>> spans;
    size_t from = 0;
    for (const auto& m : messages) {
        if (!m.contains("content") || !m["content"].is_string()) continue;
        std::string content = m["content"].get<std::string>();
        if (content.empty()) continue;
        const bool has_special =
            model_.encode(content, false, true) != model_.encode(content, false, false);
        size_t at = p.text.find(content, from);
        if (at == std::string::npos) {
            const size_t b = content.find_first_not_of(" \t\n\r");
            const size_t e = content.find_last_not_of(" \t\n\r");
            if (b != std::string::npos) {
                content = content.substr(b, e - b + 1);
                at = p.text.find(content, from);
            }
        }
        if (at == std::string::npos) {
            if (has_special)
                return make_error(
                    "{}: a message holds special-token text that the template "
                    "rewrites; refusing to parse it as tokens",
                    template_.origin());
            continue;
        }
        if (has_special) spans.emplace_back(at, at + content.size());
        from = at + content.size();
    }
    if (spans.empty()) {
        // Nothing in the messages reads as a special token: one pass is the same
        // as tokenizing the segments apart, and keeps the merges across them.
        p.tokens = model_.encode(p.text, true, true);
    } else {
        size_t pos = 0;
        bool first = true;
        auto add = [&](size_t b, size_t e, bool special) {
            if (e <= b) return;
            auto ids = model_.encode(std::string_view(p.text).substr(b, e - b), first, special);
            first = false;
            p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
        };
        for (const auto& [b, e] : spans) {
            add(pos, b, true);
            add(b, e, false);
            pos = e;
        }
        add(pos, p.text.size(), true);
    }
    // A template that writes bos_token itself and a vocabulary that adds BOS give two.
    if (p.tokens.size() >= 2 && model_.bos >= 0 && p.tokens[0] == model_.bos &&
        p.tokens[1] == model_.bos)
        p.tokens.erase(p.tokens.begin());
    return p;
}

void print_verbose_prompt(const ChatPrompt& prompt) {
    std::string ids;
    for (int32_t t : prompt.tokens) ids += (ids.empty() ? "" : ", ") + std::to_string(t);
    std::fprintf(stderr, "prompt (%zu bytes):\n%s\nprompt tokens (%zu): [%s]\n", prompt.text.size(),
                 escape_text(prompt.text, EscapeFor::Text).c_str(), prompt.tokens.size(),
                 ids.c_str());
}

}  // namespace ferrox::cli

namespace ferrox::cli {

nlohmann::json chat_template_report(const gguf::File& file) {
    nlohmann::json r;
    const bool in_file = file.find(kTemplateKey) != nullptr;
    const auto arch_key = file.get_string_or("general.architecture", "");
    const auto* fallback = builtin_chat_template_for_arch(arch_key ? *arch_key : std::string());
    Expected<ChatTemplate> t =
        make_error("the file has no {} and its family no built-in", kTemplateKey);
    if (in_file) {
        auto text = file.get_string(kTemplateKey);
        t = text ? ChatTemplate::parse(std::move(*text), kTemplateKey)
                 : Expected<ChatTemplate>(text.error());
        r["origin"] = kTemplateKey;
    } else if (fallback) {
        t = ChatTemplate::parse(std::string(fallback->source),
                                "builtin:" + std::string(fallback->name));
        r["origin"] = "builtin:" + std::string(fallback->name);
    } else {
        r["origin"] = nullptr;
    }
    r["in_file"] = in_file;
    if (in_file) {
        auto text = file.get_string(kTemplateKey);
        r["bytes"] = text ? text->size() : 0;
    } else if (fallback) {
        r["bytes"] = fallback->source.size();
    }
    if (!t) {
        r["renders"] = false;
        r["error"] = t.error().message();
        return r;
    }
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "system"}, {"content", "You are helpful."}});
    messages.push_back({{"role", "user"}, {"content", "Hello!"}});
    auto text = t->render(chat_context(messages, true, "<bos>", "<eos>"));
    r["renders"] = static_cast<bool>(text);
    if (!text) r["error"] = text.error().message();
    return r;
}

std::string chat_template_summary(const nlohmann::json& r) {
    std::string line = "chat template: ";
    if (r["origin"].is_null())
        line += "none";
    else
        line += r["origin"].get<std::string>() + " (" + std::to_string(r.value("bytes", 0)) +
                " bytes" +
                (r["in_file"].get<bool>() ? "" : ", the file has none: built-in fallback") + ")";
    line += r["renders"].get<bool>() ? ", renders a system + user turn"
                                     : "; does not render: " + r.value("error", std::string());
    return escape_text(line, EscapeFor::Text);
}

Expected<ChatPrompt> single_turn_prompt(const ChatModelFacts& model, const ChatOptions& options,
                                        const std::string& user) {
    auto chosen = choose_chat_template(model, options.chat_template);
    if (!chosen) return chosen.error();
    ChatRenderer renderer(std::move(*chosen), model);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", user}});
    return renderer.render(messages, true);
}

}  // namespace ferrox::cli
