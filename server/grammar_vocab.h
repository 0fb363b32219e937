// The vocabulary's byte trie that every grammar stage of a model shares
// (structured output, tool calls, the reasoning budget), built on the first
// request that needs it rather than at load: Gemma's 262,144 tokens take
// about 0.4 s of a core, most of a small model's load, which a server that
// loads and unloads models on demand (--models-dir) would otherwise pay on
// every load, beside the other models' requests, whether or not any request
// asks for a grammar.
#pragma once

#include <memory>
#include <mutex>

#include "ferrox/grammar/matcher.h"

namespace ferrox {
class Tokenizer;
}

namespace ferrox::server {

class GrammarVocab {
  public:
    // None: requests with a grammar are refused.
    GrammarVocab() = default;
    // Built already (implicit: a test's trie stands in for a model's).
    GrammarVocab(std::shared_ptr<const grammar::TokenTrie> built) : built_(std::move(built)) {}
    // Built from the tokenizer on the first get(); the tokenizer must outlive
    // every copy (a model's does: its copies live in its LoadedModel).
    static GrammarVocab on_first_use(const Tokenizer& tokenizer);

    explicit operator bool() const { return built_ || lazy_; }
    // The trie; the first call of any copy builds it (others wait for it).
    std::shared_ptr<const grammar::TokenTrie> get() const;

  private:
    struct Lazy {
        const Tokenizer* tokenizer;
        std::once_flag once;
        std::shared_ptr<const grammar::TokenTrie> trie;
    };
    std::shared_ptr<const grammar::TokenTrie> built_;
    std::shared_ptr<Lazy> lazy_;
};

}  // namespace ferrox::server
