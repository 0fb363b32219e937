// The vocabulary shared by the tokenizer families: token texts, scores,
// attributes, the text -> id index, the special-token list and the
// end-of-generation set, all settled once at construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::tokenizer_detail {

inline constexpr int32_t kNoToken = -1;

class Vocab {
  public:
    // Checks sizes and ids; `spec.model` must already be known.
    static Expected<Vocab> build(const VocabSpec& spec);

    size_t size() const { return offsets_.size() - 1; }
    std::string_view text(int32_t id) const {
        const auto i = static_cast<size_t>(id);
        return std::string_view(pool_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
    }
    float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
    TokenType type(int32_t id) const {
        return static_cast<TokenType>(types_[static_cast<size_t>(id)]);
    }
    bool valid(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < size(); }
    std::optional<int32_t> find(std::string_view text) const;

    // Control, user-defined and unknown tokens, longest text first: matched in
    // the raw text before the model's own algorithm sees it.
    const std::vector<int32_t>& special_tokens() const { return special_tokens_; }
    bool is_end_of_generation(int32_t id) const { return end_of_generation_.count(id) != 0; }
    // Whitespace after (rstrip) / before (lstrip) a matched special token is dropped.
    bool strips_right(int32_t id) const { return strip_right_.count(id) != 0; }
    bool strips_left(int32_t id) const { return strip_left_.count(id) != 0; }

    int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken, sep = kNoToken;
    bool add_bos = false, add_eos = false, add_space_prefix = false;
    // The add_bos / add_eos / add_sep flags as llama.cpp reads them (the
    // keys, else the model's defaults), where encode does not follow them
    // ("bert" always adds [CLS] and [SEP]): how a pair is joined
    // (Tokenizer::pair_specials).
    bool pair_bos = false, pair_eos = false, pair_sep = false;

  private:
    // An end-of-generation or FIM marker is a control token whatever the file says
    // (an unknown token stays unknown).
    void make_control(int32_t id) {
        const TokenType t = type(id);
        if (t != TokenType::control && t != TokenType::unknown)
            types_[static_cast<size_t>(id)] = static_cast<uint8_t>(TokenType::control);
    }

    // Every text back to back in one string (a 262K-token vocabulary as one
    // std::string each, plus a node-based map, cost Gemma 3 about 26 MB).
    std::string pool_;
    std::vector<uint32_t> offsets_{0};  // text i is pool_[offsets_[i], offsets_[i+1])
    std::vector<float> scores_;
    std::vector<uint8_t> types_;  // TokenType values (0..6), a byte each
    // text -> id: open addressing over a power-of-two table, kNoToken = empty.
    std::vector<int32_t> slots_;
    std::vector<int32_t> special_tokens_;
    std::unordered_set<int32_t> end_of_generation_;
    std::unordered_set<int32_t> strip_right_, strip_left_;
};

}  // namespace ferrox::tokenizer_detail
