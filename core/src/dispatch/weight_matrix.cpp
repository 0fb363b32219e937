#include "ferrox/weight_matrix.h"

#include <mutex>

#include "ferrox/quant_kind.h"

namespace ferrox {

Expected<WeightMatrix> WeightMatrix::make(std::string name, ferrox_kind kind, uint64_t rows,
                                          uint64_t cols, std::span<const std::byte> bytes) {
    const KindTraits* traits = kind_traits(static_cast<uint32_t>(kind));
    if (!traits) return make_error("{}: unknown quant kind id {}", name, static_cast<int>(kind));
    if (rows == 0 || cols == 0) return make_error("{}: empty shape {}x{}", name, rows, cols);
    const auto per_row = ferrox::row_bytes(kind, cols);
    if (!per_row)
        return make_error("{}: row length {} is not a multiple of {}'s block of {} weights", name,
                          cols, traits->name, traits->block_elements);
    if (rows > UINT64_MAX / *per_row)
        return make_error("{}: {} rows of {} bytes overflow", name, rows, *per_row);
    if (bytes.size() != rows * *per_row)
        return make_error("{}: {} {}x{} needs {} bytes, got {}", name, traits->name, rows, cols,
                          rows * *per_row, bytes.size());
    WeightMatrix m;
    m.name_ = std::move(name);
    m.kind_ = kind;
    m.rows_ = rows;
    m.cols_ = cols;
    m.row_bytes_ = *per_row;
    m.bytes_ = bytes;
    return m;
}

Expected<WeightMatrix> WeightMatrix::borrowed(std::string name, ferrox_kind kind, uint64_t rows,
                                              uint64_t cols, std::span<const std::byte> bytes,
                                              std::shared_ptr<const void> owner) {
    auto m = make(std::move(name), kind, rows, cols, bytes);
    if (!m) return m;
    m->owner_ = std::move(owner);
    m->borrowed_ = true;
    return m;
}

Expected<WeightMatrix> WeightMatrix::owned(std::string name, ferrox_kind kind, uint64_t rows,
                                           uint64_t cols, std::vector<std::byte> bytes) {
    auto storage = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
    auto m = make(std::move(name), kind, rows, cols, std::span(*storage));
    if (!m) return m;
    m->owner_ = std::move(storage);
    return m;
}

WeightMatrix::WeightMatrix(WeightMatrix&& other) noexcept { *this = std::move(other); }

WeightMatrix& WeightMatrix::operator=(WeightMatrix&& other) noexcept {
    if (this == &other) return *this;
    release_all();
    name_ = std::move(other.name_);
    kind_ = other.kind_;
    rows_ = other.rows_;
    cols_ = other.cols_;
    row_bytes_ = other.row_bytes_;
    bytes_ = other.bytes_;
    owner_ = std::move(other.owner_);
    borrowed_ = other.borrowed_;
    prepared_ = std::move(other.prepared_);
    other.prepared_.clear();
    return *this;
}

WeightMatrix::~WeightMatrix() { release_all(); }

void WeightMatrix::release_all() {
    for (auto& p : prepared_) p.backend->release_weight(p.handle);
    prepared_.clear();
}

Expected<const ferrox_weight*> WeightMatrix::prepared_on(
    const std::shared_ptr<Backend>& backend) const {
    // Handles are made on first use, which may be two contexts' first decode
    // on two threads at once over one shared model: one lock for every matrix
    // (uncontended after the first products, a few tens of ns per call).
    static std::mutex mutex;
    const std::lock_guard lock(mutex);
    for (const auto& p : prepared_)
        if (p.backend == backend) return static_cast<const ferrox_weight*>(p.handle);
    ferrox_weight_desc desc{};
    desc.struct_size = sizeof desc;
    desc.abi_version = FERROX_ABI_VERSION;
    desc.kind = kind_;
    desc.rows = rows_;
    desc.cols = cols_;
    desc.row_bytes = row_bytes_;
    desc.data = bytes_.data();
    // Both borrowed and owned bytes outlive every handle: release_all() runs
    // before owner_ is dropped.
    auto handle = backend->prepare_weight(desc, /*borrow=*/true);
    if (!handle) return make_error("{}: {}", name_, handle.error().message());
    prepared_.push_back({backend, *handle});
    return static_cast<const ferrox_weight*>(*handle);
}

}  // namespace ferrox
