// tokenizer.ggml.model = "llama": SentencePiece BPE. Spaces become U+2581,
// adjacent pieces merge best score first (leftmost on ties) while the merged
// text is a token, and what stays unknown falls back to <0xXX> byte tokens.
#pragma once

#include <memory>

#include "ferrox/tokenizer/tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/vocab.h"

namespace ferrox::tokenizer_detail {

class SpmTokenizer final : public Tokenizer {
  public:
    explicit SpmTokenizer(std::unique_ptr<const Vocab> vocab);
    std::vector<int32_t> encode_fragments(std::span<const Fragment> fragments,
                                          bool add_special) const override;
    std::string token_to_piece(int32_t id) const override;

  private:
    void encode_piece(std::string_view escaped, std::vector<int32_t>& out) const;
    void push_bytes(std::string_view bytes, std::vector<int32_t>& out) const;
};

}  // namespace ferrox::tokenizer_detail
