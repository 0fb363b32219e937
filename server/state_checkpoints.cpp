#include "state_checkpoints.h"

#include <algorithm>

namespace ferrox::server {

namespace {
// Bookkeeping beside the state and the tokens, counted so that many small
// checkpoints cannot outgrow the budget either.
constexpr uint64_t kEntryOverhead = 128;
}  // namespace

uint64_t StateCheckpoints::Entry::bytes() const {
    return (state ? state->size() : 0) + tokens.size() * sizeof(int32_t) + kEntryOverhead;
}

void StateCheckpoints::erase(std::list<Entry>::iterator it) {
    used_ -= it->bytes();
    entries_.erase(it);
}

bool StateCheckpoints::make_room(size_t prefix) {
    const uint64_t need = state_ + prefix * sizeof(int32_t) + kEntryOverhead;
    if (need > budget_) return false;
    while (used_ + need > budget_ && !entries_.empty()) {
        erase(entries_.begin());
        ++evicted_;
    }
    return true;
}

void StateCheckpoints::put(int32_t seq, std::span<const int32_t> prefix,
                           std::vector<std::byte> state) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->seq == seq && it->tokens.size() == prefix.size()) {
            erase(it);
            break;
        }
    Entry e;
    e.seq = seq;
    e.tokens.assign(prefix.begin(), prefix.end());
    e.state = std::make_shared<const std::vector<std::byte>>(std::move(state));
    used_ += e.bytes();
    entries_.push_back(std::move(e));
}

const StateCheckpoints::Entry* StateCheckpoints::find(
    int32_t seq, std::span<const int32_t> prompt, size_t most,
    const std::function<bool(size_t)>& usable) const {
    const Entry* best = nullptr;
    for (const Entry& e : entries_) {
        const size_t n = e.tokens.size();
        if (e.seq != seq || n > most || n > prompt.size()) continue;
        if ((best && n <= best->tokens.size()) || !usable(n)) continue;
        // The tokens themselves, not a hash of them: a checkpoint never
        // applies to another prefix.
        if (std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin())) best = &e;
    }
    return best;
}

void StateCheckpoints::touch(const Entry* entry) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (&*it == entry) return entries_.splice(entries_.end(), entries_, it);
}

void StateCheckpoints::drop_after(int32_t seq, size_t keep) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        auto next = std::next(it);
        if (it->seq == seq && it->tokens.size() > keep) erase(it);
        it = next;
    }
}

void StateCheckpoints::share(int32_t src, int32_t dst, size_t upto) {
    if (src == dst) return;
    drop_after(dst, 0);
    std::vector<Entry> copies;
    for (const Entry& e : entries_)
        if (e.seq == src && e.tokens.size() <= upto) copies.push_back({dst, e.tokens, e.state});
    for (Entry& e : copies) {
        if (!make_room(e.tokens.size())) break;
        used_ += e.bytes();
        entries_.push_back(std::move(e));
    }
}

}  // namespace ferrox::server
