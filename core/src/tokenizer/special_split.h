// Cuts raw text at occurrences of special tokens before the model's own
// algorithm runs: "<start_of_turn>user" -> [token 105]["user"].
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace ferrox::tokenizer_detail {

struct Fragment {
    std::string_view text;  // raw text when token == kNoToken
    int32_t token = kNoToken;
};

// Special tokens are tried longest first; each one's occurrences are cut out of
// the text fragments left by the longer ones. Control and unknown tokens only
// when `parse_special`; user-defined tokens always.
std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special);

}  // namespace ferrox::tokenizer_detail
