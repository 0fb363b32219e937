// The plugin's two exported entries and the C trampolines of its backend
// table. Nothing throws across this boundary: every entry catches everything
// and turns it into a ferrox_status and a message.
#include <fmt/format.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <utility>

#include "capability_table.h"
#include "capacity_plan.h"
#include "cuda_backend.h"
#include "device_probe.h"
#include "ferrox/backend_abi.h"
#include "ferrox/c_boundary.h"
#include "ferrox/plugin_note.h"
#include "host_log.h"
#include "options.h"
#include "status.h"

namespace ferrox::cuda {
namespace {

CudaBackend& backend_of(const ferrox_backend* backend) {
    return *static_cast<CudaBackend*>(backend->self);
}

// Runs `body` (returning Status) and converts the outcome, and any exception
// (ferrox/c_boundary.h), into a status code plus the caller's message.
template <class Body>
ferrox_status guarded(ferrox_message* error, Body&& body) noexcept {
    return ferrox::guarded("cuda", error, [&] {
        Status status = body();
        if (!status.is_ok()) write_message(error, status.message);
        return status.code;
    });
}

// For entries that return nothing: an exception is logged and swallowed.
template <class Body>
void guarded_void(const ferrox_backend* backend, const char* entry, Body&& body) noexcept {
    catch_all(body, [&](const Escaped&) {
        catch_all(
            [&] {
                if (backend != nullptr && backend->self != nullptr)
                    backend_of(backend).log().error(fmt::format("cuda: {} failed", entry));
            },
            [](const Escaped&) {});
    });
}

Status null_backend() { return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: null backend"); }

void destroy(ferrox_backend* backend) {
    guarded_void(nullptr, "destroy", [&] {
        if (backend != nullptr) std::unique_ptr<CudaBackend>(&backend_of(backend)).reset();
    });
}

uint32_t device_count(const ferrox_backend* backend) {
    return backend != nullptr ? backend_of(backend).device_count() : 0;
}

ferrox_status device_info(const ferrox_backend* backend, uint32_t device, ferrox_device_info* out,
                          ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).device_info(device, out) : null_backend();
    });
}

void kernel_for(const ferrox_backend* backend, ferrox_op op, ferrox_kind kind,
                ferrox_kernel_info* out) {
    guarded_void(backend, "kernel_for", [&] { describe_kernel(op, kind, out); });
}

void attention_kinds(const ferrox_backend* backend, ferrox_kind key_kind, ferrox_kind value_kind,
                     ferrox_kernel_info* out) {
    guarded_void(backend, "attention_kinds",
                 [&] { describe_attention_kinds(key_kind, value_kind, out); });
}

ferrox_status buffer_alloc(ferrox_backend* backend, uint64_t bytes, ferrox_buffer** out,
                           ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).buffer_alloc(bytes, out) : null_backend();
    });
}

void buffer_free(ferrox_backend* backend, ferrox_buffer* buffer) {
    guarded_void(backend, "buffer_free", [&] {
        if (backend != nullptr) backend_of(backend).buffer_free(buffer);
    });
}

ferrox_status buffer_upload(ferrox_backend* backend, ferrox_buffer* buffer, uint64_t offset,
                            const void* src, uint64_t bytes, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).buffer_upload(buffer, offset, src, bytes)
                       : null_backend();
    });
}

ferrox_status buffer_download(ferrox_backend* backend, const ferrox_buffer* buffer, uint64_t offset,
                              void* dst, uint64_t bytes, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).buffer_download(buffer, offset, dst, bytes)
                       : null_backend();
    });
}

ferrox_status buffer_wrap_host(ferrox_backend* backend, void* host, uint64_t bytes,
                               ferrox_buffer** out, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).buffer_wrap_host(host, bytes, out) : null_backend();
    });
}

ferrox_status weight_prepare(ferrox_backend* backend, const ferrox_weight_desc* desc,
                             int /*borrow: we always keep a device copy*/, ferrox_weight** out,
                             ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).weight_prepare(desc, out) : null_backend();
    });
}

void weight_release(ferrox_backend* backend, ferrox_weight* weight) {
    guarded_void(backend, "weight_release", [&] {
        if (backend != nullptr) backend_of(backend).weight_release(weight);
    });
}

ferrox_status matvec(ferrox_backend* backend, const ferrox_weight* weight, const float* x, float* y,
                     ferrox_message* error) {
    return guarded(
        error, [&] { return backend ? backend_of(backend).matvec(weight, x, y) : null_backend(); });
}

ferrox_status gemm(ferrox_backend* backend, const ferrox_weight* weight, const float* x, uint64_t n,
                   float* y, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).gemm(weight, x, n, y) : null_backend();
    });
}

