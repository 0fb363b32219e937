// The bookkeeping of a unified KV cache: which cells hold which position of
// which sequences. A cell is one row of every layer's K and V; it is free
// when no sequence uses it. Copying a sequence adds that sequence to the
// same cells (a shared prefix is stored once), so a cell holds a set of
// sequences, not one. The K/V values themselves live with the context; this
// class only decides where they go and who may see them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ferrox/api.h"

namespace ferrox::model {

class FERROX_API KvCells {
  public:
    // At most kMaxSeq sequences: a cell's set is one 64-bit mask.
    static constexpr uint32_t kMaxSeq = 64;

    KvCells(uint32_t n_cells, uint32_t n_seq);

    uint32_t size() const { return static_cast<uint32_t>(pos_.size()); }
    uint32_t n_seq() const { return n_seq_; }
    uint32_t used() const { return used_; }
    uint32_t free() const { return size() - used_; }

    bool is_free(uint32_t cell) const { return seqs_[cell] == 0; }
    int32_t pos(uint32_t cell) const { return pos_[cell]; }
    bool has(uint32_t cell, uint32_t seq) const { return (seqs_[cell] >> seq) & 1u; }
    uint64_t seqs(uint32_t cell) const { return seqs_[cell]; }

    // Largest and smallest position of a sequence, -1 when it holds none.
    int32_t max_pos(uint32_t seq) const;
    int32_t min_pos(uint32_t seq) const;

    // Removes positions [p0, p1) of `seq` (p1 < 0: to the end); a cell that
    // no sequence uses any more becomes free.
    void remove(uint32_t seq, int32_t p0, int32_t p1);
    // Every sequence's positions [p0, p1) (the "all sequences" form).
    void remove_all(int32_t p0, int32_t p1);
    // `dst` also uses every cell of `src` with position in [p0, p1): shared
    // cells, nothing duplicated. `dst`'s own cells in that range are dropped
    // first so one position never has two cells in a sequence.
    void copy(uint32_t src, uint32_t dst, int32_t p0, int32_t p1);
    // Drops every sequence but `seq`.
    void keep(uint32_t seq);
    void clear();

    // `count` free cells, lowest index first, or an empty vector when fewer
    // are free (nothing changes then).
    std::vector<uint32_t> find_free(uint32_t count) const;
    // Gives `cell` position `pos` and sequence set `seqs` (it must be free).
    void occupy(uint32_t cell, int32_t pos, uint64_t seqs);
    // Frees cells that occupy() just filled (a decode that failed midway).
    void release(std::span<const uint32_t> cells);

    // The cells of `seq` with position in [p0, p1], ordered by position.
    void cells_of(uint32_t seq, int32_t p0, int32_t p1, std::vector<uint32_t>& out) const;

  private:
    void drop(uint32_t cell, uint64_t mask);

    uint32_t n_seq_;
    uint32_t used_ = 0;
    std::vector<int32_t> pos_;    // -1 when free
    std::vector<uint64_t> seqs_;  // bit s: sequence s uses the cell
};

}  // namespace ferrox::model
