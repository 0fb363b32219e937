// A weight matrix over quantized bytes that are either borrowed (an mmap'd
// GGUF tensor, kept alive by `owner`) or owned. Never expanded to f32 at load.
// Validated on construction, so no kernel ever sees a ragged or short tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend.h"
#include "ferrox/expected.h"

namespace ferrox {

class FERROX_API WeightMatrix {
  public:
    // `name` appears in errors ("blk.0.ffn_down.weight").
    static Expected<WeightMatrix> borrowed(std::string name, ferrox_kind kind, uint64_t rows,
                                           uint64_t cols, std::span<const std::byte> bytes,
                                           std::shared_ptr<const void> owner);
    static Expected<WeightMatrix> owned(std::string name, ferrox_kind kind, uint64_t rows,
                                        uint64_t cols, std::vector<std::byte> bytes);

    WeightMatrix(WeightMatrix&&) noexcept;
    WeightMatrix& operator=(WeightMatrix&&) noexcept;
    ~WeightMatrix();

    const std::string& name() const { return name_; }
    ferrox_kind kind() const { return kind_; }
    uint64_t rows() const { return rows_; }
    uint64_t cols() const { return cols_; }
    uint64_t row_bytes() const { return row_bytes_; }
    std::span<const std::byte> bytes() const { return bytes_; }
    bool is_borrowed() const { return borrowed_; }

    // The handle `backend` prepared for this matrix, preparing it on first use.
    // Held here, with the matrix, rather than in a cache keyed on an address:
    // an address outlives the mapping that gave it out (the seeds' MapId bug).
    Expected<const ferrox_weight*> prepared_on(const std::shared_ptr<Backend>& backend) const;

  private:
    WeightMatrix() = default;
    static Expected<WeightMatrix> make(std::string name, ferrox_kind kind, uint64_t rows,
                                       uint64_t cols, std::span<const std::byte> bytes);
    void release_all();

    struct Prepared {
        std::shared_ptr<Backend> backend;
        ferrox_weight* handle = nullptr;
    };

    std::string name_;
    ferrox_kind kind_ = FERROX_KIND_F32;
    uint64_t rows_ = 0, cols_ = 0, row_bytes_ = 0;
    std::span<const std::byte> bytes_;
    std::shared_ptr<const void> owner_;  // mapping or owned vector
    bool borrowed_ = false;
    mutable std::vector<Prepared> prepared_;
};

}  // namespace ferrox
