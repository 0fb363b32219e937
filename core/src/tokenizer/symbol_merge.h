// Greedy pairwise merging over a text split into UTF-8 characters: the engine
// both the SentencePiece and the byte-level BPE tokenizers run. They differ
// only in how a candidate pair is valued (a vocabulary score, a merge rank).
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {

struct Symbol {
    size_t start, length;  // length 0: merged into its left neighbour
    int prev, next;
};

// One symbol per UTF-8 character (a truncated sequence at the end is one symbol).
inline std::vector<Symbol> split_characters(std::string_view text) {
    std::vector<Symbol> symbols;
    for (size_t pos = 0; pos < text.size();) {
        const size_t length =
            std::min(utf8_sequence_length(static_cast<uint8_t>(text[pos])), text.size() - pos);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({pos, length, index - 1, pos + length == text.size() ? -1 : index + 1});
        pos += length;
    }
    return symbols;
}

// Merges adjacent symbols, best pair first (on a tie the leftmost), until no
// pair can merge. `priority(left, right)` gives a pair's value, larger first,
// or nullopt when the pair cannot merge.
template <class Priority>
void merge_symbols(std::vector<Symbol>& symbols, std::string_view text, Priority priority) {
    struct Bigram {
        int left, right;
        double priority;
        size_t length;  // of the merged text, to spot bigrams made stale by other merges
    };
    const auto lower = [](const Bigram& a, const Bigram& b) {
        return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    };
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);
    const auto text_of = [&](int i) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        return text.substr(s.start, s.length);
    };
    const auto try_pair = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        if (const std::optional<double> p = priority(text_of(left), text_of(right)))
            queue.push({left, right, *p, text_of(left).size() + text_of(right).size()});
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
}

// Calls fn(piece) for each symbol left after merging, in text order.
template <class Fn>
void for_each_piece(const std::vector<Symbol>& symbols, std::string_view text, Fn fn) {
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        fn(text.substr(s.start, s.length));
    }
}

}  // namespace ferrox::tokenizer_detail
