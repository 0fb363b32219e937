// The context and batch a model gets when nobody chooses them: one rule,
// read by Engine::open (so by every front end and the C API) and by
// Model::load for a context of 0.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ferrox::model {

// Positions per sequence by default. A model trained on 128K positions would
// otherwise reserve a KV cache of several GiB that a chat or a prompt rarely
// fills; 4096 holds most prompts and answers (llama.cpp's old -c default).
inline constexpr uint32_t kContextPerSequence = 4096;

// Tokens one decode takes by default: the prompt chunk `run` and `logits`
// have always used, and the rows the scratch is sized for.
inline constexpr uint32_t kDefaultBatch = 256;

// KV cells shared by `sequences` sequences: each gets min(4096, training).
// `sequences` is at most KvCells::kMaxSeq (64): the product fits 32 bits.
constexpr uint32_t default_context(uint32_t n_ctx_train, uint32_t sequences) {
    return sequences * std::min(kContextPerSequence, n_ctx_train);
}

// The batch derived from the context: `asked` (0: kDefaultBatch) but never
// more than the context, since every token of a batch takes a cell.
constexpr uint32_t derived_batch(uint32_t asked, uint32_t context) {
    return std::max(1u, std::min(asked ? asked : kDefaultBatch, context));
}

}  // namespace ferrox::model
