#include "tokenizer/wpm_tokenizer.h"

#include <algorithm>

#include "tokenizer/sp_spelling.h"
#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

// The CJK ideograph blocks BERT's BasicTokenizer isolates (the same set as
// Hugging Face's tokenizers, whose Extension E/F bound starts at U+2B920).
bool is_cjk_ideograph(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

std::vector<std::string> wpm_words(std::string_view text, WpmNormaliser normaliser) {
    std::vector<std::string> words(1);
    const auto end_word = [&] {
        if (!words.back().empty()) words.emplace_back();
    };
    for (char32_t cp : decode_utf8_lossy(text)) {
        if (normaliser.strip_accents) cp = nfd_first(cp);
        const CodepointClass c = classify(cp);
        if (c.whitespace) {
            end_word();
            continue;
        }
        if (cp == 0 || cp == kReplacementCharacter || c.control) continue;
        if (normaliser.strip_accents && c.mark) continue;
        const char32_t out = normaliser.lowercase ? to_lower(cp) : cp;
        if (c.punctuation || (cp < 0x7F && c.symbol) || is_cjk_ideograph(cp)) {
            end_word();
            append_utf8(words.back(), out);
            words.emplace_back();
        } else {
            append_utf8(words.back(), out);
        }
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

WpmTokenizer::WpmTokenizer(std::unique_ptr<const Vocab> vocab, WpmNormaliser normaliser)
    : Tokenizer(std::move(vocab)), normaliser_(normaliser) {
    const Vocab& v = this->vocab();
    for (size_t id = 0; id < v.size(); ++id)
        max_token_bytes_ = std::max(max_token_bytes_, v.text(static_cast<int32_t>(id)).size());
}

std::vector<int32_t> WpmTokenizer::encode_fragments(std::span<const Fragment> fragments,
                                                    bool add_special) const {
    const Vocab& v = vocab();
    std::vector<int32_t> out;
    if (add_special) out.push_back(v.bos);
    for (const Fragment& f : fragments) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
            continue;
        }
        for (const std::string& word : wpm_words(f.text, normaliser_)) encode_word(word, out);
    }
    if (add_special) out.push_back(v.sep);
    return out;
}

void WpmTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    // A word-initial piece carries the U+2581 mark; the pieces after it are bare.
    std::string marked(kSpaceMark);
    marked += word;
    const size_t n = marked.size();
    const size_t first = out.size();
    for (size_t i = 0; i < n;) {
        size_t matched = 0;
        for (size_t j = std::min(n, i + max_token_bytes_); j > i; --j) {
            if (const auto id = v.find(std::string_view(marked).substr(i, j - i))) {
                out.push_back(*id);
                matched = j - i;
                break;
            }
        }
        if (matched == 0) {  // a position no piece covers: the whole word is unknown
            out.resize(first);
            break;
        }
        i += matched;
    }
    if (out.size() == first) out.push_back(v.unk);
}

std::string WpmTokenizer::token_to_piece(int32_t id) const {
    const Vocab& v = vocab();
    if (!v.valid(id)) return {};
    const std::string_view text = v.text(id);
    switch (v.type(id)) {
        case TokenType::user_defined:
            return std::string(text);
        case TokenType::normal:
            return unescape_spaces(text);
        default:  // control, unknown, unused, undefined; WordPiece has no byte tokens
            return {};
    }
}

Expected<std::unique_ptr<Tokenizer>> make_wpm_tokenizer(const VocabSpec& spec) {
    auto vocab = Vocab::build(spec);
    if (!vocab) return vocab.error();
    auto owned = std::make_unique<Vocab>(std::move(*vocab));
    // llama.cpp's WordPiece encode adds [CLS] and [SEP] whenever asked for special
    // tokens, whatever add_bos_token / add_sep_token say; so these must exist.
    if (owned->bos == kNoToken)
        return make_error(
            "tokenizer: a 'bert' vocabulary needs a [CLS] token (tokenizer.ggml.bos_token_id, "
            "default 101)");
    if (owned->sep == kNoToken)
        return make_error(
            "tokenizer: a 'bert' vocabulary needs a [SEP] token "
            "(tokenizer.ggml.seperator_token_id, default 102)");
    owned->add_bos = true;
    owned->add_eos = false;
    owned->pair_bos = spec.add_bos.value_or(true);
    owned->pair_eos = spec.add_eos.value_or(false);
    owned->pair_sep = spec.add_sep.value_or(true);
    const bool lowercase = spec.lowercase.value_or(true);
    const WpmNormaliser normaliser{.lowercase = lowercase,
                                   .strip_accents = spec.strip_accents.value_or(lowercase)};
    return std::unique_ptr<Tokenizer>(std::make_unique<WpmTokenizer>(std::move(owned), normaliser));
}

}  // namespace ferrox::tokenizer_detail
