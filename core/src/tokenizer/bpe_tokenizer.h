// tokenizer.ggml.model = "gpt2": byte-level BPE. The pre-tokenizer splits the
// text into words; each word's bytes are spelled in GPT-2's byte alphabet and
// merged by rank (tokenizer.ggml.merges order, lowest first, leftmost on ties).
// "gemma4" (and the pre-tokenizers llama.cpp treats as it) merges the same way
// over SentencePiece's spelling instead: spaces as U+2581, UTF-8 characters as
// they are, and bytes no token spells as <0xXX> tokens.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "ferrox/seeded_hash.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/vocab.h"

namespace ferrox::tokenizer_detail {

class BpeTokenizer final : public Tokenizer {
  public:
    BpeTokenizer(std::unique_ptr<const Vocab> vocab, PreTokenizerInfo pre,
                 std::span<const std::string> merges);
    std::vector<int32_t> encode_fragments(std::span<const Fragment> fragments,
                                          bool add_special) const override;
    std::string token_to_piece(int32_t id) const override;

  private:
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;
    // A piece that is no token after all merges, byte by byte.
    void push_unmerged(std::string_view piece, std::vector<int32_t>& out) const;
    std::optional<int32_t> merge_rank(std::string_view left, std::string_view right) const;

    PreTokenizerInfo pre_;
    // key: see merge_key(); keyed hash, since the merges come from the file
    std::unordered_map<std::string, int32_t, SeededHash, std::equal_to<>> ranks_;
};

}  // namespace ferrox::tokenizer_detail
