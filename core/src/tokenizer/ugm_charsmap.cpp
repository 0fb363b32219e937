#include "tokenizer/ugm_charsmap.h"

#include <cstring>

namespace ferrox::tokenizer_detail {
namespace {

constexpr std::string_view kKey = "tokenizer.ggml.precompiled_charsmap";

// A trie unit's fields, as SentencePiece's darts-clone packs them: the child
// base in bits 10..30 (shifted left by 8 more when bit 9 is set), the label
// the parent reached it by in bits 0..7 (bit 31 set on value units, so a value
// never matches a label), "has a value child" in bit 8, and on a value unit
// the replacement's offset in bits 0..30.
uint32_t base_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
uint32_t label_of(uint32_t unit) { return unit & ((1u << 31) | 0xFFu); }
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1u) != 0; }
uint32_t value_of(uint32_t unit) { return unit & ((1u << 31) - 1); }

}  // namespace

Expected<Charsmap> Charsmap::parse(std::string_view blob) {
    Charsmap map;
    if (blob.empty()) return map;
    if (blob.size() < 4)
        return make_error("{}: {} bytes, too short for its 4-byte trie size", kKey, blob.size());
    const auto* b = reinterpret_cast<const unsigned char*>(blob.data());
    const uint64_t trie_bytes =
        uint64_t{b[0]} | uint64_t{b[1]} << 8 | uint64_t{b[2]} << 16 | uint64_t{b[3]} << 24;
    if (trie_bytes % 4 != 0 || trie_bytes == 0)
        return make_error("{}: trie size {} is not a positive multiple of 4", kKey, trie_bytes);
    if (4 + trie_bytes >= blob.size())
        return make_error("{}: trie size {} leaves no replacement strings in {} bytes", kKey,
                          trie_bytes, blob.size());
    map.units_.resize(trie_bytes / 4);
    for (size_t i = 0; i < map.units_.size(); ++i) {
        const unsigned char* u = b + 4 + 4 * i;
        map.units_[i] =
            uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
    }
    map.replacements_.assign(blob.substr(4 + trie_bytes));
    // Every offset below the size then finds a terminated string.
    if (map.replacements_.back() != '\0')
        return make_error("{}: the replacement strings do not end with a NUL byte", kKey);
    return map;
}

std::optional<CharsmapMatch> Charsmap::longest_prefix(std::string_view text) const {
    if (units_.empty()) return std::nullopt;
    std::optional<CharsmapMatch> best;
    auto root = unit(0);
    if (!root) return std::nullopt;
    uint32_t node = base_of(*root);
    // One step per input byte: the walk is bounded by the text's length.
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == 0) break;
        node ^= c;
        const auto here = unit(node);
        if (!here || label_of(*here) != c) break;
        const bool leaf = has_leaf(*here);
        node ^= base_of(*here);
        if (!leaf) continue;
        const auto value_unit = unit(node);
        if (!value_unit) break;
        const uint32_t offset = value_of(*value_unit);
        if (offset >= replacements_.size()) break;
        const char* start = replacements_.data() + offset;
        best = CharsmapMatch{.replacement = std::string_view(start, std::strlen(start)),
                             .consumed = i + 1};
    }
    return best;
}

}  // namespace ferrox::tokenizer_detail
