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
    const auto bytes = [&](uint64_t cell, uint32_t head_dim, uint32_t block_bytes,
                           uint32_t block_elements) {
        if (!cell) cell = uint64_t{in.n_layer} * in.n_head_kv * head_dim;
        return cell * in.context * block_bytes / std::max<uint32_t>(block_elements, 1);
    };
    return bytes(in.cell_elements_k, in.head_dim_k, in.k_block_bytes, in.k_block_elements) +
           bytes(in.cell_elements_v, in.head_dim_v, in.v_block_bytes, in.v_block_elements);
}

CapacityInputs kv_capacity_inputs(const Hparams& hp, KvKinds kinds, uint32_t cells) {
    CapacityInputs in;
    in.n_layer = hp.kv_cache_layers();  // recurrent and shared layers hold no K/V
    in.context = cells;
    in.n_head_kv = hp.n_head_kv;
    in.head_dim_k = hp.head_dim_k;
    in.head_dim_v = hp.head_dim_v;
    in.cell_elements_k = hp.kv_cell_elements_k();
    in.cell_elements_v = hp.kv_cell_elements_v();
    const KindTraits* k = kind_traits(kinds.key);
    const KindTraits* v = kind_traits(kinds.value);
    in.k_block_bytes = k->block_bytes;
    in.k_block_elements = k->block_elements;
    in.v_block_bytes = v->block_bytes;
    in.v_block_elements = v->block_elements;
    return in;
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
            "{} does not fit: {}KV cache {} B ({} layers x {} positions x {} kv heads x ({} dims "
            "x {} B / {} + {} dims x {} B / {})) + scratch {} B{} = {} B, but only {} B are "
            "available ({}); lower the context (-c){}",
            in.subject, p.weight_bytes ? fmt::format("weights {} B + ", p.weight_bytes) : "",
            p.kv_bytes, in.n_layer, in.context, in.n_head_kv, in.head_dim_k, in.k_block_bytes,
            in.k_block_elements, in.head_dim_v, in.v_block_bytes, in.v_block_elements,
            p.scratch_bytes,
            p.state_bytes ? fmt::format(" + recurrent states {} B", p.state_bytes) : "",
            p.total_bytes, p.available_bytes, in.available_what,
            p.kv_bytes > 0 && in.k_block_bytes == 4 && in.k_block_elements == 1 &&
                    in.v_block_bytes == 4 && in.v_block_elements == 1
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
