// A small persistent pool. Work is split into chunks claimed from an atomic
// counter, and the calling thread claims chunks too: a worker the OS has
// descheduled (the other core busy) delays only the chunk it holds, never the
// whole call -- the failure that makes a fixed split 10-25x slower under load.
// Idle workers poll briefly before sleeping, for decode latency; the caller
// yields while it waits for the last chunk, so a worker sharing its core runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ferrox::cpu {

class ThreadPool {
  public:
    // `threads` counts the caller: 1 means no workers at all.
    explicit ThreadPool(unsigned threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Calls body(begin, end) on disjoint chunks covering [0, n), each at most
    // `grain` long; returns when all have run. Not reentrant.
    void parallel_for(uint64_t n, uint64_t grain,
                      const std::function<void(uint64_t, uint64_t)>& body);

  private:
    struct Job {
        const std::function<void(uint64_t, uint64_t)>* body = nullptr;
        uint64_t n = 0, grain = 1, chunks = 0;
        std::atomic<uint64_t> next{0};
        std::atomic<uint64_t> finished{0};
    };
    static void run_chunks(Job& job);
    void worker_loop();

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::shared_ptr<Job> job_;
    uint64_t generation_ = 0;
    std::atomic<uint64_t> published_{0};  // generation_, readable without the lock
    bool stopping_ = false;
};

}  // namespace ferrox::cpu
