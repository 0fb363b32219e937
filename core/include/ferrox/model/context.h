// A context: the mutable half of inference over a shared, read-only Model.
// It owns a unified KV cache of `context` cells for up to `sequences` sequences
// (ferrox/model/kv_cells.h) and the scratch for a batch of up to `batch`
// tokens. decode() runs one batch -- tokens of any sequences at any
// positions -- as one forward pass: every weight product is one product
// over all the batch's rows, attention runs per sequence over that
// sequence's cells only (causal, sliding window per sequence).
//
// Threading: a context is used by one thread at a time; several contexts
// over one model may run on different threads (the model is not written
// after load).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"
#include "ferrox/model/kv_cells.h"
#include "ferrox/model/model.h"
#include "ferrox/model/step_profile.h"

namespace ferrox::model {

// Tokens of any sequences at any positions. Token i is stored in one cell
// that every sequence in seq_ids[i] uses; it attends as seq_ids[i][0] (its
// cells up to its position). Within each sequence the batch's positions
// must follow on from the sequence's last cached position, without gaps or
// repeats.
struct FERROX_API Batch {
    std::vector<int32_t> tokens;
    std::vector<int32_t> positions;
    std::vector<std::vector<int32_t>> seq_ids;
    std::vector<uint8_t> logits;  // 1: this token's logits are wanted

    void add(int32_t token, int32_t pos, std::initializer_list<int32_t> seqs, bool want_logits);
    void add(int32_t token, int32_t pos, std::span<const int32_t> seqs, bool want_logits);
    void clear();
    size_t size() const { return tokens.size(); }
};

struct ContextOptions {
    uint32_t context = 0;    // KV cells; 0: the model's context
    uint32_t sequences = 1;  // sequence ids 0..sequences-1 (at most KvCells::kMaxSeq)
    uint32_t batch = 0;      // tokens per decode; 0: the model's batch
    // Times every op of every decode into this profile (not owned; must
    // outlive the context); nullptr: no clock is read.
    StepProfile* profile = nullptr;
    // The host memory the context's KV cache and scratch are planned
    // against; 0: MemAvailable when it is made. (On a resident backend the
    // device's part is planned against its free memory either way.)
    uint64_t available_bytes = 0;
};

// What a decode did. Anything but Ok leaves the cache as it was: no cell is
// taken or overwritten, and the context stays usable.
enum class DecodeCode {
    Ok,
    InvalidBatch,  // a token, sequence id, position or size the batch may not have
    NoRoom,        // fewer free cells than tokens: cells_needed / cells_free say how many
    Failed,        // a backend call failed
};

struct DecodeStatus {
    DecodeCode code = DecodeCode::Ok;
    std::string message;
    uint32_t cells_needed = 0, cells_free = 0;  // NoRoom

    bool ok() const { return code == DecodeCode::Ok; }
    explicit operator bool() const { return ok(); }
};

FERROX_API const char* decode_code_name(DecodeCode code);

class FERROX_API Context {
  public:
    // `model` must outlive the context.
    static Expected<std::unique_ptr<Context>> create(const Model& model,
                                                     const ContextOptions& options);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    uint32_t context() const;
    uint32_t sequences() const;
    uint32_t batch() const;
    const KvCells& cells() const;
    // Bytes the KV cache's buffers hold (K and V of every cell, for the layers
    // that own K and V only; the capacity plan's kv_cache_bytes(context())).
    uint64_t kv_bytes() const;
    // Model::recurrent(): a partial seq_remove is refused.
    bool recurrent() const;

    DecodeStatus decode(const Batch& batch);

    // Logits (vocab floats) of batch token `index` of the last decode, or an
    // empty span when it did not ask for them. Valid until the next decode.
    std::span<const float> logits(uint32_t index) const;

