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
    if (size > kMaxChatTemplateSource)
        return make_error("--chat-template {}: {} bytes; a chat template is at most {} bytes", path,
                          size, kMaxChatTemplateSource);
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("--chat-template {}: cannot open: {}", path, std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
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

Expected<ChatTemplate> choose_chat_template(const gguf::File& file, const std::string& flag) {
    return choose_chat_template(chat_template_facts(file), flag);
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
