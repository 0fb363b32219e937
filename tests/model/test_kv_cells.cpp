// The unified KV cache's bookkeeping: sequence sets per cell, shared
// prefixes, removal, and allocation that never takes a used cell.
#include <catch2/catch.hpp>
#include <random>

#include "ferrox/model/kv_cells.h"

using ferrox::model::KvCells;

namespace {
// Gives `seq` positions [0, n) in the lowest free cells.
void fill(KvCells& cells, uint32_t seq, int32_t n) {
    const auto free = cells.find_free(static_cast<uint32_t>(n));
    REQUIRE(free.size() == static_cast<size_t>(n));
    for (int32_t p = 0; p < n; ++p) cells.occupy(free[p], p, uint64_t{1} << seq);
}
}  // namespace

TEST_CASE("a copied sequence shares its source's cells instead of taking new ones") {
    KvCells cells(32, 4);
    fill(cells, 0, 10);
    cells.copy(0, 1, 0, -1);
    cells.copy(0, 2, 0, 6);
    CHECK(cells.used() == 10);
    CHECK(cells.max_pos(1) == 9);
    CHECK(cells.max_pos(2) == 5);
    CHECK(cells.min_pos(2) == 0);
    CHECK(cells.max_pos(3) == -1);
    std::vector<uint32_t> list;
    cells.cells_of(2, 0, 100, list);
    CHECK(list.size() == 6);
    // Removing the source keeps the cells the copies still use.
    cells.remove(0, 0, -1);
    CHECK(cells.used() == 10);
    cells.remove(1, 6, -1);
    CHECK(cells.used() == 6);
    cells.keep(2);
    CHECK(cells.used() == 6);
    CHECK(cells.max_pos(1) == -1);
    cells.clear();
    CHECK(cells.used() == 0);
    CHECK(cells.free() == 32);
}

TEST_CASE("find_free never offers a used cell and offers nothing when too few are free") {
    std::mt19937 rng(7);
    KvCells cells(64, 8);
    for (int round = 0; round < 200; ++round) {
        const auto want = static_cast<uint32_t>(rng() % 12 + 1);
        const auto free = cells.find_free(want);
        if (free.empty()) {
            CHECK(cells.free() < want);
            cells.remove_all(0, static_cast<int32_t>(rng() % 40));
            continue;
        }
        for (uint32_t c : free) REQUIRE(cells.is_free(c));
        const auto seq = static_cast<uint32_t>(rng() % 8);
        const int32_t next = cells.max_pos(seq) + 1;
        for (uint32_t i = 0; i < want; ++i)
            cells.occupy(free[i], next + static_cast<int32_t>(i), uint64_t{1} << seq);
        uint32_t used = 0;
        for (uint32_t c = 0; c < cells.size(); ++c) used += cells.is_free(c) ? 0 : 1;
        REQUIRE(used == cells.used());
    }
}

TEST_CASE("removing a middle range leaves the positions around it") {
    KvCells cells(16, 2);
    fill(cells, 1, 12);
    cells.remove(1, 4, 8);
    std::vector<uint32_t> list;
    cells.cells_of(1, 0, 100, list);
    REQUIRE(list.size() == 8);
    CHECK(cells.pos(list[3]) == 3);
    CHECK(cells.pos(list[4]) == 8);
    CHECK(cells.max_pos(1) == 11);
    const std::vector<uint32_t> taken{list[0], list[1]};
    cells.release(taken);
    CHECK(cells.min_pos(1) == 2);
}
