// SentencePiece's "precompiled charsmap" (tokenizer.ggml.precompiled_charsmap):
// the normaliser of a unigram ("t5") vocabulary as data. The blob is a 32-bit
// little-endian byte count N, then N bytes of a double-array trie (32-bit
// units, XOR-compressed as SentencePiece's darts-clone build packs them), then
// NUL-terminated replacement strings. At each position of the input the
// longest key the trie holds is replaced by its string (NFKC folding, case
// maps, whitespace unification for "nmt_nfkc").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::tokenizer_detail {

struct CharsmapMatch {
    std::string_view replacement;  // may be empty: the matched bytes are dropped
    size_t consumed = 0;           // input bytes matched, >= 1
};

class Charsmap {
  public:
    // An empty blob is no normaliser (the "identity" rule). Every size and
    // offset is checked here or at the lookup; errors name the metadata key.
    static Expected<Charsmap> parse(std::string_view blob);

    bool empty() const { return units_.empty(); }
    // The longest key at the start of `text`, or nullopt. A NUL byte ends a key.
    // A trie index or string offset outside the blob ends the walk there (no
    // match beyond it), so a corrupt blob cannot read out of bounds.
    std::optional<CharsmapMatch> longest_prefix(std::string_view text) const;

  private:
    std::optional<uint32_t> unit(size_t index) const {
        if (index >= units_.size()) return std::nullopt;
        return units_[index];
    }

    std::vector<uint32_t> units_;
    std::string replacements_;  // NUL-terminated strings back to back, the last one included
};

}  // namespace ferrox::tokenizer_detail