// ABI 1.2 resident decoding.
ferrox_status project(ferrox_backend* backend, const ferrox_weight* weight, ferrox_tensor x,
                      uint64_t n, ferrox_tensor y, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).project(weight, x, n, y) : null_backend();
    });
}

ferrox_status rms_norm(ferrox_backend* backend, ferrox_tensor x, ferrox_tensor gamma, uint64_t rows,
                       uint32_t dim, float eps, ferrox_tensor y, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).rms_norm(x, gamma, rows, dim, eps, y) : null_backend();
    });
}

ferrox_status add_rms_norm(ferrox_backend* backend, ferrox_tensor dst, ferrox_tensor src,
                           uint64_t src_stride, float alpha, ferrox_tensor gamma, uint64_t rows,
                           uint32_t dim, float eps, ferrox_tensor y, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).add_rms_norm(dst, src, src_stride, alpha, gamma, rows,
                                                          dim, eps, y)
                       : null_backend();
    });
}

ferrox_status rope(ferrox_backend* backend, ferrox_tensor x, ferrox_tensor cos, ferrox_tensor sin,
                   uint32_t n_pos, uint32_t n_heads, uint32_t head_dim, uint32_t neox,
                   ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).rope(x, cos, sin, n_pos, n_heads, head_dim, neox)
                       : null_backend();
    });
}

ferrox_status add(ferrox_backend* backend, ferrox_tensor dst, ferrox_tensor src, uint64_t rows,
                  uint32_t dim, uint64_t src_stride, float alpha, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).add(dst, src, rows, dim, src_stride, alpha)
                       : null_backend();
    });
}

ferrox_status glu(ferrox_backend* backend, ferrox_glu_kind kind, ferrox_tensor gate,
                  ferrox_tensor up, uint64_t count, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).glu(kind, gate, up, count) : null_backend();
    });
}

ferrox_status convert(ferrox_backend* backend, ferrox_tensor src, ferrox_tensor dst,
                      ferrox_kind dst_kind, uint64_t count, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).convert(src, dst, dst_kind, count) : null_backend();
    });
}

ferrox_status get_rows(ferrox_backend* backend, const ferrox_weight* weight, const int32_t* ids,
                       uint64_t n, float scale, ferrox_tensor out, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).get_rows(weight, ids, n, scale, out) : null_backend();
    });
}

ferrox_status attention_resident(ferrox_backend* backend, const ferrox_attention_desc* desc,
                                 ferrox_tensor q, ferrox_tensor keys, ferrox_tensor values,
                                 ferrox_tensor out, ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).attention_resident(desc, q, keys, values, out)
                       : null_backend();
    });
}

ferrox_status attention_cells(ferrox_backend* backend, const ferrox_attention_cells_desc* desc,
                              ferrox_tensor q, ferrox_tensor keys, ferrox_tensor values,
                              ferrox_tensor cell_index, ferrox_tensor spans, ferrox_tensor out,
                              ferrox_message* error) {
    return guarded(error, [&] {
        return backend ? backend_of(backend).attention_cells(desc, q, keys, values, cell_index,
                                                             spans, out)
                       : null_backend();
    });
}

void fill_table(CudaBackend& backend) {
    ferrox_backend& table = backend.table();
    table.struct_size = sizeof(ferrox_backend);
    table.abi_version = FERROX_ABI_VERSION;
    table.self = &backend;
    table.destroy = destroy;
    table.device_count = device_count;
    table.device_info = device_info;
    table.kernel_for = kernel_for;
    table.gemm_fallback = kGemmFallback;
    table.matvec_fallback = nullptr;  // a kind without a kernel goes to the next backend
    table.buffer_alloc = buffer_alloc;
    table.buffer_free = buffer_free;
    table.buffer_upload = buffer_upload;
    table.buffer_download = buffer_download;
    table.buffer_wrap_host = buffer_wrap_host;
    table.weight_prepare = weight_prepare;
    table.weight_release = weight_release;
    table.matvec = matvec;
    table.gemm = gemm;
    // 1.1's host-memory attention stays NULL: the cache would cross PCIe on
    // every call, so the core keeps that path on a host backend; with 1.2 the
    // cache is resident and attention_resident runs the ATTENTION kernels.
    table.attention = nullptr;
    table.project = project;
    table.rms_norm = rms_norm;
    table.add_rms_norm = add_rms_norm;
    table.rope = rope;
    table.add = add;
    table.glu = glu;
    table.convert = convert;
    table.get_rows = get_rows;
    table.attention_resident = attention_resident;
    table.attention_cells = attention_cells;
    table.attention_kinds = attention_kinds;
}

