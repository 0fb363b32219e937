// The engine side of /v1/embeddings: a context of its own (an embedding
// model's server has no generation scheduler) and one worker thread. Each
// round it takes the waiting requests in arrival order, up to a bound of
// inputs and tokens, and embeds all their inputs in shared decodes
// (model::embed): many small requests cost one forward pass. A request's
// vectors do not depend on what it was batched with (docs/models.md,
// "Pooling"). Admission is bounded like the scheduler's: at most
// `max_queue` requests wait beyond the one being computed; more are
// refused, as are new ones while draining.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/model/context.h"
#include "ferrox/model/embed.h"

namespace ferrox::server {

struct EmbedderOptions {
    model::Pooling pooling = model::Pooling::Last;
    uint32_t max_queue = 0;  // requests waiting beyond the one in progress
    // A round's bounds: inputs and tokens embedded together at most (a
    // larger request runs alone).
    size_t round_inputs = 256;
    size_t round_tokens = 8192;
};

class Embedder {
  public:
    using Vectors = std::vector<std::vector<float>>;
    using Clock = std::chrono::steady_clock;

    Embedder(std::unique_ptr<model::Context> context, EmbedderOptions options);
    ~Embedder();
    Embedder(const Embedder&) = delete;
    Embedder& operator=(const Embedder&) = delete;

    enum class Refusal { None, QueueFull, Draining };
    struct Outcome {
        Refusal refusal = Refusal::None;
        std::string why;      // a refusal's, or the failure's
        Vectors vectors;      // not normalised; one per input, in order
        bool failed = false;  // the engine failed (why says how)
    };
    // Embeds `inputs` (each 1..context() tokens: the caller checked),
    // waiting for its turn; returns at `deadline` with failed set when the
    // round has not started by then.
    Outcome embed(std::vector<std::vector<int32_t>> inputs, Clock::time_point deadline);

    // The most tokens an input may have (Context::longest_embedding_input:
    // the context, a non-causal model's batch, learned positions).
    uint32_t context() const { return n_ctx_; }
    void begin_drain();
    bool wait_idle(Clock::time_point deadline);
    void stop();

  private:
    struct Request;
    void loop();

    std::unique_ptr<model::Context> ctx_;
    EmbedderOptions options_;
    uint32_t n_ctx_ = 0;
    std::mutex m_;
    std::condition_variable wake_, idle_;
    std::deque<std::shared_ptr<Request>> waiting_;
    size_t running_ = 0;  // requests in the round being computed
    bool draining_ = false, stopping_ = false;
    std::thread thread_;
};

}  // namespace ferrox::server
