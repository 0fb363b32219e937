#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

bool stands_for_itself(uint32_t byte) {
    return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
    std::array<char32_t, 256> code_point_of_byte{};
    std::array<int16_t, 512> byte_of_code_point{};  // -1: not in the alphabet

    Alphabet() {
        byte_of_code_point.fill(-1);
        char32_t next_moved = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            const char32_t cp = stands_for_itself(b) ? b : next_moved++;
            code_point_of_byte[b] = cp;
            byte_of_code_point[cp] = static_cast<int16_t>(b);
        }
    }
};

const Alphabet& alphabet() {
    static const Alphabet table;
    return table;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes)
        append_utf8(out, alphabet().code_point_of_byte[static_cast<uint8_t>(c)]);
    return out;
}

std::string byte_level_to_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char32_t cp : decode_utf8_lossy(text)) {
        if (cp < 512 && alphabet().byte_of_code_point[cp] >= 0) {
            out.push_back(
                static_cast<char>(static_cast<uint8_t>(alphabet().byte_of_code_point[cp])));
        } else {
            append_utf8(out, cp);
        }
    }
    return out;
}

}  // namespace ferrox::tokenizer_detail
