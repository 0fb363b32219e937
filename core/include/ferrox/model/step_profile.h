// Where a forward pass spends its time: wall time per op and tensor role,
// summed over calls. A context given a StepProfile times every op its
// decoder issues (weight products, norms, RoPE, adds, the GLU, KV stores,
// attention), so the sum of the rows is the pass minus the decoder's own
// bookkeeping. Weight products also count the weight bytes they read, which
// makes a MATVEC row's GB/s comparable with `ferrox bench`'s and with the
// machine's read bandwidth.
//
// Host memory: each op has returned when its time is taken, so the figures
// are the ops' own. On a resident backend the ops are queued on the device,
// so the figures are host-side launch times (the rows say so).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"

namespace ferrox::model {

struct StepTiming {
    std::string op;                      // "matvec", "gemm", "attention", "rms_norm", "rope", ...
    std::string role;                    // tensor role ("ffn_down", "output"), or the op again
    ferrox_kind kind = FERROX_KIND_F32;  // weight kind; KV kind for attention
    uint64_t calls = 0;
    uint64_t nanoseconds = 0;
    uint64_t bytes = 0;  // weight bytes read (weight products only)
};

class FERROX_API StepProfile {
  public:
    void add(std::string_view op, std::string_view role, ferrox_kind kind, uint64_t nanoseconds,
             uint64_t bytes);
    // Rows by descending time.
    std::vector<StepTiming> rows() const;
    uint64_t total_nanoseconds() const;
    void clear() { rows_.clear(); }
    // Set by the steps that record into it: host times or launch times.
    bool launch_times = false;

  private:
    std::map<std::tuple<std::string, std::string, ferrox_kind>, StepTiming> rows_;
};

// Times the scope it lives in into one profile row (for ops outside the
// decoder, e.g. the CLI's sampling).
class ScopedStepTimer {
  public:
    ScopedStepTimer(StepProfile* profile, std::string_view op, std::string_view role,
                    ferrox_kind kind = FERROX_KIND_F32, uint64_t bytes = 0)
        : profile_(profile), op_(op), role_(role), kind_(kind), bytes_(bytes) {}
    ~ScopedStepTimer() {
        if (!profile_) return;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start_)
                            .count();
        profile_->add(op_, role_, kind_, static_cast<uint64_t>(ns), bytes_);
    }
    ScopedStepTimer(const ScopedStepTimer&) = delete;
    ScopedStepTimer& operator=(const ScopedStepTimer&) = delete;

  private:
    StepProfile* profile_;
    std::string_view op_, role_;
    ferrox_kind kind_;
    uint64_t bytes_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace ferrox::model
