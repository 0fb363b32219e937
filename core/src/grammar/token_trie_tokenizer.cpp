// Apart from token_trie.cpp so that the fuzz target links the matcher
// without the tokenizer.
#include "ferrox/grammar/matcher.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::grammar {

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
    const size_t n = tokenizer.vocab_size();
    std::vector<std::string> pieces(n);
    std::vector<bool> eog(n);
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(i);
        pieces[i] = tokenizer.token_to_piece(id);
        eog[i] = tokenizer.is_end_of_generation(id);
    }
    return std::make_shared<const TokenTrie>(std::move(pieces), std::move(eog));
}

}  // namespace ferrox::grammar
