// A server-wide budget of bytes that requests may hold while they are read,
// parsed and tokenized. Each request is charged before its body is read (a
// fixed multiple of its Content-Length, docs/security.md), so that many large
// requests at once are refused with 503 instead of taking the machine's memory.
#pragma once

#include <cstdint>
#include <mutex>

namespace ferrox::server {

class MemoryBudget {
  public:
    explicit MemoryBudget(uint64_t total) : total_(total) {}
    MemoryBudget(const MemoryBudget&) = delete;
    MemoryBudget& operator=(const MemoryBudget&) = delete;

    // A charge that returns its bytes when it ends.
    class Charge {
      public:
        Charge() = default;
        Charge(Charge&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
        Charge& operator=(Charge&& o) noexcept;
        Charge(const Charge&) = delete;
        Charge& operator=(const Charge&) = delete;
        ~Charge() { release(); }
        // Gives back all but `keep` bytes (what the request still holds).
        void shrink_to(uint64_t keep);
        void release() { shrink_to(0); }
        uint64_t bytes() const { return bytes_; }

      private:
        friend class MemoryBudget;
        Charge(MemoryBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
        MemoryBudget* budget_ = nullptr;
        uint64_t bytes_ = 0;
    };

    // The charge, or an empty one (bytes() == 0) when it does not fit now.
    Charge try_charge(uint64_t bytes);
    uint64_t in_use() const;
    uint64_t total() const { return total_; }

  private:
    void give_back(uint64_t bytes);
    const uint64_t total_;
    mutable std::mutex m_;
    uint64_t used_ = 0;
};

}  // namespace ferrox::server
