// Embeddings: one vector per input from an embedding model's final-norm
// hidden rows, pooled as the file says (`<arch>.pooling_type`: mean, cls or
// last, as llama.cpp's build_pooling) and optionally L2-normalised (as
// llama.cpp's llama-embedding and llama-server do by default). A reranker
// (rank) pools its last row (an encoder's: its first, CLS) and scores it
// through its classifier head (Context::rank_scores): n_cls_out scores,
// never normalised.
//
// Many inputs share each decode (one sequence id each), so a batch of short
// inputs costs one forward pass. A sequence's rows are computed the same way
// whatever else the batch holds (docs/models.md, "Batch invariance"), and
// the pooling reads them in position order, so an input's vector does not
// depend on its neighbours.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/model/context.h"
#include "ferrox/model/hparams.h"

namespace ferrox::model {

struct EmbedOptions {
    Pooling pooling = Pooling::Last;  // Mean, Cls, Last or Rank
    bool normalize = true;            // L2 norm 1 (a zero vector stays zero; not Rank's scores)
};

// Embeds each input (token ids, 1..ctx.context() of them) through `ctx`,
// whose cells it uses and leaves empty: a context given to embeddings only.
// Returns inputs.size() vectors of n_embd floats (Rank: n_cls_out scores),
// in input order. An empty input, one longer than the context, or a pooling
// other than Mean, Cls, Last or Rank is refused naming its index before
// anything is decoded.
FERROX_API Expected<std::vector<std::vector<float>>> embed(
    Context& ctx, std::span<const std::vector<int32_t>> inputs, const EmbedOptions& options);

// The pooled vector scaled to L2 norm 1 (in double, as llama.cpp's
// common_embd_normalize); a zero vector is left as it is.
FERROX_API void normalize_l2(std::span<float> v);

}  // namespace ferrox::model
