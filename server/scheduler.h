// Continuous batching for `ferrox serve`: one thread owns the shared context
// and its sequence slots. Each step it admits waiting requests into free
// slots (reusing whole cached prefill chunks of their prompt), decodes every
// generating slot's next token (16 sequences a call), then chunks of the
// oldest pending prompts, so a long new prompt is prefilled in pieces between
// the running streams' tokens. The shapes are chosen so that a request's
// tokens are the same whatever else runs (docs/server.md, "Determinism").
// Connection threads submit Jobs and read their Events.
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

#include "ferrox/model/context.h"
#include "ferrox/output/sequence_output.h"
#include "ferrox/sampler_chain.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "metrics.h"

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
};

using output::TokenLogprob;

// What a job reports, in order: Text events, then exactly one Done or Error.
struct Event {
    enum class Kind { Text, Done, Error } kind = Kind::Text;
    std::string text;
    std::vector<TokenLogprob> logprobs;  // the tokens behind `text`, when asked for
    std::string finish_reason;           // Done: "stop" or "length"
    uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
    int http_status = 0;  // Error
    std::string error;
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
    std::optional<Clock::time_point> first_token_at;

  private:
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Event> events_;
    std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
    uint32_t n_seq = 0;
    uint32_t max_queue = 0;  // waiting beyond the free slots
    // Prompt tokens per step beside the decoding sequences; also the unit in
    // which a cached prefix is shared.
    uint32_t prefill_chunk = 128;
    // Prompt positions computed per step (the last chunk may go past it).
    uint32_t prefill_budget = 256;
};

class Scheduler {
  public:
    // `model` and `tokenizer` must outlive the scheduler; `context` is its own.
    Scheduler(const model::Model& model, const Tokenizer& tokenizer,
              std::unique_ptr<model::Context> context, SchedulerOptions options, Metrics& metrics);
    ~Scheduler();

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
    // Ends every job with an Error event (503) and stops the thread.
    void stop();

    uint32_t n_ctx() const { return n_ctx_; }
    uint32_t n_seq() const { return options_.n_seq; }

  private:
    struct Slot;
    void loop();
    bool step();  // false when there was nothing to do
    void decode_step();
    void prefill_step();
    size_t prefill_chunk_of(Slot& slot);  // positions computed; 0: no room for it now
    model::DecodeStatus decode_making_room(const model::Batch& batch);
    void fail_batch(const model::DecodeStatus& status, const std::vector<Slot*>& in);
    // The CPU products of up to 16 rows equal the single-row ones to the bit.
    static constexpr size_t kDecodeRowsPerCall = 16;
    void admit(std::unique_lock<std::mutex>& lock);
    void finish(Slot& slot, Event done, bool keep_cells);
    void sample_slot(Slot& slot, std::span<const float> logits);
    void publish_usage();

    const model::Model& model_;
    const Tokenizer& tok_;
    std::unique_ptr<model::Context> ctx_;
    SchedulerOptions options_;
    Metrics& metrics_;
    uint32_t n_ctx_ = 0;
    std::vector<Slot> slots_;
    uint64_t use_clock_ = 0;
    uint64_t admit_clock_ = 0;  // orders idle slots for eviction, least recently used first

    std::mutex m_;
    std::condition_variable wake_, idle_;
    std::deque<std::shared_ptr<Job>> waiting_;
    bool draining_ = false, stopping_ = false;
    size_t running_ = 0;
    std::thread thread_;
};

}  // namespace ferrox::server
