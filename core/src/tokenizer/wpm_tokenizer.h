// tokenizer.ggml.model = "bert": WordPiece, as BERT-family encoders (bge,
// all-MiniLM, nomic-embed) tokenize. Text is normalised (lowercase, accents
// stripped: each code point to the first of its NFD decomposition, marks
// dropped; controls, U+0000 and U+FFFD dropped), split at whitespace, and each
// punctuation mark, ASCII symbol and CJK ideograph becomes a word of its own.
// Each word then takes the longest vocabulary piece at each position: GGUF
// spells a word-initial piece with a leading U+2581 and a continuation piece
// ("##ing" in Hugging Face's vocab.txt) bare, so the word is looked up as
// U+2581 + word. A word with a position no piece matches is one [UNK]. With
// add_special the ids are [CLS] (the BOS) ... [SEP], as llama.cpp encodes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/tokenizer/tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/vocab.h"

namespace ferrox::tokenizer_detail {

struct WpmNormaliser {
    bool lowercase = true;
    bool strip_accents = true;
};

// BERT's pre-tokenizer: the normalised words of `text`, in order, none empty.
std::vector<std::string> wpm_words(std::string_view text, WpmNormaliser normaliser);

class WpmTokenizer final : public Tokenizer {
  public:
    WpmTokenizer(std::unique_ptr<const Vocab> vocab, WpmNormaliser normaliser);
    std::vector<int32_t> encode_fragments(std::span<const Fragment> fragments,
                                          bool add_special) const override;
    std::string token_to_piece(int32_t id) const override;

  private:
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;

    WpmNormaliser normaliser_;
    size_t max_token_bytes_ = 0;  // no piece is longer: bounds the longest-match search
};

// Builds the vocabulary and the tokenizer from a "bert" spec (the BOS must exist:
// every encode with add_special starts with it; so must [SEP]).
Expected<std::unique_ptr<Tokenizer>> make_wpm_tokenizer(const VocabSpec& spec);

}  // namespace ferrox::tokenizer_detail
