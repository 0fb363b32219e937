#include "bench_sizes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "ferrox/quant_kind.h"

namespace ferrox::cli {
namespace {

std::optional<uint64_t> parse_dim(std::string_view digits) {
    uint64_t v = 0;
    if (digits.empty() || digits.size() > 12) return std::nullopt;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return v;
}

uint64_t physical_memory() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

Expected<Shape> parse_shape(const std::string& text) {
    const size_t x = text.find('x');
    const auto rows =
        x == std::string::npos ? std::nullopt : parse_dim(std::string_view(text).substr(0, x));
    const auto cols =
        x == std::string::npos ? std::nullopt : parse_dim(std::string_view(text).substr(x + 1));
    if (!rows || !cols)
        return make_error("--shape '{}': expected ROWSxCOLS in decimal, e.g. 4096x4096", text);
    if (*rows == 0 || *cols == 0 || *rows > kMaxBenchDim || *cols > kMaxBenchDim)
        return make_error("--shape '{}': rows and columns must each be 1 to {}", text,
                          kMaxBenchDim);
    return Shape{*rows, *cols};
}

Expected<BenchFootprint> bench_footprint(ferrox_kind kind, const Shape& shape,
                                         const std::vector<uint64_t>& batches, bool hot,
                                         uint64_t rotate_mib, uint64_t memory_limit) {
    const uint64_t limit = memory_limit ? memory_limit : physical_memory();
    const auto per_row = row_bytes(kind, shape.cols);
    if (!per_row)
        return make_error("--shape {}x{}: {} needs a row length that is a multiple of {}",
                          shape.rows, shape.cols, kind_name(kind),
                          kind_traits(static_cast<uint32_t>(kind))->block_elements);
    if (rotate_mib > kMaxRotateMib)
        return make_error("--rotate-mib {} is more than {} (1 TiB)", rotate_mib, kMaxRotateMib);
    // rows, cols <= 2^24 and a row is at most 4 bytes per element (F32): every
    // product below stays under 2^50 and cannot overflow 64 bits.
    BenchFootprint f;
    f.weight_bytes = shape.rows * *per_row;
    const uint64_t rotate_bytes = rotate_mib << 20;
    f.copies = hot ? 1 : std::max<uint64_t>(1, rotate_bytes / f.weight_bytes + 1);
    uint64_t largest_batch = 0;
    for (uint64_t n : batches) {
        if (n == 0 || n > (uint64_t{1} << 20))
            return make_error("--batch {}: each batch size must be 1 to {}", n, uint64_t{1} << 20);
        largest_batch = std::max(largest_batch, n);
    }
    // n <= 2^20 and cols, rows <= 2^24: (cols + rows) * n * 4 < 2^47.
    const uint64_t activations = (shape.cols + shape.rows) * largest_batch * sizeof(float);
    const uint64_t probe = std::max<uint64_t>(rotate_mib, 1024) << 20;  // measure_read_bandwidth
    // copies <= 2^40 / weight_bytes + 1, so copies * weight_bytes <= 2^40 + weight_bytes.
    f.total_bytes = f.copies * f.weight_bytes + f.weight_bytes + activations;
    const uint64_t peak = std::max(f.total_bytes, probe);
    if (limit && peak > limit)
        return make_error(
            "--shape, --batch, --rotate-mib: {} {}x{}: {} weight copies x {} bytes + {} bytes of "
            "activations (batch {}) = {:.1f} GiB, or the {:.1f} GiB bandwidth probe, exceeds "
            "this machine's {:.1f} GiB of memory",
            kind_name(kind), shape.rows, shape.cols, f.copies, f.weight_bytes, activations,
            largest_batch, static_cast<double>(f.total_bytes) / kGiB,
            static_cast<double>(probe) / kGiB, static_cast<double>(limit) / kGiB);
    return f;
}

}  // namespace ferrox::cli
