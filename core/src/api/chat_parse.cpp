#include "chat_parse.h"

#include <algorithm>
#include <cstring>

#include "ferrox/template/chat_renderer.h"

namespace ferrox::api {
namespace {

Expected<ChatFamily> chosen_family(const Engine* engine, const ferrox_chat_parse_params& p) {
    constexpr size_t kMaxName = 64;
    if (p.family && p.chat_template) return make_error("give family or chat_template, not both");
    if (p.family) {
        const size_t n = strnlen(p.family, kMaxName + 1);
        const std::string_view name(p.family, std::min(n, kMaxName));
        const ChatFamilyInfo* f = n <= kMaxName ? find_chat_family(name) : nullptr;
        if (!f) {
            std::string names;
            for (const auto& known : all_chat_families())
                names += (names.empty() ? "" : ", ") + std::string(known.name);
            return make_error("family '{}': no such family ({})", name, names);
        }
        return f->family;
    }
    if (p.chat_template) {
        const size_t n = strnlen(p.chat_template, kMaxChatTemplateSource + 1);
        if (n > kMaxChatTemplateSource)
            return make_error("chat_template: more than {} bytes", kMaxChatTemplateSource);
        return detect_family(std::string_view(p.chat_template, n)).family;
    }
    if (!engine) return make_error("no model, family or chat_template to choose the family by");
    auto tmpl = model_chat_template(chat_template_facts(engine->file()),
                                    "ferrox_chat_parse_params.family or chat_template");
    if (!tmpl) return tmpl.error();
    return detect_family(tmpl->source()).family;
}

}  // namespace

Expected<ParsedChat> parse_chat_answer(const Engine* engine, const ferrox_chat_parse_params& p,
                                       std::string_view text) {
    if (text.size() > FERROX_CHAT_MAX_ANSWER)
        return make_error("text: {} bytes; at most {} (FERROX_CHAT_MAX_ANSWER)", text.size(),
                          FERROX_CHAT_MAX_ANSWER);
    auto family = chosen_family(engine, p);
    if (!family) return family.error();
    ChatParseOptions options;
    options.starts_in_reasoning = p.starts_in_reasoning != 0;
    options.id_seed = p.id_seed;
    options.limits.max_text = FERROX_CHAT_MAX_ANSWER;
    auto answer = parse_answer(*family, text, options);
    if (!answer) return answer.error();
    return ParsedChat{*family, std::move(*answer)};
}

}  // namespace ferrox::api
