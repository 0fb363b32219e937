#include "tokenizer/bpe_tokenizer.h"

#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/special_split.h"
#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

// Left and right joined with a separator no byte-level token contains (NUL);
// a plain space would be ambiguous for vocabularies whose tokens hold spaces.
std::string merge_key(std::string_view left, std::string_view right) {
    std::string key;
    key.reserve(left.size() + right.size() + 1);
    key += left;
    key.push_back('\0');
    key += right;
    return key;
}

struct Symbol {
    size_t start, length;  // length 0: merged into its left neighbour
    int prev, next;
};

struct Bigram {
    int left, right;
    int32_t rank;
    size_t length;  // of the merged text, to spot bigrams made stale by other merges
};

// Lowest rank first; on a tie the leftmost pair.
struct LowerPriority {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

}  // namespace

BpeTokenizer::BpeTokenizer(std::unique_ptr<const Vocab> vocab, PreTokenizerInfo pre,
                           std::span<const std::string> merges)
    : Tokenizer(std::move(vocab)), pre_(pre) {
    ranks_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        // "left right"; the search starts at 1 so that a left side of " " survives.
        const std::string_view line = merges[i];
        const size_t space = line.find(' ', 1);
        if (space == std::string_view::npos) continue;
        ranks_.emplace(merge_key(line.substr(0, space), line.substr(space + 1)),
                       static_cast<int32_t>(i));
    }
}

std::optional<int32_t> BpeTokenizer::merge_rank(std::string_view left,
                                                std::string_view right) const {
    const auto it = ranks_.find(merge_key(left, right));
    if (it == ranks_.end()) return std::nullopt;
    return it->second;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
    const Vocab& v = vocab();
    std::vector<int32_t> out;
    if (add_special && v.add_bos && v.bos != kNoToken) out.push_back(v.bos);
    for (const Fragment& f : split_special(v, text, parse_special)) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
            continue;
        }
        for (const std::string& word : pre_tokenize(pre_.kind, f.text))
            encode_word(bytes_to_byte_level(word), out);
    }
    if (add_special && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
    return out;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    if (pre_.ignore_merges) {
        if (const auto whole = v.find(word)) {
            out.push_back(*whole);
            return;
        }
    }

    std::vector<Symbol> symbols;
    for (size_t pos = 0; pos < word.size();) {
        const size_t length =
            std::min(utf8_sequence_length(static_cast<uint8_t>(word[pos])), word.size() - pos);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({pos, length, index - 1, pos + length == word.size() ? -1 : index + 1});
        pos += length;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
    const auto text_of = [&](int i) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        return word.substr(s.start, s.length);
    };
    const auto try_pair = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        if (const auto rank = merge_rank(text_of(left), text_of(right)))
            queue.push({left, right, *rank, text_of(left).size() + text_of(right).size()});
    };
    for (size_t i = 1; i < symbols.size(); ++i)
        try_pair(static_cast<int>(i - 1), static_cast<int>(i));

    while (!queue.empty()) {
        const Bigram top = queue.top();
        queue.pop();
        Symbol& left = symbols[static_cast<size_t>(top.left)];
        Symbol& right = symbols[static_cast<size_t>(top.right)];
        // Symbols only grow and stay contiguous, so an unchanged length means
        // the pair is still the one this bigram was made from.
        if (left.length == 0 || right.length == 0 || left.length + right.length != top.length)
            continue;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.left;
        try_pair(left.prev, top.left);
        try_pair(top.left, left.next);
    }

    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
        const std::string_view piece = text_of(i);
        if (const auto id = v.find(piece)) {
            out.push_back(*id);
            continue;
        }
        // Not a token after all merges: each byte of its spelling that is a
        // one-character token (the reference drops the rest).
        for (const char c : piece) {
            if (const auto id = v.find(std::string_view(&c, 1))) out.push_back(*id);
        }
    }
}

std::string BpeTokenizer::token_to_piece(int32_t id) const {
    const Vocab& v = vocab();
    if (!v.valid(id)) return {};
    const std::string& text = v.text(id);
    switch (v.type(id)) {
        case TokenType::user_defined:
            return text;
        case TokenType::normal:
            return byte_level_to_bytes(text);
        case TokenType::byte:
            return byte_level_to_bytes(text);
        default:  // control, unknown, unused, undefined
            return {};
    }
}

}  // namespace ferrox::tokenizer_detail
