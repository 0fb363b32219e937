#include "profile_report.h"

#include <fmt/format.h>

#include <vector>

#include "ferrox/quant_kind.h"
#include "format.h"

namespace ferrox::cli {
namespace {

double gb_per_s(uint64_t bytes, uint64_t ns) {
    return ns ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;  // bytes/ns = GB/s
}

}  // namespace

std::string render_profile(const model::StepProfile& profile, double wall_s, uint64_t steps) {
    const double per = steps ? 1.0 / static_cast<double>(steps) : 0.0;
    const double wall_ns = wall_s * 1e9;
    std::vector<std::vector<std::string>> rows{
        {"op", "role", "kind", "calls", "ms/step", "share", "GB/s"}};
    for (const model::StepTiming& t : profile.rows())
        rows.push_back(
            {t.op, t.role, std::string(kind_name(t.kind)), std::to_string(t.calls),
             fmt::format("{:.3f}", static_cast<double>(t.nanoseconds) * 1e-6 * per),
             fmt::format("{:.1f}%", 100.0 * static_cast<double>(t.nanoseconds) / wall_ns),
             t.bytes ? fmt::format("{:.1f}", gb_per_s(t.bytes, t.nanoseconds)) : ""});
    const double total = static_cast<double>(profile.total_nanoseconds());
    rows.push_back({"all ops", "", "", "", fmt::format("{:.3f}", total * 1e-6 * per),
                    fmt::format("{:.1f}%", 100.0 * total / wall_ns), ""});
    rows.push_back({"outside ops", "", "", "",
                    fmt::format("{:.3f}", (wall_ns - total) * 1e-6 * per),
                    fmt::format("{:.1f}%", 100.0 * (wall_ns - total) / wall_ns), ""});
    std::string out = render_table(rows);
    if (profile.launch_times)
        out += "(resident backend: times are host-side launch times, not device times)\n";
    return out;
}

nlohmann::json profile_json(const model::StepProfile& profile, double wall_s, uint64_t steps) {
    nlohmann::json ops = nlohmann::json::array();
    for (const model::StepTiming& t : profile.rows())
        ops.push_back({{"op", t.op},
                       {"role", t.role},
                       {"kind", kind_name(t.kind)},
                       {"calls", t.calls},
                       {"seconds", static_cast<double>(t.nanoseconds) * 1e-9},
                       {"bytes", t.bytes}});
    return {{"wall_seconds", wall_s},
            {"steps", steps},
            {"op_seconds", static_cast<double>(profile.total_nanoseconds()) * 1e-9},
            {"launch_times", profile.launch_times},
            {"ops", ops}};
}

}  // namespace ferrox::cli
