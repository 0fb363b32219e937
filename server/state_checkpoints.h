// Recurrent-state checkpoints of the server's sequences (docs/models.md,
// "Sequence state and checkpoints"). A hybrid model's sequence (qwen35)
// cannot drop its tail: its recurrent state holds every token it took in.
// So while a prompt is prefilled, the scheduler keeps the state at each
// chunk's end and at the prompt's end; a later prompt that shares a prefix with the sequence's
// tokens resumes from the last checkpoint inside that prefix instead of from
// position 0 (DecodeContext::rewind drops the attention cells after it).
//
// A checkpoint belongs to the sequence whose cells go with it and holds the
// tokens it was taken on: it applies only to that sequence, and only to a
// prompt that starts with exactly those tokens. The store's bytes -- states
// and tokens -- never exceed its budget: before a checkpoint is taken, the
// least recently used ones are evicted to make room, and one that alone
// exceeds the budget is not taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <vector>

namespace ferrox::server {

class StateCheckpoints {
  public:
    struct Entry {
        int32_t seq = 0;
        std::vector<int32_t> tokens;  // the prefix it was taken after: positions 0..size-1
        std::shared_ptr<const std::vector<std::byte>> state;
        uint64_t bytes() const;
    };

    // `state_bytes`: one checkpoint's size (DecodeContext::checkpoint_bytes).
    StateCheckpoints(uint64_t budget, uint64_t state_bytes)
        : budget_(budget), state_(state_bytes) {}

    // Room for a checkpoint of `seq` after `prefix`: least recently used
    // entries evicted until it fits. False when it alone exceeds the budget.
    bool make_room(size_t prefix);
    // Keeps `state`, taken on `seq` after `prefix`, as the most recently
    // used (after make_room said yes; an entry for the same prefix is replaced).
    void put(int32_t seq, std::span<const int32_t> prefix, std::vector<std::byte> state);
    // `seq`'s checkpoint at the largest position <= `most` whose tokens equal
    // the prompt's first ones and that `usable` takes (given its position);
    // null: none. Valid until the store changes.
    const Entry* find(int32_t seq, std::span<const int32_t> prompt, size_t most,
                      const std::function<bool(size_t)>& usable) const;
    // `entry` (from find) becomes the most recently used.
    void touch(const Entry* entry);
    // `seq`'s checkpoints past `keep` positions go: its cells there are gone.
    void drop_after(int32_t seq, size_t keep);
    // `dst` gets `src`'s checkpoints up to `upto` positions (the states shared,
    // each entry counted whole), after its own are dropped.
    void share(int32_t src, int32_t dst, size_t upto);

    uint64_t bytes() const { return used_; }
    uint64_t budget() const { return budget_; }
    size_t count() const { return entries_.size(); }
    uint64_t evicted() const { return evicted_; }

  private:
    void erase(std::list<Entry>::iterator it);

    uint64_t budget_, state_, used_ = 0, evicted_ = 0;
    std::list<Entry> entries_;  // least recently used first
};

}  // namespace ferrox::server
