// Continuous batching for `ferrox serve`: one thread owns the shared context
// and its sequence slots. Each step it admits waiting requests into free
// slots (reusing whole cached prefill chunks of their prompt), decodes every
// generating slot's next token (16 sequences a call), then chunks of the
// oldest pending prompts, so a long new prompt is prefilled in pieces between
// the running streams' tokens. The shapes are chosen so that a request's
// tokens are the same whatever else runs (docs/server.md, "Determinism").
// Connection threads submit Jobs and read their Events. It speaks in engine
// terms only: a job ends with an output::FinishReason and a refusal is a
// Refusal; the API layer words them (HTTP statuses, finish_reason strings).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "context_drafter.h"
#include "decode_context.h"
#include "ferrox/output/sequence_output.h"
#include "ferrox/sampler_chain.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "metrics.h"
#include "prefill_plan.h"
#include "state_checkpoints.h"

namespace ferrox::server {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
    std::vector<int32_t> prompt;
    uint32_t max_tokens = 0;
    // The OpenAI API sets no repetition penalty: base.repeat_penalty stays 1.
    ChainParams sampling;
    std::vector<std::string> stop;
    // Requests share cached prompt prefixes only within one scope (the API
    // key and the request's cache_salt): a shared prefix shows in its
    // cached_tokens and its speed.
    std::string cache_scope;
    uint32_t top_logprobs = 0;  // alternatives reported per token
    bool logprobs = false;
    Clock::time_point arrival = Clock::now();
    Clock::time_point deadline = Clock::time_point::max();
    // Draft tokens verified per step by n-gram speculation (0: none);
    // unset: SchedulerOptions::draft_max. Docs/speculation.md.
    std::optional<uint32_t> draft_max;
};

using output::TokenLogprob;

using output::FinishReason;

// What a job reports, in order: Text events, then exactly one Done, whose
// `finish` says how it ended: a whole answer (output::is_complete) or cut
// short (Cancelled, Timeout, NoRoom, Failed, Shutdown; `why` says more).
struct Event {
    enum class Kind { Text, Done } kind = Kind::Text;
    std::string text;
    std::vector<TokenLogprob> logprobs;        // the tokens behind `text`, when asked for
    FinishReason finish = FinishReason::None;  // Done
    std::string why;                           // Done, when cut short
    std::string stop_string;                   // Done, StopString: the one that ended it
    uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;  // Done
    // Done: draft tokens verified, and those of them that were emitted.
    uint32_t drafted_tokens = 0, accepted_tokens = 0;
};

class Job {
  public:
    explicit Job(GenerationRequest r) : request(std::move(r)) {}
    const GenerationRequest request;

    // Waits up to `timeout` for the next event.
    std::optional<Event> next(std::chrono::milliseconds timeout);
    // The client went away: the scheduler frees the slot at its next step.
    void cancel() { cancelled_ = true; }
    bool cancelled() const { return cancelled_; }

    void push(Event e);
    // When the job got a slot, produced its first token, and ended (its Done
    // pushed). Written by the scheduler; read by the API once Done is seen,
    // which the event queue's lock orders after the writes (first_token_at
    // is also read earlier, for the TTFT of a stream).
    std::optional<Clock::time_point> admitted_at, first_token_at, finished_at;
    // Its prefill chunks, for its trace (docs/operations.md): how many ran,
    // and the times of the first kRecordedChunks, so that a long prompt's
    // record stays bounded. Written and read as the times above.
    struct PrefillChunk {
        Clock::time_point start, end;
        uint32_t tokens = 0;
    };
    static constexpr size_t kRecordedChunks = 32;
    std::vector<PrefillChunk> prefill_chunks;
    uint32_t prefill_chunk_count = 0;

  private:
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Event> events_;
    std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
    uint32_t sequences = 0;
    uint32_t max_queue = 0;  // waiting beyond the free slots
    // Prompt tokens per step beside the decoding sequences; also the unit in
    // which a cached prefix is shared.
    uint32_t prefill_chunk = 128;
    // Rows one decode call may hold (the context's batch); 0: prefill_chunk.
    // From prefill_chunk + 16 on, a prompt resumed from a checkpoint just
    // short of a chunk end computes that chunk's rest with the next chunk
    // (prefill_plan.h).
    uint32_t batch = 0;
    // Prompt positions computed per step (the last chunk may go past it).
    uint32_t prefill_budget = 256;
    // Draft tokens a request verifies per step unless it names its own
    // (server.spec_draft_n_max; drafted by prompt lookup, or by the draft
    // model of use_draft_model); at most kMaxDraft.
    uint32_t draft_max = 0;
    // A recurrent model's state checkpoints at chunk ends and prompt ends may
    // take this many bytes together (server.checkpoint_memory; 0: none are kept).
    uint64_t checkpoint_memory = 0;
    // Where the running, waiting and KV gauges go; null: the Metrics' own
    // (one model). Each model of a many-models server has its own; it must
    // outlive the scheduler.
    LoadGauges* gauges = nullptr;
};

