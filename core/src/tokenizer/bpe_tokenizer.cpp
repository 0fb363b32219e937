#include "tokenizer/bpe_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/sp_spelling.h"
#include "tokenizer/special_split.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

// Left and right joined with a separator no byte-level token contains (NUL);
// a plain space would be ambiguous for vocabularies whose tokens hold spaces.
std::string merge_key(std::string_view left, std::string_view right) {
    std::string key;
    key.reserve(left.size() + right.size() + 1);
    key += left;
    key.push_back('\0');
    key += right;
    return key;
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::unique_ptr<const Vocab> vocab, PreTokenizerInfo pre,
                           std::span<const std::string> merges)
    : Tokenizer(std::move(vocab)), pre_(pre) {
    ranks_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        // "left right"; the search starts at 1 so that a left side of " " survives.
        const std::string_view line = merges[i];
        const size_t space = line.find(' ', 1);
        if (space == std::string_view::npos) continue;
        ranks_.emplace(merge_key(line.substr(0, space), line.substr(space + 1)),
                       static_cast<int32_t>(i));
    }
}

std::optional<int32_t> BpeTokenizer::merge_rank(std::string_view left,
                                                std::string_view right) const {
    const auto it = ranks_.find(merge_key(left, right));
    if (it == ranks_.end()) return std::nullopt;
    return it->second;
}

std::vector<int32_t> BpeTokenizer::encode_fragments(std::span<const Fragment> fragments,
                                                    bool add_special) const {
    const Vocab& v = vocab();
    std::vector<int32_t> out;
    if (add_special && v.add_bos && v.bos != kNoToken) out.push_back(v.bos);
    for (const Fragment& f : fragments) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
            continue;
        }
        if (pre_.spelling == Spelling::sentencepiece) {
            for (const std::string& word : pre_tokenize(pre_.kind, escape_spaces(f.text)))
                encode_word(word, out);
        } else {
            for (const std::string& word : pre_tokenize(pre_.kind, f.text))
                encode_word(bytes_to_byte_level(word), out);
        }
    }
    if (add_special && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
    return out;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    const bool whole_word =
        pre_.ignore_merges ||
        (pre_.newline_runs_whole && word.find_first_not_of('\n') == std::string_view::npos);
    if (whole_word) {
        if (const auto whole = v.find(word)) {
            out.push_back(*whole);
            return;
        }
    }

    std::vector<Symbol> symbols = split_characters(word);
    // Lowest merge rank first.
    merge_symbols(symbols, word, [&](std::string_view left, std::string_view right) {
        const auto rank = merge_rank(left, right);
        return rank ? std::optional<double>(-static_cast<double>(*rank)) : std::nullopt;
    });
    for_each_piece(symbols, word, [&](std::string_view piece) {
        if (const auto id = v.find(piece)) {
            out.push_back(*id);
        } else {
            push_unmerged(piece, out);
        }
    });
}

void BpeTokenizer::push_unmerged(std::string_view piece, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    // Each byte that is a one-character token (byte-level) or has a <0xXX>
    // token (SentencePiece spelling); the reference drops the rest.
    for (const char c : piece) {
        const auto id = pre_.spelling == Spelling::sentencepiece
                            ? v.find(byte_token_name(static_cast<unsigned char>(c)))
                            : v.find(std::string_view(&c, 1));
        if (id) out.push_back(*id);
    }
}

std::string BpeTokenizer::token_to_piece(int32_t id) const {
    const Vocab& v = vocab();
    if (!v.valid(id)) return {};
    const std::string_view text = v.text(id);
    switch (v.type(id)) {
        case TokenType::user_defined:
            return std::string(text);
        case TokenType::normal:
            return pre_.spelling == Spelling::sentencepiece ? unescape_spaces(text)
                                                            : byte_level_to_bytes(text);
        case TokenType::byte: {
            if (pre_.spelling == Spelling::byte_level) return byte_level_to_bytes(text);
            const auto byte = byte_of_token(text);
            return byte ? std::string(1, static_cast<char>(*byte)) : std::string();
        }
        default:  // control, unknown, unused, undefined
            return {};
    }
}

}  // namespace ferrox::tokenizer_detail
