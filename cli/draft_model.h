// `ferrox run --model-draft`: speculation's second draft source, a smaller
// model of the target's vocabulary (docs/speculation.md), on its own context
// and cells, one sequence. ModelDraftSource (ferrox/draft_source.h) keeps
// the cells in step with the history and takes the greedy guesses; this
// file loads and checks the model and decodes for it over the C API.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api_model.h"
#include "ferrox/draft_source.h"
#include "ferrox/expected.h"
#include "ferrox/vocabulary_match.h"

namespace ferrox::cli {

// The draft model's file and context, the C API's side of a
// ModelDraftSource (ferrox/draft_source.h), which source() is.
class DraftModel final : public DraftDecoder {
  public:
    // Refused, naming why, when the vocabularies differ or when the draft
    // has recurrent layers (their state cannot drop a rejected tail).
    static Expected<std::unique_ptr<DraftModel>> open(const ferrox_model* target,
                                                      ModelHandle draft);

    DraftSource& source() { return source_; }

    std::span<const float> decode(int32_t seq, std::span<const int32_t> tokens,
                                  int32_t pos) override;
    bool remove(int32_t seq, int32_t pos) override;
    uint32_t batch() const override { return batch_; }
    std::string error() const override { return error_; }

  private:
    DraftModel(ModelHandle model, ContextHandle context);

    ModelHandle model_;
    ContextHandle ctx_;
    uint32_t vocab_ = 0, batch_ = 1;
    std::string error_;
    ModelDraftSource source_{*this, 0};
};

}  // namespace ferrox::cli
