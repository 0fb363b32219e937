// `--profile`: a per-op profile as a table for people and as JSON for scripts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::cli {

// Wall time per (op, tensor role, kind), summed over calls: the rows of
// ferrox_context_profile's document, plus what the CLI times itself.
struct OpTiming {
    std::string op, role, kind;
    uint64_t calls = 0, nanoseconds = 0, bytes = 0;
};

struct OpProfile {
    std::vector<OpTiming> rows;  // by descending time
    bool launch_times = false;   // resident: host-side launch times

    // Adds `t`'s calls, time and bytes to its (op, role, kind) row (a new
    // row when there is none), keeping the order.
    void add(const OpTiming& t);
    uint64_t total_nanoseconds() const;
};

// ferrox_context_profile's JSON document (docs/api.md) as rows.
Expected<OpProfile> parse_profile(std::string_view json);

// One row per (op, role, kind) by descending time: calls, milliseconds per
// step, share of `wall_s`, and GB/s where the op reads weights or a cache.
// The last rows are the sum and what `wall_s` holds beyond it (the decoder's
// own bookkeeping, and for a decode phase the CLI's loop).
std::string render_profile(const OpProfile& profile, double wall_s, uint64_t steps);
nlohmann::json profile_json(const OpProfile& profile, double wall_s, uint64_t steps);

}  // namespace ferrox::cli
