#include "tokenizer/spm_tokenizer.h"

#include "tokenizer/sp_spelling.h"
#include "tokenizer/special_split.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
SpmTokenizer::SpmTokenizer(std::unique_ptr<const Vocab> vocab) : Tokenizer(std::move(vocab)) {}

std::vector<int32_t> SpmTokenizer::encode_fragments(std::span<const Fragment> fragments,
                                                    bool add_special) const {
    const Vocab& v = vocab();
    std::vector<int32_t> out;
    if (add_special && v.add_bos && v.bos != kNoToken) out.push_back(v.bos);
    // SentencePiece's dummy prefix: a space before text that starts the input
    // or follows a special token, so "Hello" at the start encodes as " Hello".
    bool after_special = true;
    for (const Fragment& f : fragments) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
            after_special = true;
            continue;
        }
        std::string raw = (v.add_space_prefix && after_special) ? " " : "";
        raw += f.text;
        encode_piece(escape_spaces(raw), out);
        after_special = false;
    }
    if (add_special && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
    return out;
}

void SpmTokenizer::encode_piece(std::string_view text, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    std::vector<Symbol> symbols = split_characters(text);
    // Highest vocabulary score of the joined piece first. Symbols are contiguous,
    // so the joined piece is the span starting at `left`.
    merge_symbols(symbols, text, [&](std::string_view left, std::string_view right) {
        const auto id = v.find(std::string_view(left.data(), left.size() + right.size()));
        return id ? std::optional<double>(v.score(*id)) : std::nullopt;
    });
    for_each_piece(symbols, text, [&](std::string_view piece) {
        if (const auto id = v.find(piece)) {
            out.push_back(*id);
        } else {
            push_bytes(piece, out);
        }
    });
}

void SpmTokenizer::push_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    for (const char c : bytes) {
        if (auto id = v.find(byte_token_name(static_cast<unsigned char>(c)))) {
            out.push_back(*id);
        } else if (auto plain = v.find(std::string_view(&c, 1))) {
            out.push_back(*plain);
        } else if (v.unk != kNoToken) {
            out.push_back(v.unk);
        }
    }
}

std::string SpmTokenizer::token_to_piece(int32_t id) const { return sp_token_piece(vocab(), id); }

}  // namespace ferrox::tokenizer_detail
