#include "prefill_plan.h"

#include <algorithm>
#include <atomic>

namespace ferrox::server {

namespace {
std::atomic<bool> fault{false};
}  // namespace

void set_prefill_plan_fault(bool on) { fault = on; }

size_t prefill_call_end(size_t from, size_t size, const PrefillShape& shape) {
    const size_t chunk = shape.chunk, few = PrefillShape::kFewRows;
    const size_t start = from / chunk * chunk, end = std::min(size, start + chunk);
    if (from == start || fault) return end;
    const bool panel = end - start > few;  // the path this chunk's rows take from scratch
    // The rows before `from` were one prompt's last chunk of (from - start) rows.
    if ((from - start > few) != panel) return 0;
    if ((end - from > few) == panel) return end;
    // A panel chunk with too few rows left for that path: they go with the
    // next chunk, when that one is a panel call too and both fit one call.
    if (end == size) return 0;
    const size_t next = std::min(size, end + chunk);
    return next - end > few && next - from <= shape.most_rows ? next : 0;
}

}  // namespace ferrox::server
