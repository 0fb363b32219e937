#include "tokenizer/sp_spelling.h"

namespace ferrox::tokenizer_detail {
namespace {

constexpr char kHexDigits[] = "0123456789ABCDEF";

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

}  // namespace

std::string escape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 4);
    for (const char c : text) {
        if (c == ' ') {
            out += kSpaceMark;
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        if (text.substr(pos, kSpaceMark.size()) == kSpaceMark) {
            out.push_back(' ');
            pos += kSpaceMark.size();
        } else {
            out.push_back(text[pos++]);
        }
    }
    return out;
}

std::string byte_token_name(unsigned char byte) {
    return {'<', '0', 'x', kHexDigits[byte >> 4], kHexDigits[byte & 15], '>'};
}

std::optional<unsigned char> byte_of_token(std::string_view text) {
    if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return std::nullopt;
    const int high = hex_value(text[3]), low = hex_value(text[4]);
    if (high < 0 || low < 0) return std::nullopt;
    return static_cast<unsigned char>(high * 16 + low);
}

std::string sp_token_piece(const Vocab& vocab, int32_t id) {
    if (!vocab.valid(id)) return {};
    const std::string_view text = vocab.text(id);
    switch (vocab.type(id)) {
        case TokenType::user_defined:
            return std::string(text);
        case TokenType::normal:
            return unescape_spaces(text);
        case TokenType::byte: {
            const auto byte = byte_of_token(text);
            return byte ? std::string(1, static_cast<char>(*byte)) : std::string();
        }
        default:  // control, unknown, unused, undefined
            return {};
    }
}

}  // namespace ferrox::tokenizer_detail
