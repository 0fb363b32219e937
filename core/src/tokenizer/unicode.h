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

// The byte length of the well-formed UTF-8 sequence at the start of `text`
// (structure only, as decode_utf8_lossy checks it); 0 when it is malformed.
size_t utf8_valid_prefix(std::string_view text);

// Code points of `text`. A malformed sequence becomes U+FFFD and costs one
// byte, so every input decodes (llama.cpp does the same).
std::vector<char32_t> decode_utf8_lossy(std::string_view text);

void append_utf8(std::string& out, char32_t cp);

struct CodepointClass {
    bool letter = false;
    bool number = false;
    bool punctuation = false;
    bool whitespace = false;
    bool mark = false;     // \p{M}: combining marks
    bool symbol = false;   // \p{S}: math, currency, modifier and other symbols
    bool control = false;  // \p{C} less unassigned: controls, formats, private use, surrogates
};

CodepointClass classify(char32_t cp);

// The simple (one code point) lowercase mapping; `cp` itself where it has none.
char32_t to_lower(char32_t cp);
// The first code point of `cp`'s canonical decomposition (NFD): the base letter of
// an accented one ("é" -> "e", a Hangul syllable -> its leading jamo); `cp` itself
// where it does not decompose. The marks after it are dropped: WordPiece's
// accent stripping as llama.cpp does it, one code point in, one out.
char32_t nfd_first(char32_t cp);

}  // namespace ferrox::tokenizer_detail
