#include "ferrox/model/kv_cells.h"

#include <algorithm>
#include <limits>

namespace ferrox::model {

KvCells::KvCells(uint32_t n_cells, uint32_t n_seq)
    : n_seq_(n_seq), pos_(n_cells, -1), seqs_(n_cells, 0) {}

int32_t KvCells::max_pos(uint32_t seq) const {
    int32_t best = -1;
    for (uint32_t c = 0; c < size(); ++c)
        if (has(c, seq)) best = std::max(best, pos_[c]);
    return best;
}

int32_t KvCells::min_pos(uint32_t seq) const {
    int32_t best = std::numeric_limits<int32_t>::max();
    bool any = false;
    for (uint32_t c = 0; c < size(); ++c)
        if (has(c, seq)) best = std::min(best, pos_[c]), any = true;
    return any ? best : -1;
}

void KvCells::drop(uint32_t cell, uint64_t mask) {
    if (seqs_[cell] == 0) return;
    seqs_[cell] &= ~mask;
    if (seqs_[cell] == 0) {
        pos_[cell] = -1;
        --used_;
    }
}

namespace {
bool in_range(int32_t pos, int32_t p0, int32_t p1) {
    return pos >= std::max(p0, 0) && (p1 < 0 || pos < p1);
}
}  // namespace

void KvCells::remove(uint32_t seq, int32_t p0, int32_t p1) {
    for (uint32_t c = 0; c < size(); ++c)
        if (has(c, seq) && in_range(pos_[c], p0, p1)) drop(c, uint64_t{1} << seq);
}

void KvCells::remove_all(int32_t p0, int32_t p1) {
    for (uint32_t c = 0; c < size(); ++c)
        if (!is_free(c) && in_range(pos_[c], p0, p1)) drop(c, ~uint64_t{0});
}

void KvCells::copy(uint32_t src, uint32_t dst, int32_t p0, int32_t p1) {
    if (src == dst) return;
    remove(dst, p0, p1);
    for (uint32_t c = 0; c < size(); ++c)
        if (has(c, src) && in_range(pos_[c], p0, p1)) seqs_[c] |= uint64_t{1} << dst;
}

void KvCells::keep(uint32_t seq) {
    for (uint32_t c = 0; c < size(); ++c) drop(c, ~(uint64_t{1} << seq));
}

void KvCells::clear() {
    std::fill(pos_.begin(), pos_.end(), -1);
    std::fill(seqs_.begin(), seqs_.end(), 0);
    used_ = 0;
}

std::vector<uint32_t> KvCells::find_free(uint32_t count) const {
    std::vector<uint32_t> cells;
    if (count > free()) return cells;
    cells.reserve(count);
    for (uint32_t c = 0; c < size() && cells.size() < count; ++c)
        if (is_free(c)) cells.push_back(c);
    return cells;
}

void KvCells::occupy(uint32_t cell, int32_t pos, uint64_t seqs) {
    pos_[cell] = pos;
    seqs_[cell] = seqs;
    ++used_;
}

void KvCells::release(std::span<const uint32_t> cells) {
    for (uint32_t c : cells) drop(c, ~uint64_t{0});
}

void KvCells::cells_of(uint32_t seq, int32_t p0, int32_t p1, std::vector<uint32_t>& out) const {
    out.clear();
    for (uint32_t c = 0; c < size(); ++c)
        if (has(c, seq) && pos_[c] >= p0 && pos_[c] <= p1) out.push_back(c);
    std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) { return pos_[a] < pos_[b]; });
}

}  // namespace ferrox::model
