#include "embedder.h"

#include <fmt/format.h>

namespace ferrox::server {

struct Embedder::Request {
    std::vector<std::vector<int32_t>> inputs;
    Clock::time_point deadline;
    bool done = false;
    Outcome outcome;
};

Embedder::Embedder(std::unique_ptr<model::Context> context, EmbedderOptions options)
    : ctx_(std::move(context)), options_(options), n_ctx_(ctx_->longest_embedding_input()) {
    thread_ = std::thread([this] { loop(); });
}

Embedder::~Embedder() { stop(); }

Embedder::Outcome Embedder::embed(std::vector<std::vector<int32_t>> inputs,
                                  Clock::time_point deadline) {
    auto r = std::make_shared<Request>();
    r->inputs = std::move(inputs);
    r->deadline = deadline;
    std::unique_lock lock(m_);
    if (draining_ || stopping_)
        return {Refusal::Draining, "the server is shutting down", {}, false};
    if (running_ > 0 && waiting_.size() >= options_.max_queue)
        return {Refusal::QueueFull,
                fmt::format("{} embedding requests are waiting (server.max_queue {})",
                            waiting_.size(), options_.max_queue),
                {},
                false};
    waiting_.push_back(r);
    wake_.notify_all();
    idle_.wait(lock, [&] { return r->done; });
    return std::move(r->outcome);
}

void Embedder::loop() {
    std::unique_lock lock(m_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
        if (stopping_) break;
        // The round: waiting requests in arrival order within the bounds
        // (the first is always taken, however large); late ones are answered.
        std::vector<std::shared_ptr<Request>> round;
        size_t inputs = 0, tokens = 0;
        const Clock::time_point now = Clock::now();
        while (!waiting_.empty()) {
            const std::shared_ptr<Request>& r = waiting_.front();
            if (now >= r->deadline) {
                r->outcome = {
                    Refusal::None, "the request timed out waiting for its turn", {}, true};
                r->done = true;
                waiting_.pop_front();
                continue;
            }
            size_t t = 0;
            for (const auto& in : r->inputs) t += in.size();
            if (!round.empty() && (inputs + r->inputs.size() > options_.round_inputs ||
                                   tokens + t > options_.round_tokens))
                break;
            inputs += r->inputs.size();
            tokens += t;
            round.push_back(r);
            waiting_.pop_front();
        }
        idle_.notify_all();
        if (round.empty()) continue;
        running_ = round.size();
        lock.unlock();
        std::vector<std::vector<int32_t>> all;
        all.reserve(inputs);
        for (const auto& r : round)
            for (const auto& in : r->inputs) all.push_back(in);
        model::EmbedOptions eo;
        eo.pooling = options_.pooling;
        eo.normalize = false;  // the API normalises (after any truncation)
        auto vectors = model::embed(*ctx_, all, eo);
        lock.lock();
        size_t next = 0;
        for (const auto& r : round) {
            if (!vectors) {
                r->outcome = {Refusal::None, vectors.error().message(), {}, true};
            } else {
                for (size_t i = 0; i < r->inputs.size(); ++i)
                    r->outcome.vectors.push_back(std::move((*vectors)[next + i]));
            }
            next += r->inputs.size();
            r->done = true;
        }
        running_ = 0;
        idle_.notify_all();
    }
    // Stopped: whatever still waits is answered.
    for (const auto& r : waiting_) {
        r->outcome = {Refusal::Draining, "the server stopped", {}, false};
        r->done = true;
    }
    waiting_.clear();
    idle_.notify_all();
}

void Embedder::begin_drain() {
    std::lock_guard lock(m_);
    draining_ = true;
}

bool Embedder::wait_idle(Clock::time_point deadline) {
    std::unique_lock lock(m_);
    return idle_.wait_until(lock, deadline, [&] { return waiting_.empty() && running_ == 0; });
}

void Embedder::stop() {
    {
        std::lock_guard lock(m_);
        if (stopping_ && !thread_.joinable()) return;
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

}  // namespace ferrox::server
