#include "ferrox/template/chat_renderer.h"

#include "ferrox/gguf/file.h"
#include "ferrox/log.h"

namespace ferrox {
namespace {

// Read in place: a copy of the whole vocabulary (262144 strings for Gemma 3)
// per render would cost more than the render.
std::string token_text(const gguf::File& file, int32_t id) {
    const gguf::Value* value = file.find("tokenizer.ggml.tokens");
    const auto* texts = value ? std::get_if<gguf::Array>(value) : nullptr;
    if (id < 0 || !texts || texts->element_type() != gguf::ValueType::String ||
        static_cast<uint64_t>(id) >= texts->size())
        return {};
    return std::string(texts->string_at(static_cast<uint64_t>(id)));
}

}  // namespace

ChatModelFacts chat_template_facts(const gguf::File& file) {
    ChatModelFacts f;
    f.path = file.path().string();
    constexpr const char* key = "tokenizer.chat_template";
    if (file.find(key)) {
        auto text = file.get_string(key);
        if (text)
            f.file_template = std::move(*text);
        else
            f.template_error = text.error().message();
    }
    const auto arch = file.get_string_or("general.architecture", "");
    if (arch) f.arch = *arch;
    return f;
}

ChatModelFacts chat_model_facts(const gguf::File& file, const Tokenizer& tok) {
    ChatModelFacts f = chat_template_facts(file);
    f.bos = tok.bos();
    f.bos_text = token_text(file, tok.bos());
    f.eos_text = token_text(file, tok.eos());
    f.encode = [&tok](std::string_view text, bool add_special, bool parse_special) {
        return tok.encode(text, add_special, parse_special);
    };
    f.encode_segments = [&tok](std::span<const TextSegment> segments, bool add_special) {
        return tok.encode(segments, add_special);
    };
    return f;
}

std::string builtin_chat_template_names() {
    std::string names;
    for (const auto& b : builtin_chat_templates())
        names += (names.empty() ? "" : ", ") + std::string(b.name);
    return names;
}

Expected<ChatTemplate> model_chat_template(const ChatModelFacts& model, std::string_view give_one) {
    constexpr const char* key = "tokenizer.chat_template";
    if (!model.template_error.empty()) return make_error("{}", model.template_error);
    if (model.file_template) return ChatTemplate::parse(*model.file_template, key);
    const auto* b = builtin_chat_template_for_arch(model.arch);
    if (!b)
        return make_error(
            "{}: the file has no {} and ferrox has no built-in template for architecture '{}'; "
            "give one with {} ({})",
            model.path, key, model.arch, give_one, builtin_chat_template_names());
    logger().warn("the model file has no {}; using the built-in '{}' template for '{}' ({})", key,
                  b->name, model.arch, b->description);
    return ChatTemplate::parse(std::string(b->source), "builtin:" + std::string(b->name));
}

std::vector<TextSegment> prompt_segments(std::string_view text, std::span<const TextRange> client) {
    std::vector<TextSegment> segments;
    size_t at = 0;
    for (const TextRange& r : client) {
        // The engine writes ranges in order, inside the text; clamp anyway so a
        // bug there can only make more text client text, never read outside.
        const size_t begin = std::min(std::max(r.begin, at), text.size());
        const size_t end = std::min(std::max(r.end, begin), text.size());
        if (begin > at) segments.push_back({text.substr(at, begin - at), true});
        if (end > begin) segments.push_back({text.substr(begin, end - begin), false});
        at = std::max(at, end);
    }
    if (at < text.size()) segments.push_back({text.substr(at), true});
    return segments;
}

ChatRenderer::ChatRenderer(ChatTemplate tmpl, ChatModelFacts model)
    : template_(std::move(tmpl)), model_(std::move(model)) {}

ChatRenderer::ChatRenderer(ChatTemplate tmpl, const gguf::File& file, const Tokenizer& tok)
    : ChatRenderer(std::move(tmpl), chat_model_facts(file, tok)) {}

Expected<ChatPrompt> ChatRenderer::render(const nlohmann::ordered_json& messages,
                                          bool add_generation_prompt,
                                          const nlohmann::ordered_json& tools,
                                          const nlohmann::ordered_json& kwargs) const {
    if (!kwargs.is_null() && !kwargs.is_object())
        return make_error("template kwargs: an object of variables, not {}", kwargs.type_name());
    if (kwargs.size() > kMaxChatKwargs)
        return make_error("template kwargs: {} variables; at most {}", kwargs.size(),
                          kMaxChatKwargs);
    for (std::string_view key : kChatContextKeys)
        if (kwargs.is_object() && kwargs.contains(std::string(key)))
            return make_error("template kwargs: '{}' is set by the renderer, not a kwarg", key);
    auto marked =
        template_.render_marked(chat_context(messages, add_generation_prompt, model_.bos_text,
                                             model_.eos_text, tools, kwargs),
                                kTrustedChatKeys);
    if (!marked) return marked.error();
    ChatPrompt p{std::move(marked->text), {}, std::move(marked->client)};
    const std::vector<TextSegment> segments = prompt_segments(p.text, p.client);
    if (model_.encode_segments) {
        p.tokens = model_.encode_segments(segments, true);
    } else {
        bool first = true;
        for (const TextSegment& s : segments) {
            auto ids = model_.encode(s.text, first, s.parse_special);
            first = false;
            p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
        }
    }
    // A template that writes bos_token itself and a vocabulary that adds BOS give two.
    if (p.tokens.size() >= 2 && model_.bos >= 0 && p.tokens[0] == model_.bos &&
        p.tokens[1] == model_.bos)
        p.tokens.erase(p.tokens.begin());
    return p;
}

}  // namespace ferrox
