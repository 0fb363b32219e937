// Matching generated tokens against a Grammar. A GrammarMatcher holds one
// sequence's position as a set of parse stacks (a pushdown automaton's
// configurations, as llama.cpp keeps them) plus the bytes of a code point a
// token left unfinished. allowed() marks the tokens whose bytes can continue
// the text: a walk over a byte trie of the vocabulary (TokenTrie, built once
// per tokenizer) that drops a whole subtree as soon as its prefix fails, with
// the last few masks cached by state (inside a JSON string the state repeats
// every token).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/grammar/gbnf.h"

namespace ferrox {
class Tokenizer;
}

namespace ferrox::grammar {

// The vocabulary as bytes: pieces[id] is what token id stands for; a token
// with an empty piece (control, unused) can never continue a grammar; an
// end-of-generation token is allowed only where the grammar is complete.
class FERROX_API TokenTrie {
  public:
    TokenTrie(std::vector<std::string> pieces, std::vector<bool> end_of_generation);
    // Tokenizer::token_to_piece and is_end_of_generation of every id.
    static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tokenizer);

    size_t vocab_size() const { return pieces_.size(); }
    const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
    bool end_of_generation(int32_t id) const { return eog_[static_cast<size_t>(id)]; }
    const std::vector<int32_t>& eog_tokens() const { return eog_ids_; }
    size_t node_count() const { return nodes_.size(); }
    size_t max_depth() const { return max_depth_; }

    struct Node {
        uint32_t first_child = 0, n_children = 0;  // children are contiguous
        uint32_t first_token = 0, n_tokens = 0;    // into token_ids(): the pieces ending here
        uint8_t byte = 0;                          // the edge from the parent
    };
    const Node& node(uint32_t i) const { return nodes_[i]; }
    int32_t token_at(uint32_t i) const { return token_ids_[i]; }

  private:
    std::vector<std::string> pieces_;
    std::vector<bool> eog_;
    std::vector<int32_t> eog_ids_;
    std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
    std::vector<int32_t> token_ids_;
    size_t max_depth_ = 0;
};

// Parse stacks, stored flat: stack i is flat[bounds[i] .. bounds[i + 1]),
// its top last; each entry indexes Grammar::symbols.
struct StackSet {
    std::vector<uint32_t> flat;
    std::vector<uint32_t> bounds{0};
    std::vector<uint64_t> hashes;  // one per stack, for de-duplication

    size_t size() const { return bounds.size() - 1; }
    bool empty() const { return size() == 0; }
    std::span<const uint32_t> at(size_t i) const {
        return {flat.data() + bounds[i], bounds[i + 1] - bounds[i]};
    }
    void clear() {
        flat.clear();
        bounds.assign(1, 0);
        hashes.clear();
    }
    // Adds `stack` unless the set has it; false when that passes `max`.
    bool insert(std::span<const uint32_t> stack, size_t max);
    bool operator==(const StackSet& o) const { return flat == o.flat && bounds == o.bounds; }
};

// The lead bytes of a code point seen so far: `need` more continuation
// bytes complete it; `length` is the whole sequence's (for overlong checks).
struct PartialChar {
    uint32_t value = 0;
    uint8_t need = 0;
    uint8_t length = 0;
    bool operator==(const PartialChar&) const = default;
};

class FERROX_API GrammarMatcher {
  public:
    GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocab);

    // Back to the start of the grammar (a new answer).
    void restart();

    // allowed[id / 64] bit id % 64: token id may come next. End-of-generation
    // tokens only where the grammar is complete; nothing after one was
    // accepted. An error when the matcher failed earlier (accept's error).
    Expected<void> allowed(std::vector<uint64_t>& allowed);
    // Advances over the token's bytes; an error (kept, and returned by
    // allowed() from then on) when they cannot continue the grammar.
    Expected<void> accept(int32_t token);
    // The same over raw bytes (tests, a prompt's forced prefix).
    Expected<void> accept_bytes(std::string_view bytes);

    // Some parse ends here: the text so far is a whole sentence of the grammar.
    bool complete() const;
    bool finished() const { return finished_; }  // an end-of-generation token was accepted
    size_t live_stacks() const { return stacks_.size(); }
    const Grammar& grammar() const { return *grammar_; }

  private:
    struct CacheEntry {
        StackSet stacks;
        PartialChar partial;
        std::vector<uint64_t> mask;
        uint64_t used = 0;
    };

    enum class Step { Ok, Overflow };
    Step expand(const std::vector<uint32_t>& stack, StackSet& out);
    Step advance_char(const StackSet& in, uint32_t cp, StackSet& out);
    // One byte of UTF-8: a whole code point advances the stacks, a lead or
    // middle byte keeps those whose next character could still start so.
    Step advance_byte(const StackSet& in, PartialChar p, uint8_t byte, StackSet& out,
                      PartialChar& out_p);
    void walk(uint32_t node, size_t depth, const StackSet& set, PartialChar p,
              std::vector<uint64_t>& mask);
    // The same walk over interned states: a state's step on a byte is
    // computed once and kept (inside a JSON string nearly every byte leads
    // back to the same state), so most trie nodes cost one table read.
    void walk_states(uint32_t node, size_t depth, int32_t state, std::vector<uint64_t>& mask);
    // The id of (stacks, partial), interned; -1 when the table is full.
    int32_t intern(const StackSet& stacks, PartialChar partial);
    // The state `state` reaches on `byte`: -1 none, -2 the table is full.
    int32_t step_state(int32_t state, uint8_t byte);

    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const TokenTrie> vocab_;
    StackSet stacks_;
    PartialChar partial_;
    bool finished_ = false;
    std::string error_;
    // Scratch, reused so that a step allocates nothing once warm.
    std::vector<StackSet> levels_;  // one per trie depth
    std::vector<std::vector<uint32_t>> work_;
    std::vector<uint32_t> cur_, next_;
    StackSet swap_;
    size_t steps_ = 0;  // expansion steps in the current character
    std::vector<CacheEntry> cache_;
    uint64_t clock_ = 0;

    // Interned states (a lazily built automaton over the stacks): per state,
    // its stacks and the state each byte leads to (kUnknown until computed).
    struct State {
        StackSet stacks;
        PartialChar partial;
        uint64_t hash = 0;
        std::vector<int32_t> next;  // 256 entries
    };
    std::vector<State> states_;
    std::vector<std::vector<int32_t>> state_buckets_;  // by hash, ids
};

}  // namespace ferrox::grammar