    // The same pass, but each wanted token gets its final-norm hidden state
    // (n_embd floats: the rows an embedding model pools) instead of logits;
    // the output product is skipped. embedding(i) reads them.
    DecodeStatus decode_embeddings(const Batch& batch);
    // The hidden state (n_embd floats) of batch token `index` of the last
    // decode_embeddings, or an empty span when it did not ask for one (or
    // the last decode was a logits one). Valid until the next decode.
    std::span<const float> embedding(uint32_t index) const;
    // A reranker's scores for a pooled final-norm row (n_embd floats): its
    // classifier head's n_cls_out outputs, softmaxed over the labels as
    // llama.cpp does for qwen3 (ArchSpec::rank_head), or a sequence
    // classifier's outputs as they are (BERT's: dense, tanh, then the head;
    // ArchSpec::rank_classifier); empty for a model without a head or a row
    // of another length.
    std::vector<float> rank_scores(std::span<const float> pooled) const;
    // sentence-transformers' dense projections of a pooled row (gemma-
    // embedding's dense_2 then dense_3, where the file has them), in place;
    // the row is left as it is for a model without them.
    void project_pooled(std::vector<float>& pooled) const;
    // False for a non-causal model (an embedding encoder: each sequence is
    // decoded whole by decode_embeddings; decode refuses it).
    bool causal() const;
    // The most tokens one input to model::embed may have: the context's; a
    // non-causal model's input goes in one batch (at most batch()), and
    // learned positions (bert) stop at their rows (n_ctx_train).
    uint32_t longest_embedding_input() const;

    // Sequence operations (the seq id is checked: >= sequences() is an error).
    // Positions [p0, p1) of `seq`; p1 < 0: to the end; seq < 0: every sequence.
    Expected<void> seq_remove(int32_t seq, int32_t p0, int32_t p1);
    // `dst` shares `src`'s cells of positions [p0, p1) (no K/V is copied).
    Expected<void> seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1);
    Expected<void> seq_keep(int32_t seq);
    void clear();
    // -1 when the sequence holds no position.
    Expected<int32_t> seq_min_pos(int32_t seq) const;
    Expected<int32_t> seq_max_pos(int32_t seq) const;

    // A sequence's positions and K/V rows as bytes (host contexts), and back:
    // restore replaces `seq`'s cells with the saved ones in free cells; a
    // buffer for another model shape or KV kind, a truncated one, or too
    // few free cells is refused and nothing changes. The bytes are state
    // version 3 (rows of the layers that own K and V only); restore also
    // reads versions 1 and 2 (rows of every layer, a recurrent layer's
    // skipped) and refuses a later version, naming it.
    Expected<std::vector<std::byte>> seq_save(int32_t seq) const;
    Expected<void> seq_restore(int32_t seq, std::span<const std::byte> bytes);

    // Checkpoints of a recurrent model's sequence state (docs/models.md,
    // "Sequence state and checkpoints"). seq_checkpoint: `seq`'s recurrent
    // state (every recurrent layer's convolution window and delta state) as
    // it stands after its last position p - 1, tagged with p and this loaded
    // model; checkpoint_bytes() long (0: the model has no recurrent layer,
    // and seq_checkpoint refuses). seq_rewind puts one back: `seq` must hold
    // every position 0..p-1 -- the cells whose K/V go with that state; the
    // caller vouches that they hold the tokens the checkpoint was taken on --
    // and then its positions from p on are dropped and its state is the
    // checkpoint's, as if it had never gone past p: the one way to take back
    // a recurrent sequence's tail. A checkpoint of another model (even one of
    // the same shape), a truncated one, or a sequence lacking those positions
    // is refused and nothing changes.
    uint64_t checkpoint_bytes() const;
    Expected<std::vector<std::byte>> seq_checkpoint(int32_t seq) const;
    Expected<void> seq_rewind(int32_t seq, std::span<const std::byte> checkpoint);

    // The single-sequence form Model::forward uses: `batch` must be one
    // sequence; logits go to `out` (as many vocab rows as the batch wants,
    // in batch order) instead of the context's own buffer.
    DecodeStatus decode_into(const Batch& batch, std::span<float> out);

    struct Impl;

  private:
    explicit Context(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Test only: a fault the checkpoint tests must catch, process-wide; never
// set outside them. OneTokenLate tags a checkpoint one position early (its
// state went one token further than it says); StateNotRestored makes
// seq_rewind drop the tail but keep the state it had.
enum class CheckpointFault { None, OneTokenLate, StateNotRestored };
FERROX_API void set_checkpoint_fault(CheckpointFault fault);

}  // namespace ferrox::model
