#include "ferrox/model/capacity.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ferrox::model {
namespace {
std::string mib(uint64_t bytes) {
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}
}  // namespace

std::string CapacityPlan::summary() const {
    return fmt::format("weights {} + KV cache {} + scratch {}{} = {} of {} available",
                       mib(weight_bytes), mib(kv_bytes), mib(scratch_bytes),
                       state_bytes ? " + recurrent states " + mib(state_bytes) : "",
                       mib(total_bytes), mib(available_bytes));
}

uint64_t kv_cache_bytes(const CapacityInputs& in) {
    const uint64_t cell = in.cell_elements ? in.cell_elements
                                           : uint64_t{in.n_layer} * in.n_head_kv *
                                                 (uint64_t{in.head_dim_k} + in.head_dim_v);
    return cell * in.context * in.kv_block_bytes / std::max<uint32_t>(in.kv_block_elements, 1);
}

Expected<CapacityPlan> plan_capacity(const CapacityInputs& in) {
    CapacityPlan p;
    p.weight_bytes = in.weight_bytes;
    p.kv_bytes = kv_cache_bytes(in);
    p.scratch_bytes = in.scratch_bytes;
    p.state_bytes = in.state_bytes;
    p.total_bytes = p.weight_bytes + p.kv_bytes + p.scratch_bytes + p.state_bytes;
    p.available_bytes = in.available_bytes;
    if (p.total_bytes > p.available_bytes)
        return make_error(
            "{} does not fit: {}KV cache {} B ({} layers x {} positions x {} kv heads x ({} + {}) "
            "dims x {} B / {}) + scratch {} B{} = {} B, but only {} B are available ({}); lower "
            "the "
            "context (-c){}",
            in.subject, p.weight_bytes ? fmt::format("weights {} B + ", p.weight_bytes) : "",
            p.kv_bytes, in.n_layer, in.context, in.n_head_kv, in.head_dim_k, in.head_dim_v,
            in.kv_block_bytes, in.kv_block_elements, p.scratch_bytes,
            p.state_bytes ? fmt::format(" + recurrent states {} B", p.state_bytes) : "",
            p.total_bytes, p.available_bytes, in.available_what,
            in.kv_block_bytes == 4 && in.kv_block_elements == 1
                ? " or use an f16 or q8_0 KV cache (--kv-type f16|q8_0)"
                : "");
    return p;
}

std::optional<uint64_t> mem_available_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        std::istringstream fields(line.substr(13));
        uint64_t kib = 0;
        if (fields >> kib) return kib * 1024;
    }
    return std::nullopt;
}

}  // namespace ferrox::model
