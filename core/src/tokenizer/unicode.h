// UTF-8 decoding the way the reference tokenizer does it, and the code point
// classes (letter, number, punctuation, mark, symbol, whitespace) the
// pre-tokenizers need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferrox::tokenizer_detail {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces, by its high nibble
// (1 for continuation bytes, 4 for F0..FF).
size_t utf8_sequence_length(uint8_t lead);

// Code points of `text`. A malformed sequence becomes U+FFFD and costs one
// byte, so every input decodes (llama.cpp does the same).
std::vector<char32_t> decode_utf8_lossy(std::string_view text);

void append_utf8(std::string& out, char32_t cp);

struct CodepointClass {
    bool letter = false;
    bool number = false;
    bool punctuation = false;
    bool whitespace = false;
    bool mark = false;    // \p{M}: combining marks
    bool symbol = false;  // \p{S}: math, currency, modifier and other symbols
};

CodepointClass classify(char32_t cp);

}  // namespace ferrox::tokenizer_detail
