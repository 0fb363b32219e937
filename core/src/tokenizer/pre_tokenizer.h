// BPE pre-tokenizers: split text into words before merges, as the regexes that
// llama.cpp runs for each tokenizer.ggml.pre name would. Each regex is
// implemented by hand over code points with generated Unicode classes
// (std::regex knows no \p{L}). One table maps every name llama.cpp knows to a
// scanner here, or says that ferrox refuses it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::tokenizer_detail {

// The scanners, named after the llama.cpp pre-tokenizer type they follow.
enum class PreTokenizer {
    gpt2,            // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    llama3,          // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                     // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    qwen2,           // llama3 with single digits: \p{N}
    qwen35,          // qwen2 whose letter runs take marks: [\p{L}\p{M}]+, [^\s\p{L}\p{M}\p{N}]
    ufakzeka,        // qwen2 without the contractions
    seed_coder,      // qwen2 whose symbol runs take no line breaks after them
    tekken,          // letter runs cut at case changes (ASCII), \p{N}, [\r\n/]* after symbols
    gpt4o,           // tekken with a contraction after a letter run and \p{N}{1,3}
    granite_multi,   // gpt4o whose letter runs take marks
    minicpm5,        // \p{N}{1,3}, then llama3 with \p{N}+
    laguna,          // lines ([^\n]+|[\n]+), then qwen2
    starcoder,       // \p{N}, then gpt2
    falcon,          // [\p{P}$+<=>^~|`]+, then gpt2, then [0-9]{3}
    deepseek_v3,     // \p{N}{1,3}, then CJK/kana runs, then the DeepSeek-V3 rule
    deepseek_coder,  // [\r\n], \s?\p{L}+, \s?\p{P}+, CJK/Hangul runs, \p{N}
    kimi_k2,         // [\p{Han}]+, then llama3 whose letter runs exclude Han and end in
                     // an optional contraction (no contraction alternative of its own)
    lines,           // [^\n]+|[\n]+ (Gemma 4: merges run over whole lines)
    standard,        // "default": [\p{P}$+<=>^~|]+, then gpt2, then \p{N}+, then [0-9]{3}
};

// How a BPE vocabulary spells text: GPT-2's byte alphabet, or SentencePiece's
// (U+2581 for a space, raw UTF-8, <0xXX> byte tokens; sp_spelling.h).
enum class Spelling { byte_level, sentencepiece };

struct PreTokenizerInfo {
    PreTokenizer kind;
    bool ignore_merges = false;  // a word that is a whole token skips merging (llama3)
    bool add_bos = false;        // the default for tokenizer.ggml.add_bos_token
    Spelling spelling = Spelling::byte_level;
    // A word of newlines only that is a token stays whole (llama.cpp's Gemma 4 rule).
    bool newline_runs_whole = false;
    // BOS is added even where the file says add_bos_token = false (llama.cpp
    // overrides Gemma 4's files so).
    bool bos_always = false;
};

// One tokenizer.ggml.pre name as llama.cpp's llama-vocab.cpp knows it.
struct PreTokenizerName {
    std::string_view name;
    std::string_view llama_type;  // llama.cpp's LLAMA_VOCAB_PRE_TYPE_* (without the prefix)
    std::optional<PreTokenizerInfo> info;  // nullopt: refused (no scanner in ferrox)
};

// Every name llama.cpp accepts, supported or refused: the one source of truth
// for pre_tokenizer_named, docs/tokenizers.md (a test holds the two equal) and
// the parity tests.
std::span<const PreTokenizerName> pre_tokenizer_names();

// The scanner a tokenizer.ggml.pre name selects ("" is "default"); an Error
// naming the key and the value (escaped) when it is unknown or refused.
Expected<PreTokenizerInfo> pre_tokenizer_named(std::string_view name);

// The scanner's name as docs/tokenizers.md spells it: "llama3", "gpt4o", ...
std::string_view scanner_name(PreTokenizer kind);

// The words of `text` (UTF-8; malformed bytes come back as U+FFFD).
std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace ferrox::tokenizer_detail
