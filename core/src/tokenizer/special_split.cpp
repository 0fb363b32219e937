#include "tokenizer/special_split.h"

namespace ferrox::tokenizer_detail {
namespace {

// C isspace in the "C" locale, which is what the reference strips.
bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special) {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({text, kNoToken});

    for (const int32_t id : vocab.special_tokens()) {
        const TokenType type = vocab.type(id);
        if (!parse_special && type != TokenType::user_defined) continue;
        const std::string_view needle = vocab.text(id);
        if (needle.empty()) continue;

        std::vector<Fragment> next;
        next.reserve(fragments.size());
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                next.push_back(f);
                continue;
            }
            std::string_view rest = f.text;
            for (size_t at = rest.find(needle); at != std::string_view::npos;
                 at = rest.find(needle)) {
                std::string_view left = rest.substr(0, at);
                if (vocab.strips_left(id))
                    while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
                if (!left.empty()) next.push_back({left, kNoToken});
                next.push_back({needle, id});
                rest.remove_prefix(at + needle.size());
                if (vocab.strips_right(id))
                    while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
            }
            if (!rest.empty()) next.push_back({rest, kNoToken});
        }
        fragments = std::move(next);
    }
    return fragments;
}

}  // namespace ferrox::tokenizer_detail
