// SentencePiece's spelling of text as tokens: a space is U+2581, and a byte
// that no token spells is the token <0xXX>. The SentencePiece tokenizer
// ("llama") and the SentencePiece-style BPE of Gemma 4 ("gemma4") share it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/vocab.h"

namespace ferrox::tokenizer_detail {

inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Every ' ' as U+2581 (other whitespace stays).
std::string escape_spaces(std::string_view text);
// The inverse, for a normal token's text.
std::string unescape_spaces(std::string_view text);
// "<0xXX>" with upper-case hex digits, as byte tokens are named.
std::string byte_token_name(unsigned char byte);
// The byte a "<0xXX>" token stands for; nullopt for any other text.
std::optional<unsigned char> byte_of_token(std::string_view text);
// A token's bytes in a SentencePiece vocabulary ("llama" and "t5"): a normal
// token's text with U+2581 as ' ', a user-defined token's text as it is, a
// byte token's byte; "" for control, unknown and unused tokens and bad ids.
std::string sp_token_piece(const Vocab& vocab, int32_t id);

}  // namespace ferrox::tokenizer_detail
