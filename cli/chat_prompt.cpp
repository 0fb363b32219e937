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
                   "Chat template: a Jinja file, or a built-in (" + builtin_chat_template_names() +
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

Expected<TemplateFlag> read_chat_template_flag(const std::string& flag) {
    TemplateFlag chosen;
    if (flag.empty()) return chosen;
    std::error_code ec;
    if (std::filesystem::exists(flag, ec)) {
        auto text = read_template_file(flag);
        if (!text) return text.error();
        chosen.source = std::move(*text);
        chosen.origin = flag;
    } else if (find_builtin_chat_template(flag)) {
        chosen.name = flag;
    } else {
        return make_error("--chat-template {}: neither a file nor a built-in template ({})", flag,
                          builtin_chat_template_names());
    }
    return chosen;
}

Expected<ChatTemplate> choose_chat_template(const ChatModelFacts& model, const std::string& flag) {
    auto chosen = read_chat_template_flag(flag);
    if (!chosen) return chosen.error();
    if (!chosen->origin.empty()) return ChatTemplate::parse(std::move(chosen->source), flag);
    if (!chosen->name.empty()) {
        const auto* b =
            find_builtin_chat_template(chosen->name);  // read_chat_template_flag found it
        return ChatTemplate::parse(std::string(b->source), "builtin:" + std::string(b->name));
    }
    return model_chat_template(model, "--chat-template FILE|NAME");
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

}  // namespace ferrox::cli
