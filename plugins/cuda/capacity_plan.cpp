#include "capacity_plan.h"

#include <fmt/format.h>

#include <array>

namespace ferrox::cuda {

std::string format_bytes(uint64_t bytes) {
    constexpr std::array<std::string_view, 5> kUnits{"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    double value = static_cast<double>(bytes) / 1024.0;
    size_t unit = 0;
    // Move up while the one-decimal text would read 1024.0 or more.
    while (unit + 1 < kUnits.size() && value >= 1023.95) {
        value /= 1024.0;
        ++unit;
    }
    return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::optional<std::string> refuse_placement(const PlacementRequest& request,
                                            const DeviceMemory& memory) {
    const std::string size = format_bytes(request.bytes);
    const std::string free_text = fmt::format("free {} of {}", format_bytes(memory.free_bytes),
                                              format_bytes(memory.total_bytes));
    // Written as subtractions so no sum can overflow 64 bits.
    const uint64_t budget = request.vram_budget;
    if (budget != 0 && (request.bytes > budget || request.resident_bytes > budget - request.bytes))
        return fmt::format("cuda: cannot place {} ({}): {} used + {} > vram_budget {} ({})",
                           request.what, size, format_bytes(request.resident_bytes), size,
                           format_bytes(budget), free_text);
    // Within the budget (or none set), the device must still have the room;
    // cudaMalloc would fail anyway, but without the numbers.
    if (request.bytes > memory.free_bytes)
        return fmt::format("cuda: cannot place {} ({}): {} > {} ({} used by this backend, {})",
                           request.what, size, size, free_text,
                           format_bytes(request.resident_bytes),
                           budget == 0 ? std::string("no vram_budget")
                                       : fmt::format("vram_budget {}", format_bytes(budget)));
    return std::nullopt;
}

}  // namespace ferrox::cuda
