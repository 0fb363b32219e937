#include "grammar_vocab.h"

namespace ferrox::server {

GrammarVocab GrammarVocab::on_first_use(const Tokenizer& tokenizer) {
    GrammarVocab v;
    v.lazy_ = std::make_shared<Lazy>();
    v.lazy_->tokenizer = &tokenizer;
    return v;
}

std::shared_ptr<const grammar::TokenTrie> GrammarVocab::get() const {
    if (!lazy_) return built_;
    std::call_once(lazy_->once,
                   [&] { lazy_->trie = grammar::TokenTrie::from_tokenizer(*lazy_->tokenizer); });
    return lazy_->trie;
}

}  // namespace ferrox::server
