#include "thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ferrox::cpu {
namespace {

// How long an idle worker polls for the next job before it sleeps: decode
// calls come back-to-back, and a condition-variable wake costs tens of
// microseconds. Short, so a worker on a core that another process wants
// soon gets out of its way.
constexpr auto kSpin = std::chrono::microseconds(200);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        published_.store(~uint64_t{0}, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(Job& job) {
    for (;;) {
        const uint64_t chunk = job.next.fetch_add(1, std::memory_order_relaxed);
        if (chunk >= job.chunks) return;
        const uint64_t begin = chunk * job.grain;
        const uint64_t end = begin + job.grain < job.n ? begin + job.grain : job.n;
        (*job.body)(begin, end);
        job.finished.fetch_add(1, std::memory_order_release);
    }
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        // Poll (no lock) for a new generation, then fall back to sleeping.
        const auto deadline = std::chrono::steady_clock::now() + kSpin;
        while (published_.load(std::memory_order_acquire) == seen &&
               std::chrono::steady_clock::now() < deadline) {
            for (int i = 0; i < 32; ++i) cpu_relax();
        }
        std::shared_ptr<Job> job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            job = job_;
        }
        // A late worker finds the counter exhausted and claims nothing, so it
        // never calls a body whose caller has already returned.
        if (job) run_chunks(*job);
    }
}

void ThreadPool::parallel_for(uint64_t n, uint64_t grain,
                              const std::function<void(uint64_t, uint64_t)>& body) {
    if (n == 0) return;
    if (grain == 0) grain = 1;
    auto job = std::make_shared<Job>();
    job->body = &body;
    job->n = n;
    job->grain = grain;
    job->chunks = (n + grain - 1) / grain;
    if (workers_.empty() || job->chunks == 1) {
        body(0, n);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        job_ = job;
        ++generation_;
        published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    run_chunks(*job);
    while (job->finished.load(std::memory_order_acquire) < job->chunks) std::this_thread::yield();
    std::lock_guard lock(mutex_);
    if (job_ == job) job_.reset();
}

}  // namespace ferrox::cpu
