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
    // The activations and the KV cache live in host memory in ABI 1.1, so
    // attention stays with a host backend on purpose; it is not a slow path
    // on this device.
    if (size >= offsetof(ferrox_kernel_info, by_design) + sizeof(out->by_design))
        out->by_design = op == FERROX_OP_ATTENTION
                             ? "attention runs on the host: ABI 1.1 keeps the KV cache there"
                             : nullptr;
}

}  // namespace ferrox::cuda
