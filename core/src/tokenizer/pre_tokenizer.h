// BPE pre-tokenizers: split text into words before merges, as the regex named
// by tokenizer.ggml.pre would. Each regex is implemented by hand over code
// points with generated Unicode classes (std::regex knows no \p{L}).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::tokenizer_detail {

enum class PreTokenizer {
    gpt2,      // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    llama3,    // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
               // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    qwen2,     // llama3 with single digits: \p{N}
    smollm,    // \p{N} first, then gpt2
    standard,  // "default": [\p{P}$+<=>^~|]+, then gpt2, then \p{N}+, then [0-9]{3}
};

struct PreTokenizerInfo {
    PreTokenizer kind;
    bool ignore_merges;  // a word that is a whole token skips merging (llama3)
    bool add_bos;        // the default for tokenizer.ggml.add_bos_token
};

// The pre-tokenizer tokenizer.ggml.pre names; an Error naming it when unknown.
Expected<PreTokenizerInfo> pre_tokenizer_named(std::string_view name);

// The words of `text` (UTF-8; malformed bytes come back as U+FFFD).
std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace ferrox::tokenizer_detail
