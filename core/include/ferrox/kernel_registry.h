// The kernel registry: every kernel lookup the dispatcher makes, recorded per
// (backend, op, tensor role, quant kind) as Hit, Miss{fallback} or
// ByDesign{reason} -- once when a model is built (probe) and again at dispatch.
// A Miss on an accelerator is a violation: a slow path nobody asked for, which
// otherwise shows up only as a mysteriously slow benchmark.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <source_location>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"

namespace ferrox {

enum class Outcome { Hit, Miss, ByDesign };
enum class Phase { Probe, Dispatch };

FERROX_API std::string_view outcome_name(Outcome outcome);  // "hit", "miss", "by-design"
FERROX_API std::string_view phase_name(Phase phase);        // "probe", "dispatch"

struct RegistryKey {
    std::string backend;
    ferrox_op op = FERROX_OP_MATVEC;
    std::string role;  // tensor role: "ffn_down", "attn_q", "moe_router", ...
    ferrox_kind kind = FERROX_KIND_F32;

    auto tie() const { return std::tie(backend, op, role, kind); }
    bool operator<(const RegistryKey& other) const { return tie() < other.tie(); }
    bool operator==(const RegistryKey& other) const { return tie() == other.tie(); }
};

struct RegistryEntry {
    RegistryKey key;
    Phase phase = Phase::Probe;
    Outcome outcome = Outcome::Hit;
    std::string detail;  // Hit: kernel name; Miss: the fallback that runs; ByDesign: why
    bool accelerator = false;
    std::string site;    // "file:line" of the first recording call
    uint64_t count = 0;  // how many times it was recorded

    bool is_violation() const { return outcome == Outcome::Miss && accelerator; }
    FERROX_API std::string to_string() const;
};

struct RegistryReport {
    std::vector<RegistryEntry> entries;     // everything, in key order
    std::vector<RegistryEntry> misses;      // every entry that is not a Hit
    std::vector<RegistryEntry> violations;  // Misses on an accelerator

    FERROX_API std::string render() const;             // one line per entry
    FERROX_API std::string render_violations() const;  // one line per violation
};

class FERROX_API KernelRegistry {
  public:
    void record(Phase phase, const RegistryKey& key, Outcome outcome, std::string_view detail,
                bool accelerator, std::source_location site = std::source_location::current());
    RegistryReport seal() const;
    void clear();

  private:
    using Slot = std::tuple<RegistryKey, Phase, Outcome, std::string>;
    mutable std::mutex mutex_;
    std::map<Slot, RegistryEntry> entries_;
};

}  // namespace ferrox

#include "ferrox/expected.h"

namespace ferrox {

// registry.strict: with `strict`, any violation is an error that lists them;
// without, violations are logged as warnings and the load goes on.
FERROX_API Expected<void> enforce_registry(const RegistryReport& report, bool strict);

}  // namespace ferrox
