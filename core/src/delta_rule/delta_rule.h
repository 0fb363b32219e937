// The gated delta rule of ferrox_delta_net_desc (backend_abi.h, ABI 1.10), one
// value head at a time. Shared by the core's host fallback and the CPU
// plugin's threaded entry, which must give the same bits: whichever runs it,
// a head's arithmetic is this one loop.
#pragma once

#include <cstdint>

#include "ferrox/backend_abi.h"

namespace ferrox::delta_rule {

// Why `desc` cannot be run (a null pointer, a zero or inconsistent size, a
// stride too short), or nullptr when it can.
const char* invalid(const ferrox_delta_net_desc& desc);

// Value head h (< n_v_heads) through every row of a valid descriptor: its
// state updated in place, its S outputs of each row written.
void run_head(const ferrox_delta_net_desc& desc, uint32_t h);

}  // namespace ferrox::delta_rule
