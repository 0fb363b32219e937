#include "memory_budget.h"

#include <utility>

namespace ferrox::server {

MemoryBudget::Charge& MemoryBudget::Charge::operator=(Charge&& o) noexcept {
    if (this != &o) {
        release();
        budget_ = std::exchange(o.budget_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

void MemoryBudget::Charge::shrink_to(uint64_t keep) {
    if (!budget_ || keep >= bytes_) return;
    budget_->give_back(bytes_ - keep);
    bytes_ = keep;
}

MemoryBudget::Charge MemoryBudget::try_charge(uint64_t bytes) {
    std::lock_guard lock(m_);
    if (bytes == 0 || bytes > total_ - used_) return {};
    used_ += bytes;
    return {this, bytes};
}

uint64_t MemoryBudget::in_use() const {
    std::lock_guard lock(m_);
    return used_;
}

void MemoryBudget::give_back(uint64_t bytes) {
    std::lock_guard lock(m_);
    used_ -= bytes;
}

}  // namespace ferrox::server
