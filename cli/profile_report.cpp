#include "profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "format.h"

namespace ferrox::cli {
namespace {

double gb_per_s(uint64_t bytes, uint64_t ns) {
    return ns ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;  // bytes/ns = GB/s
}

}  // namespace

void OpProfile::add(const OpTiming& t) {
    auto row = std::find_if(rows.begin(), rows.end(), [&](const OpTiming& r) {
        return r.op == t.op && r.role == t.role && r.kind == t.kind;
    });
    if (row == rows.end()) row = rows.insert(rows.end(), OpTiming{t.op, t.role, t.kind, 0, 0, 0});
    row->calls += t.calls;
    row->nanoseconds += t.nanoseconds;
    row->bytes += t.bytes;
    std::stable_sort(rows.begin(), rows.end(), [](const OpTiming& a, const OpTiming& b) {
        return a.nanoseconds > b.nanoseconds;
    });
}

uint64_t OpProfile::total_nanoseconds() const {
    uint64_t total = 0;
    for (const OpTiming& t : rows) total += t.nanoseconds;
    return total;
}

Expected<OpProfile> parse_profile(std::string_view json) {
    try {
        const auto doc = nlohmann::json::parse(json);
        OpProfile p;
        p.launch_times = doc.at("launch_times").get<bool>();
        for (const auto& op : doc.at("ops"))
            p.rows.push_back({op.at("op").get<std::string>(), op.at("role").get<std::string>(),
                              op.at("kind").get<std::string>(), op.at("calls").get<uint64_t>(),
                              op.at("nanoseconds").get<uint64_t>(),
                              op.at("bytes").get<uint64_t>()});
        return p;
    } catch (const std::exception& e) {
        return make_error("the profile the engine returned does not read: {}", e.what());
    }
}

std::string render_profile(const OpProfile& profile, double wall_s, uint64_t steps) {
    const double per = steps ? 1.0 / static_cast<double>(steps) : 0.0;
    const double wall_ns = wall_s * 1e9;
    std::vector<std::vector<std::string>> rows{
        {"op", "role", "kind", "calls", "ms/step", "share", "GB/s"}};
    for (const OpTiming& t : profile.rows)
        rows.push_back(
            {t.op, t.role, t.kind, std::to_string(t.calls),
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

nlohmann::json profile_json(const OpProfile& profile, double wall_s, uint64_t steps) {
    nlohmann::json ops = nlohmann::json::array();
    for (const OpTiming& t : profile.rows)
        ops.push_back({{"op", t.op},
                       {"role", t.role},
                       {"kind", t.kind},
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
