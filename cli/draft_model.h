// `ferrox run --model-draft`: speculation's second draft source, a smaller
// model of the target's vocabulary (docs/speculation.md). It runs on its own
// context and cells, one sequence, and proposes its greedy continuation; the
// target verifies it as it verifies a prompt-lookup draft. After each
// verification the draft's cells are cut back to the tokens that were
// emitted, and the token emitted after them is decoded with the next proposal.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api_model.h"
#include "ferrox/draft_source.h"
#include "ferrox/expected.h"

namespace ferrox::cli {

// What makes `draft`'s token ids mean other text than `target`'s, each
// difference named ("tokenizer model 'llama' vs 'gpt2'", "vocabulary size
// ...", "token 17: '<0x0E>' vs 'ab'", "eos token id 1 vs 2"), joined by "; ";
// empty when the two vocabularies are the same. Compared: the tokenizer
// model and pre-tokenizer, the vocabulary size, every token's piece (the
// first that differs is named), and the special-token ids.
std::string vocabulary_difference(const ferrox_model* target, const ferrox_model* draft);

class DraftModel final : public DraftSource {
  public:
    // A draft source over `draft` (loaded by the caller) for `target`'s
    // sequence: refused, naming why, when the vocabularies differ or when
    // the draft has recurrent layers (their state cannot drop a rejected tail).
    static Expected<std::unique_ptr<DraftModel>> open(const ferrox_model* target,
                                                      ModelHandle draft);

    std::vector<int32_t> propose(std::span<const int32_t> tokens, uint32_t max_draft) override;
    void accept(size_t accepted) override;
    const std::string& error() const override { return error_; }
    const char* kind() const override { return "model"; }

    // The draft's forward passes so far (its prompt's chunks included).
    uint64_t decodes() const { return decodes_; }

  private:
    DraftModel(ModelHandle model, ContextHandle context);
    // Decodes `tokens` after the cached ones (in chunks of the model's
    // batch), the last one's logits wanted; false (error_ set) on failure.
    bool decode(std::span<const int32_t> tokens);
    // Drops the cells from position `keep` on.
    bool cut(size_t keep);

    ModelHandle model_;
    ContextHandle ctx_;
    uint32_t vocab_ = 0, batch_ = 1;
    std::vector<int32_t> cached_;  // the tokens in the draft's cells, position 0 on
    size_t proposed_from_ = 0;     // where the last proposal began
    const float* logits_ = nullptr;
    uint64_t decodes_ = 0;
    std::string error_;
};

}  // namespace ferrox::cli
