#include "capability_table.h"

#include <cstddef>

namespace ferrox::cuda {

void describe_kernel(ferrox_op op, ferrox_kind kind, ferrox_kernel_info* out) {
    if (out == nullptr) return;
    // A caller built against an older ABI may hand a shorter struct: write
    // only the members it covers.
    const size_t size = out->struct_size;
    if (size >= offsetof(ferrox_kernel_info, abi_version) + sizeof(out->abi_version))
        out->abi_version = FERROX_ABI_VERSION;
    if (size >= offsetof(ferrox_kernel_info, kernel) + sizeof(out->kernel))
        out->kernel = find_kernel(op, kind);
    // Every op this backend lacks is a plain miss: since ABI 1.2 keeps the KV
    // cache resident, attention has kernels too. The one exception is the
    // delta rule (ABI 1.10), which runs on host memory between a download and
    // an upload: left to the next backend or the core's loop on purpose.
    if (size >= offsetof(ferrox_kernel_info, by_design) + sizeof(out->by_design))
        out->by_design = op == FERROX_OP_DELTA_NET ? kDeltaNetElsewhere : nullptr;
}

void describe_attention_kinds(ferrox_kind key_kind, ferrox_kind value_kind,
                              ferrox_kernel_info* out) {
    if (key_kind == value_kind) return describe_kernel(FERROX_OP_ATTENTION, key_kind, out);
    if (out == nullptr) return;
    const size_t size = out->struct_size;
    if (size >= offsetof(ferrox_kernel_info, abi_version) + sizeof(out->abi_version))
        out->abi_version = FERROX_ABI_VERSION;
    if (size >= offsetof(ferrox_kernel_info, kernel) + sizeof(out->kernel)) out->kernel = nullptr;
    if (size >= offsetof(ferrox_kernel_info, by_design) + sizeof(out->by_design))
        out->by_design = "the CUDA attention kernels read K and V of one kind";
}

}  // namespace ferrox::cuda