Status create_backend(const ferrox_host* host, std::span<const ferrox_option> options,
                      ferrox_backend** out) {
    if (out == nullptr)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: create: null output");
    *out = nullptr;
    if (host != nullptr && FERROX_ABI_MAJOR(host->abi_version) != FERROX_ABI_VERSION_MAJOR)
        return Status::fail(
            FERROX_ERR_INVALID_ARGUMENT,
            fmt::format("cuda: host ABI {}.{} does not match the plugin's {}.{}",
                        FERROX_ABI_MAJOR(host->abi_version), FERROX_ABI_MINOR(host->abi_version),
                        FERROX_ABI_VERSION_MAJOR, FERROX_ABI_VERSION_MINOR));
    const HostLog log(host);
    auto parsed = parse_options(options);
    if (!parsed) return Status::fail(FERROX_ERR_INVALID_ARGUMENT, parsed.error().message());
    for (const std::string& key : parsed->unknown_keys)
        log.warn(fmt::format("cuda: ignoring unknown option '{}'", key));

    ProbeOutcome probe = probe_device(parsed->device);
    if (probe.status != FERROX_OK) return Status::fail(probe.status, std::move(probe.reason));

    std::unique_ptr<CudaBackend> backend;
    if (Status created = CudaBackend::create(log, *parsed, probe.device, backend); !created.is_ok())
        return created;
    fill_table(*backend);
    const DeviceDescription& device = probe.device;
    log.info(fmt::format("cuda: device {} {} (sm_{}{}, {} SMs, {} MiB){}", device.ordinal,
                         device.name, device.compute_major, device.compute_minor,
                         backend->sm_count(), device.memory_total >> 20,
                         parsed->vram_budget.value_or(0) != 0
                             ? fmt::format(", vram_budget {}", format_bytes(*parsed->vram_budget))
                             : std::string()));
    *out = &backend.release()->table();  // owned by the core until destroy
    return Status::ok();
}

// Writes `value` into `member` only when the caller's struct is big enough.
template <class Member>
void set_if_covered(ferrox_plugin_info* info, Member ferrox_plugin_info::*member, size_t offset,
                    Member value) {
    if (info->struct_size >= offset + sizeof(Member)) info->*member = value;
}

}  // namespace
}  // namespace ferrox::cuda

#define FERROX_CUDA_DESCRIPTION                          \
    "NVIDIA GPUs through CUDA " FERROX_CUDA_RUNTIME_TEXT \
    " (static runtime; driver >= 580), "                 \
    "kernels for sm " FERROX_CUDA_ARCHS_TEXT

// Read by the core from the file before it is loaded (ferrox/plugin_note.h).
FERROX_PLUGIN_NOTE("cuda", FERROX_CUDA_PLUGIN_VERSION, "", "libcuda.so.1", FERROX_CUDA_DESCRIPTION);

extern "C" {

FERROX_PLUGIN_EXPORT ferrox_status ferrox_plugin_describe(ferrox_plugin_info* info) {
    using ferrox::cuda::set_if_covered;
    // Pure: constants only, no CUDA call, so describing never opens libcuda.
    if (info == nullptr) return FERROX_ERR_INVALID_ARGUMENT;
    set_if_covered(info, &ferrox_plugin_info::abi_version,
                   offsetof(ferrox_plugin_info, abi_version), FERROX_ABI_VERSION);
    set_if_covered<const char*>(info, &ferrox_plugin_info::name, offsetof(ferrox_plugin_info, name),
                                "cuda");
    set_if_covered<const char*>(info, &ferrox_plugin_info::version,
                                offsetof(ferrox_plugin_info, version), FERROX_CUDA_PLUGIN_VERSION);
    set_if_covered<const char*>(info, &ferrox_plugin_info::isa_required,
                                offsetof(ferrox_plugin_info, isa_required), "");
    set_if_covered<const char*>(info, &ferrox_plugin_info::driver_libraries,
                                offsetof(ferrox_plugin_info, driver_libraries), "libcuda.so.1");
    set_if_covered<const char*>(info, &ferrox_plugin_info::description,
                                offsetof(ferrox_plugin_info, description), FERROX_CUDA_DESCRIPTION);
    // since 1.6: the options create() takes, checked by the core before create().
    const auto declared = ferrox::cuda::declared_options();
    if (info->struct_size >= sizeof(ferrox_plugin_info)) {
        info->option_spec_size = sizeof(ferrox_option_spec);
        info->n_options = static_cast<uint32_t>(declared.size());
        info->options = declared.data();
    }
    return FERROX_OK;
}

FERROX_PLUGIN_EXPORT ferrox_status ferrox_plugin_create(const ferrox_host* host,
                                                        const ferrox_option* options,
                                                        size_t n_options, ferrox_backend** out,
                                                        ferrox_message* error) {
    return ferrox::cuda::guarded(error, [&] {
        if (options == nullptr && n_options != 0)
            return ferrox::cuda::Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                                              "cuda: create: null options with a non-zero count");
        return ferrox::cuda::create_backend(
            host, std::span<const ferrox_option>(options, options ? n_options : 0), out);
    });
}

}  // extern "C"
