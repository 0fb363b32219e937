// tokenizer.ggml.model = "t5": SentencePiece's unigram model (llama.cpp's UGM),
// the vocabulary of T5, XLM-RoBERTa, bge-m3 and bge-reranker-v2-m3 files.
// Text is normalised by the file's precompiled charsmap (ugm_charsmap.h), spaces
// become U+2581 (one before each run of non-space text with
// remove_extra_whitespaces, else each space, plus one in front with
// add_space_prefix), and a Viterbi search picks the segmentation with the
// highest summed score over the normal, user-defined (scored 0) and unused
// tokens. A code point no token covers costs the unknown token's score, the
// lowest normal score less 10, and a run of them is one unknown token. As in
// llama.cpp, byte tokens are never produced (no byte fallback) and control
// tokens only come from special-token text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/tokenizer/tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/ugm_charsmap.h"
#include "tokenizer/vocab.h"

namespace ferrox::tokenizer_detail {

struct UgmOptions {
    bool add_space_prefix = false;
    bool remove_extra_whitespaces = false;
};

class UgmTokenizer final : public Tokenizer {
  public:
    UgmTokenizer(std::unique_ptr<const Vocab> vocab, Charsmap charsmap, UgmOptions options);
    std::vector<int32_t> encode_fragments(std::span<const Fragment> fragments,
                                          bool add_special) const override;
    std::string token_to_piece(int32_t id) const override;

    // The text the Viterbi search sees (charsmap, then whitespace rules).
    std::string normalize(std::string_view text) const;

  private:
    void encode_text(std::string_view text, std::vector<int32_t>& out) const;
    // The id the search may use for `piece`, if any (normal, user-defined, unused).
    std::optional<int32_t> piece_id(std::string_view piece) const;

    Charsmap charsmap_;
    UgmOptions options_;
    double unknown_score_ = 0;
    size_t max_piece_bytes_ = 0;  // bounds the pieces tried at each position
};

// Builds the vocabulary and the tokenizer from a "t5" spec (the unknown token
// must exist; the charsmap is checked here).
Expected<std::unique_ptr<Tokenizer>> make_ugm_tokenizer(const VocabSpec& spec);

}  // namespace ferrox::tokenizer_detail
