// `--profile`: a StepProfile as a table for people and as JSON for scripts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/model/step_profile.h"

namespace ferrox::cli {

// One row per (op, role, kind) by descending time: calls, milliseconds per
// step, share of `wall_s`, and GB/s where the op reads weights or a cache.
// The last rows are the sum and what `wall_s` holds beyond it (the decoder's
// own bookkeeping, and for a decode phase the CLI's loop).
std::string render_profile(const model::StepProfile& profile, double wall_s, uint64_t steps);
nlohmann::json profile_json(const model::StepProfile& profile, double wall_s, uint64_t steps);

}  // namespace ferrox::cli
