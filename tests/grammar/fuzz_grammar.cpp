// libFuzzer target: bytes as "GRAMMAR\0TEXT". Parse the grammar under tight
// limits; when it parses, match TEXT byte by byte and compute the allowed
// tokens of a small vocabulary as it goes. Any failure must be an Error -- a
// crash, a hang or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/grammar/gbnf.h"
#include "ferrox/grammar/matcher.h"

namespace {

std::shared_ptr<const ferrox::grammar::TokenTrie> small_vocab() {
    std::vector<std::string> pieces{"",   "a", "ab",       "{",    "\"", "\":", " ", "\n", "0",
                                    "12", "é", "\xe3\x81", "\x82", "あ", "x",   "(", ")",  "."};
    std::vector<bool> eog(pieces.size(), false);
    eog[0] = true;
    return std::make_shared<const ferrox::grammar::TokenTrie>(std::move(pieces), std::move(eog));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t cut = input.find('\0');
    const std::string_view source = input.substr(0, cut);
    const std::string_view text = cut == std::string_view::npos ? "" : input.substr(cut + 1);
    ferrox::grammar::GrammarLimits limits;
    limits.max_rules = 256;
    limits.max_symbols = 1u << 14;
    limits.max_repetition = 64;
    limits.max_stacks = 64;
    limits.max_expansions = 4096;
    auto grammar = ferrox::grammar::parse_gbnf(source, limits);
    if (!grammar) return 0;
    static const auto vocab = small_vocab();
    ferrox::grammar::GrammarMatcher m(*grammar, vocab);
    std::vector<uint64_t> mask;
    for (size_t i = 0; i < text.size() && i < 256; ++i) {
        if (!m.allowed(mask)) break;
        if (!m.accept_bytes(text.substr(i, 1))) break;
    }
    (void)m.complete();
    return 0;
}