class Scheduler {
  public:
    // `tokenizer` must outlive the scheduler; `context` is its own.
    Scheduler(const Tokenizer& tokenizer, std::unique_ptr<DecodeContext> context,
              SchedulerOptions options, Metrics& metrics);
    ~Scheduler();

    // Drafts from this model's context (its own cells; one sequence per
    // slot, the same vocabulary -- the caller checked it) instead of prompt
    // lookup. Before start(); the scheduler owns it.
    void use_draft_model(std::unique_ptr<DecodeContext> draft);

    // Runs step() on the scheduler's own thread until stop(), waiting for
    // work when there is none. Without start(), a caller (a test) steps it.
    void start();
    // One round: admits waiting jobs into free sequences, ends cancelled and
    // timed-out ones, decodes the next token of every generating sequence,
    // then prefill chunks. False when no job runs.
    bool step();

    enum class Refusal { None, QueueFull, Draining, TooLong };
    struct Submitted {
        std::shared_ptr<Job> job;
        Refusal refusal = Refusal::None;
        std::string why;
    };
    Submitted submit(GenerationRequest request);

    // Stops admitting (submit refuses with Draining); running and waiting jobs go on.
    void begin_drain();
    // Waits until no job runs or waits, at most until `deadline`; true when idle.
    bool wait_idle(Clock::time_point deadline);
    // Stops the thread; every job still running or waiting ends with Shutdown.
    void stop();

    // A sequence's rows in one decode call: its token and its draft.
    static constexpr uint32_t kMaxDraft = 15;

    uint32_t context() const { return n_ctx_; }
    uint32_t sequences() const { return options_.sequences; }

  private:
    struct Slot;
    void loop();
    bool advance();  // step() after admission
    void decode_step();
    // The step's calls: consecutive groups of `generating`, each at most
    // kDecodeRowsPerCall rows with the drafts planned for it.
    std::vector<std::vector<Slot*>> plan_drafts(const std::vector<Slot*>& generating);
    void propose_with_model(const std::vector<std::pair<Slot*, uint32_t>>& slots);
    void decode_group(const std::vector<Slot*>& group);
    void verify_slot(Slot& slot, uint32_t first_row);
    void drop_drafts_of_idle(Slot& failed);
    void prefill_step();
    size_t prefill_chunk_of(Slot& slot);  // positions computed; 0: no room for it now
    PrefillShape prefill_shape() const;
    model::DecodeStatus decode_making_room(const model::Batch& batch);
    void fail_batch(const model::DecodeStatus& status, const std::vector<Slot*>& in);
    // The CPU products of up to 16 rows equal the single-row ones to the bit.
    static constexpr size_t kDecodeRowsPerCall = 16;
    void admit(std::unique_lock<std::mutex>& lock);
    void finish(Slot& slot, FinishReason why, std::string detail, bool keep_cells);
    void sample_slot(Slot& slot, std::span<const float> logits);
    FinishReason emit(Slot& slot, int32_t token, std::span<const float> logits);
    void publish_usage();
    void keep_checkpoint(Slot& slot);
    void forget_checkpoints(Slot& slot, size_t keep);  // those past `keep` positions

    const Tokenizer& tok_;
    std::unique_ptr<DecodeContext> ctx_;
    SchedulerOptions options_;
    Metrics& metrics_;
    LoadGauges& gauges_;
    uint32_t n_ctx_ = 0;
    std::vector<Slot> slots_;
    uint64_t use_clock_ = 0;
    std::unique_ptr<StateCheckpoints> checkpoints_;  // a recurrent model's, when budgeted
    std::unique_ptr<ContextDrafter> drafter_;        // the draft model's, when one drafts
    int64_t published_checkpoint_bytes_ = 0;
    uint64_t published_evictions_ = 0;
    uint64_t admit_clock_ = 0;  // orders idle slots for eviction, least recently used first
    size_t draft_turn_ = 0;     // which generating slot is offered draft rows first this step

    std::mutex m_;
    std::condition_variable wake_, idle_;
    std::deque<std::shared_ptr<Job>> waiting_;
    bool draining_ = false, stopping_ = false;
    size_t running_ = 0;
    std::thread thread_;
};

}  // namespace ferrox::server
