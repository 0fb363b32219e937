// GPT-2's byte-level alphabet: every byte gets a printable code point so that
// byte strings can be BPE-merged as text. Printable Latin-1 bytes stand for
// themselves; the other 68 are moved, in order, to U+0100 and up.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ferrox::tokenizer_detail {

// Each byte of `bytes` as its code point, UTF-8 encoded.
std::string bytes_to_byte_level(std::string_view bytes);
// The inverse; code points outside the alphabet are copied through unchanged.
std::string byte_level_to_bytes(std::string_view text);

}  // namespace ferrox::tokenizer_detail
