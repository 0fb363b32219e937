#include "cuda_backend.h"

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "capability_table.h"
#include "capacity_plan.h"
#include "ferrox/quant_kind.h"

namespace ferrox::cuda {
namespace {

// a * b, or nullopt when it would not fit in 64 bits.
std::optional<uint64_t> checked_product(uint64_t a, uint64_t b) {
    if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::nullopt;
    return a * b;
}

bool in_bounds(uint64_t offset, uint64_t bytes, uint64_t size) {
    return offset <= size && bytes <= size - offset;
}

Status invalid(std::string message) {
    return Status::fail(FERROX_ERR_INVALID_ARGUMENT, std::move(message));
}

// A descriptor's soft cap (ABI 1.4): 0 from one that ends before the field
// (an older core); refused unless finite and >= 0.
template <class Desc>
Status read_softcap(std::string_view entry, const Desc& d, float& softcap) {
    softcap = d.struct_size >= offsetof(Desc, softcap) + sizeof d.softcap ? d.softcap : 0.0f;
    if (!(softcap >= 0.0f) || !std::isfinite(softcap))
        return invalid(
            fmt::format("cuda: {}: softcap {} is not a finite value >= 0", entry, softcap));
    return Status::ok();
}

// The device address of `tensor` after checking that `count` elements of
// `element_bytes` starting at its offset lie inside its buffer and that the
// offset is aligned for the element (a misaligned float load faults).
Status resolve(std::string_view entry, std::string_view name, ferrox_tensor tensor, uint64_t count,
               uint64_t element_bytes, void*& out) {
    if (tensor.buffer == nullptr)
        return invalid(fmt::format("cuda: {}: tensor '{}' has no buffer", entry, name));
    const ferrox_buffer& buffer = *tensor.buffer;
    const auto bytes = checked_product(count, element_bytes);
    if (!bytes)
        return invalid(
            fmt::format("cuda: {}: tensor '{}' of {} elements overflows", entry, name, count));
    if (!in_bounds(tensor.offset, *bytes, buffer.bytes))
        return invalid(
            fmt::format("cuda: {}: tensor '{}' needs bytes [{}, {}+{}) but its buffer "
                        "holds {} bytes",
                        entry, name, tensor.offset, tensor.offset, *bytes, buffer.bytes));
    // The address, not just the offset: a wrapped host buffer
    // (buffer_wrap_host) may start at any byte, unlike cudaMalloc's 256.
    char* const address = static_cast<char*>(buffer.device) + tensor.offset;
    if (reinterpret_cast<uintptr_t>(address) % element_bytes != 0)
        return invalid(
            fmt::format("cuda: {}: tensor '{}' at byte offset {} is not aligned to its "
                        "{}-byte elements",
                        entry, name, tensor.offset, element_bytes));
    out = address;
    return Status::ok();
}

template <class T>
Status resolve_as(std::string_view entry, std::string_view name, ferrox_tensor tensor,
                  uint64_t count, T*& out) {
    void* address = nullptr;
    if (Status status = resolve(entry, name, tensor, count, sizeof(T), address); !status.is_ok())
        return status;
    out = static_cast<T*>(address);
    return Status::ok();
}

// n * m, or an INVALID_ARGUMENT naming the entry when it overflows.
Status product(std::string_view entry, uint64_t n, uint64_t m, uint64_t& out) {
    const auto value = checked_product(n, m);
    if (!value) return invalid(fmt::format("cuda: {}: {} x {} elements overflow", entry, n, m));
    out = *value;
    return Status::ok();
}

Status launched(cudaError_t error, std::string_view what) {
    return error == cudaSuccess ? Status::ok()
                                : cuda_failure(error, fmt::format("launching {}", what));
}

}  // namespace

CudaBackend::CudaBackend(ConstructionKey, const HostLog& log, const CudaOptions& options,
                         const DeviceDescription& device)
    : log_(log), device_(device), budget_(options.vram_budget.value_or(0)) {}

CudaBackend::~CudaBackend() {
    // Owners free in reverse order; make the device current so they free on
    // it, after the kernels still queued on the stream that use them.
    static_cast<void>(cudaSetDevice(device_.ordinal));
    drain();
}

void CudaBackend::drain() const {
    // Before a cudaFree/cudaHostUnregister of memory that kernels queued on
    // the stream may still use: not relying on cudaFree's implicit device
    // synchronisation. A failure is sticky and reappears at the next entry.
    if (stream_) static_cast<void>(cudaStreamSynchronize(stream_.get()));
}

Status CudaBackend::create(const HostLog& log, const CudaOptions& options,
                           const DeviceDescription& device, std::unique_ptr<CudaBackend>& out) {
    auto backend = std::make_unique<CudaBackend>(ConstructionKey{}, log, options, device);
    if (Status current = backend->make_current(); !current.is_ok()) return current;
    cudaStream_t stream = nullptr;
    // Non-blocking: the legacy default stream would serialise us with every
    // other library in the process that uses the device.
    if (const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        error != cudaSuccess)
        return cuda_failure(error, "creating a stream");
    backend->stream_.reset(stream);
    int sm_count = 0;
    if (const cudaError_t error =
            cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device.ordinal);
        error != cudaSuccess)
        return cuda_failure(error, "querying the multiprocessor count");
    backend->sm_count_ = sm_count > 0 ? static_cast<uint32_t>(sm_count) : 1;
    out = std::move(backend);
    return Status::ok();
}

Status CudaBackend::make_current() const {
    // The calling thread may have another device current (another backend).
    if (const cudaError_t error = cudaSetDevice(device_.ordinal); error != cudaSuccess)
        return cuda_failure(error, fmt::format("selecting device {}", device_.ordinal));
    return Status::ok();
}

Status CudaBackend::device_info(uint32_t device, ferrox_device_info* out) const {
    if (out == nullptr)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: device_info: null output");
    if (device >= device_count())
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            fmt::format("cuda: device_info: device {} out of range (this backend "
                                        "drives one device)",
                                        device));
    if (Status current = make_current(); !current.is_ok()) return current;
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes); error != cudaSuccess)
        return cuda_failure(error, "cudaMemGetInfo");

    // Fill only what the caller's (possibly older, shorter) struct holds.
    const size_t size = out->struct_size;
    auto fits = [size](size_t offset, size_t bytes) { return size >= offset + bytes; };
    if (fits(offsetof(ferrox_device_info, abi_version), sizeof(out->abi_version)))
        out->abi_version = FERROX_ABI_VERSION;
    if (fits(offsetof(ferrox_device_info, type), sizeof(out->type))) out->type = FERROX_DEVICE_GPU;
    if (fits(offsetof(ferrox_device_info, name), sizeof(out->name))) {
        const std::string name = fmt::format("{} (cuda:{}, sm_{}{})", device_.name, device_.ordinal,
                                             device_.compute_major, device_.compute_minor);
        const size_t length = std::min(name.size(), sizeof(out->name) - 1);
        std::memcpy(out->name, name.data(), length);
        out->name[length] = '\0';
    }
    if (fits(offsetof(ferrox_device_info, memory_total), sizeof(out->memory_total)))
        out->memory_total = total_bytes;
    if (fits(offsetof(ferrox_device_info, memory_free), sizeof(out->memory_free)))
        out->memory_free = free_bytes;
    return Status::ok();
}

Status CudaBackend::reserve(uint64_t bytes, std::string_view what) {
    // Free memory now, not at create: other processes and backends share it.
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes); error != cudaSuccess)
        return cuda_failure(error, "cudaMemGetInfo");
    const PlacementRequest request{what, bytes, resident_bytes_, budget_};
    if (auto refusal = refuse_placement(request, DeviceMemory{free_bytes, total_bytes}))
        return Status::fail(FERROX_ERR_OUT_OF_MEMORY, std::move(*refusal));
    resident_bytes_ += bytes;
    return Status::ok();
}

Status CudaBackend::buffer_alloc(uint64_t bytes, ferrox_buffer** out) {
    if (out == nullptr)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: buffer_alloc: null output");
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    if (Status budget = reserve(bytes, "a buffer"); !budget.is_ok()) return budget;
    auto buffer = std::make_unique<ferrox_buffer>();
    cudaError_t error = cudaSuccess;
    buffer->memory = allocate_device(bytes, error);
    if (error != cudaSuccess) {
        resident_bytes_ -= bytes;
        return cuda_failure(error, fmt::format("allocating a buffer of {} bytes", bytes));
    }
    buffer->device = buffer->memory.get();
    buffer->bytes = bytes;
    *out = buffer.release();  // owned by the core until buffer_free
    return Status::ok();
}

void CudaBackend::buffer_free(ferrox_buffer* buffer) {
    if (buffer == nullptr) return;
    const std::unique_ptr<ferrox_buffer> owned(buffer);
    const std::lock_guard lock(mutex_);
    static_cast<void>(make_current());
    drain();
    if (owned->memory) resident_bytes_ -= owned->bytes;
    owned->memory.reset();
    owned->registration.reset();
}

// One copy between the host and a buffer's range, both directions: the
// arguments checked, then the copy in stream order and a wait. Our stream is
// non-blocking, so a plain cudaMemcpy (legacy stream) would not wait for the
// resident kernels queued on it: an upload must not overwrite bytes they
// still read (the last step's RoPE angles), a download must see what they
// wrote. The wait also means `host` is the caller's only for this call, and
// it reports a failure of any earlier asynchronous entry.
Status CudaBackend::copy_with_buffer(std::string_view entry, bool upload,
                                     const ferrox_buffer* buffer, uint64_t offset, void* dst,
                                     const void* src, uint64_t bytes) {
    if (buffer == nullptr || ((upload ? src : dst) == nullptr && bytes != 0))
        return Status::fail(
            FERROX_ERR_INVALID_ARGUMENT,
            fmt::format("cuda: {}: null buffer or {}", entry, upload ? "source" : "destination"));
    if (!in_bounds(offset, bytes, buffer->bytes))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            fmt::format("cuda: {}: bytes [{}, {}+{}) outside a buffer of {} bytes",
                                        entry, offset, offset, bytes, buffer->bytes));
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    char* device = static_cast<char*>(buffer->device) + offset;
    cudaStream_t stream = stream_.get();
    cudaError_t error = upload ? cudaMemcpyAsync(device, src, bytes, cudaMemcpyDefault, stream)
                               : cudaMemcpyAsync(dst, device, bytes, cudaMemcpyDefault, stream);
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
    if (error != cudaSuccess)
        return cuda_failure(error, fmt::format("{} (or earlier queued work)", entry));
    return Status::ok();
}

Status CudaBackend::buffer_upload(ferrox_buffer* buffer, uint64_t offset, const void* src,
                                  uint64_t bytes) {
    return copy_with_buffer("buffer_upload", true, buffer, offset, nullptr, src, bytes);
}

Status CudaBackend::buffer_download(const ferrox_buffer* buffer, uint64_t offset, void* dst,
                                    uint64_t bytes) {
    return copy_with_buffer("buffer_download", false, buffer, offset, dst, nullptr, bytes);
}

Status CudaBackend::buffer_wrap_host(void* host, uint64_t bytes, ferrox_buffer** out) {
    if (host == nullptr || out == nullptr || bytes == 0)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            "cuda: buffer_wrap_host: null or empty memory");
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    // Pins the pages and maps them for the device; a read-only mmap or a
    // platform without host registration cannot be wrapped (copy it instead).
    if (const cudaError_t error = cudaHostRegister(host, bytes, cudaHostRegisterMapped);
        error != cudaSuccess) {
        static_cast<void>(cudaGetLastError());  // not sticky: clear it
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: cannot wrap {} host bytes without a copy: {}", bytes,
                                        describe_cuda_error(error)));
    }
    auto buffer = std::make_unique<ferrox_buffer>();
    buffer->registration.reset(host);
    void* device = nullptr;
    if (const cudaError_t error = cudaHostGetDevicePointer(&device, host, 0);
        error != cudaSuccess) {
        static_cast<void>(cudaGetLastError());  // not sticky: clear it
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: wrapped host memory has no device address: {}",
                                        describe_cuda_error(error)));
    }
    buffer->device = device;
    buffer->bytes = bytes;
    *out = buffer.release();  // owned by the core until buffer_free
    return Status::ok();
}

Status CudaBackend::weight_prepare(const ferrox_weight_desc* desc, ferrox_weight** out) {
    if (desc == nullptr || out == nullptr)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            "cuda: weight_prepare: null descriptor or output");
    if (desc->struct_size < sizeof(ferrox_weight_desc))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            fmt::format("cuda: weight_prepare: descriptor of {} bytes, need {}",
                                        desc->struct_size, sizeof(ferrox_weight_desc)));
    const ferrox_kind kind = desc->kind;
    if (!has_kernel(FERROX_OP_MATVEC, kind))
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: no kernel for {} weights (kind id {})",
                                        kind_name(kind), static_cast<int>(kind)));
    const auto expected_row_bytes = row_bytes(kind, desc->cols);
    if (desc->rows == 0 || desc->cols == 0 || !expected_row_bytes ||
        *expected_row_bytes != desc->row_bytes || desc->data == nullptr)
        return Status::fail(
            FERROX_ERR_INVALID_ARGUMENT,
            fmt::format("cuda: weight_prepare: a {} x {} {} weight needs rows of {} "
                        "bytes and data; got rows of {} bytes{}",
                        desc->rows, desc->cols, kind_name(kind), expected_row_bytes.value_or(0),
                        desc->row_bytes, desc->data == nullptr ? " and no data" : ""));
    const auto bytes = checked_product(desc->rows, desc->row_bytes);
    if (!bytes)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: weight_prepare: size overflows");

    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    if (Status budget = reserve(
            *bytes, fmt::format("a {} x {} {} weight", desc->rows, desc->cols, kind_name(kind)));
        !budget.is_ok())
        return budget;
    // Always a private device copy, even when `borrow` says the host bytes
    // outlive the handle: decode streams every weight each token, and from
    // mapped host memory that stream would cross PCIe every time.
    auto weight = std::make_unique<ferrox_weight>();
    cudaError_t error = cudaSuccess;
    weight->memory = allocate_device(*bytes, error);
    // On our stream and waited for: a cudaMemcpy from pageable memory may
    // return before its DMA lands, and the legacy stream it would use does not
    // order our non-blocking stream's kernels after it.
    if (error == cudaSuccess)
        error = cudaMemcpyAsync(weight->memory.get(), desc->data, *bytes, cudaMemcpyHostToDevice,
                                stream_.get());
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream_.get());
    if (error != cudaSuccess) {
        resident_bytes_ -= *bytes;
        return cuda_failure(error, fmt::format("uploading a {} x {} {} weight ({} bytes)",
                                               desc->rows, desc->cols, kind_name(kind), *bytes));
    }
    weight->bytes = *bytes;
    weight->view = DeviceWeightView{kind, static_cast<const uint8_t*>(weight->memory.get()),
                                    desc->rows, desc->cols, desc->row_bytes};
    *out = weight.release();  // owned by the core until weight_release
    return Status::ok();
}

void CudaBackend::weight_release(ferrox_weight* weight) {
    if (weight == nullptr) return;
    const std::unique_ptr<ferrox_weight> owned(weight);
    const std::lock_guard lock(mutex_);
    static_cast<void>(make_current());
    drain();
    resident_bytes_ -= owned->bytes;
    owned->memory.reset();
}

Status CudaBackend::ensure_scratch(uint64_t x_floats, uint64_t y_floats) {
    // Grown, never shrunk: after the first prefill, decode allocates nothing.
    auto grow = [this](DeviceAllocation& scratch, uint64_t& capacity, uint64_t floats) {
        if (floats <= capacity) return cudaSuccess;
        drain();
        scratch.reset();
        capacity = 0;
        cudaError_t error = cudaSuccess;
        scratch = allocate_device(floats * sizeof(float), error);
        if (error == cudaSuccess) capacity = floats;
        return error;
    };
    if (const cudaError_t error = grow(x_scratch_, x_capacity_, x_floats); error != cudaSuccess)
        return cuda_failure(error,
                            fmt::format("allocating {} floats of activation scratch", x_floats));
    if (const cudaError_t error = grow(y_scratch_, y_capacity_, y_floats); error != cudaSuccess)
        return cuda_failure(error, fmt::format("allocating {} floats of result scratch", y_floats));
    return Status::ok();
}

Status CudaBackend::ensure_attention_scratch(uint64_t floats) {
    if (floats <= attention_capacity_) return Status::ok();
    drain();  // queued split kernels may still use the old scratch
    attention_scratch_.reset();
    attention_capacity_ = 0;
    cudaError_t error = cudaSuccess;
    attention_scratch_ = allocate_device(floats * sizeof(float), error);
    if (error != cudaSuccess)
        return cuda_failure(error,
                            fmt::format("allocating {} floats of attention split scratch", floats));
    attention_capacity_ = floats;
    return Status::ok();
}

template <class Launch>
Status CudaBackend::run(uint64_t x_floats, const float* x, uint64_t y_floats, float* y,
                        Launch&& launch) {
    if (Status current = make_current(); !current.is_ok()) return current;
    if (Status scratch = ensure_scratch(x_floats, y_floats); !scratch.is_ok()) return scratch;
    auto* device_x = static_cast<float*>(x_scratch_.get());
    auto* device_y = static_cast<float*>(y_scratch_.get());
    cudaStream_t stream = stream_.get();
    cudaError_t error =
        cudaMemcpyAsync(device_x, x, x_floats * sizeof(float), cudaMemcpyHostToDevice, stream);
    if (error != cudaSuccess) return cuda_failure(error, "uploading activations");
    if (Status launched = launch(device_x, device_y, stream); !launched.is_ok()) {
        static_cast<void>(cudaStreamSynchronize(stream));
        return launched;
    }
    error = cudaMemcpyAsync(y, device_y, y_floats * sizeof(float), cudaMemcpyDeviceToHost, stream);
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
    if (error != cudaSuccess) return cuda_failure(error, "running the kernel");
    return Status::ok();
}

Status CudaBackend::matvec(const ferrox_weight* weight, const float* x, float* y) {
    if (weight == nullptr || x == nullptr || y == nullptr)
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: matvec: null weight, x or y");
    const DeviceWeightView& view = weight->view;
    const std::lock_guard lock(mutex_);
    return run(view.cols, x, view.rows, y,
               [&view](const float* device_x, float* device_y, cudaStream_t stream) {
                   const cudaError_t error = launch_matvec(view, device_x, device_y, stream);
                   return error == cudaSuccess ? Status::ok()
                                               : cuda_failure(error, "launching the matvec kernel");
               });
}

Status CudaBackend::gemm(const ferrox_weight* weight, const float* x, uint64_t n, float* y) {
    if (weight == nullptr || ((x == nullptr || y == nullptr) && n != 0))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT, "cuda: gemm: null weight, x or y");
    if (n == 0) return Status::ok();
    const DeviceWeightView& view = weight->view;
    const auto x_floats = checked_product(n, view.cols);
    const auto y_floats = checked_product(n, view.rows);
    if (!x_floats || !y_floats || !checked_product(*x_floats, sizeof(float)) ||
        !checked_product(*y_floats, sizeof(float)))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            fmt::format("cuda: gemm: batch of {} overflows", n));
    const bool tiled = has_kernel(FERROX_OP_GEMM, view.kind);
    const std::lock_guard lock(mutex_);
    return run(*x_floats, x, *y_floats, y,
               [&view, n, tiled](const float* device_x, float* device_y, cudaStream_t stream) {
                   if (tiled) {
                       const cudaError_t error = launch_gemm(view, device_x, n, device_y, stream);
                       return error == cudaSuccess
                                  ? Status::ok()
                                  : cuda_failure(error, "launching the tiled gemm kernel");
                   }
                   // The named gemm_fallback: one matvec launch per position,
                   // all on the device between one upload and one download.
                   for (uint64_t i = 0; i < n; ++i) {
                       const cudaError_t error = launch_matvec(view, device_x + i * view.cols,
                                                               device_y + i * view.rows, stream);
                       if (error != cudaSuccess)
                           return cuda_failure(error, "launching a per-position matvec");
                   }
                   return Status::ok();
               });
}

// ---- ABI 1.2: resident decoding ----------------------------------------------

Status CudaBackend::project(const ferrox_weight* weight, ferrox_tensor x, uint64_t n,
                            ferrox_tensor y) {
    constexpr std::string_view kEntry = "project";
    if (weight == nullptr) return invalid("cuda: project: null weight");
    if (n == 0) return Status::ok();
    const DeviceWeightView& view = weight->view;
    uint64_t x_floats = 0;
    uint64_t y_floats = 0;
    if (Status s = product(kEntry, n, view.cols, x_floats); !s.is_ok()) return s;
    if (Status s = product(kEntry, n, view.rows, y_floats); !s.is_ok()) return s;
    const float* device_x = nullptr;
    float* device_y = nullptr;
    if (Status s = resolve_as(kEntry, "x", x, x_floats, device_x); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "y", y, y_floats, device_y); !s.is_ok()) return s;
    // Every output reads all of x: writing into x while others read it races.
    if (x.buffer == y.buffer && x.offset < y.offset + y_floats * sizeof(float) &&
        y.offset < x.offset + x_floats * sizeof(float))
        return invalid("cuda: project: y overlaps x");
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    cudaStream_t stream = stream_.get();
    if (n == 1) return launched(launch_matvec(view, device_x, device_y, stream), "a matvec");
    if (has_kernel(FERROX_OP_GEMM, view.kind))
        return launched(launch_gemm(view, device_x, n, device_y, stream), "a tiled gemm");
    // The named gemm_fallback: one matvec launch per position.
    for (uint64_t i = 0; i < n; ++i)
        if (Status s = launched(
                launch_matvec(view, device_x + i * view.cols, device_y + i * view.rows, stream),
                "a per-position matvec");
            !s.is_ok())
            return s;
    return Status::ok();
}

Status CudaBackend::rms_norm(ferrox_tensor x, ferrox_tensor gamma, uint64_t rows, uint32_t dim,
                             float eps, ferrox_tensor y) {
    constexpr std::string_view kEntry = "rms_norm";
    uint64_t count = 0;
    if (Status s = product(kEntry, rows, dim, count); !s.is_ok()) return s;
    const float* device_x = nullptr;
    const float* device_gamma = nullptr;
    float* device_y = nullptr;
    if (Status s = resolve_as(kEntry, "x", x, count, device_x); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "gamma", gamma, dim, device_gamma); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "y", y, count, device_y); !s.is_ok()) return s;
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    return launched(
        launch_rms_norm(device_x, device_gamma, rows, dim, eps, device_y, stream_.get()),
        "the rms_norm kernel");
}

Status CudaBackend::add_rms_norm(ferrox_tensor dst, ferrox_tensor src, uint64_t src_stride,
                                 float alpha, ferrox_tensor gamma, uint64_t rows, uint32_t dim,
                                 float eps, ferrox_tensor y) {
    constexpr std::string_view kEntry = "add_rms_norm";
    uint64_t count = 0;
    if (Status s = product(kEntry, rows, dim, count); !s.is_ok()) return s;
    uint64_t src_count = 0;  // (rows - 1) * src_stride + dim, as for add
    if (rows != 0) {
        if (Status s = product(kEntry, rows - 1, src_stride, src_count); !s.is_ok()) return s;
        if (src_count > std::numeric_limits<uint64_t>::max() - dim)
            return invalid("cuda: add_rms_norm: source extent overflows");
        src_count += dim;
    }
    float* device_dst = nullptr;
    const float* device_src = nullptr;
    const float* device_gamma = nullptr;
    float* device_y = nullptr;
    if (Status s = resolve_as(kEntry, "dst", dst, count, device_dst); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "src", src, src_count, device_src); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "gamma", gamma, dim, device_gamma); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "y", y, count, device_y); !s.is_ok()) return s;
    // The kernel writes y while other blocks still read dst and src rows.
    const auto overlaps = [](const float* a, uint64_t a_count, const float* b, uint64_t b_count) {
        return a < b + b_count && b < a + a_count;
    };
    if (overlaps(device_y, count, device_dst, count) ||
        overlaps(device_y, count, device_src, src_count))
        return invalid("cuda: add_rms_norm: y overlaps dst or src");
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    return launched(launch_add_rms_norm(device_dst, device_src, src_stride, alpha, device_gamma,
                                        rows, dim, eps, device_y, stream_.get()),
                    "the add_rms_norm kernel");
}

Status CudaBackend::rope(ferrox_tensor x, ferrox_tensor cos, ferrox_tensor sin, uint32_t n_pos,
                         uint32_t n_heads, uint32_t head_dim, uint32_t neox) {
    constexpr std::string_view kEntry = "rope";
    if (head_dim % 2 != 0)
        return invalid(
            fmt::format("cuda: rope: head_dim {} is odd (RoPE rotates pairs)", head_dim));
    uint64_t heads = 0;
    uint64_t elements = 0;
    if (Status s = product(kEntry, n_pos, n_heads, heads); !s.is_ok()) return s;
    if (Status s = product(kEntry, heads, head_dim, elements); !s.is_ok()) return s;
    const uint64_t angles = uint64_t{n_pos} * (head_dim / 2);
    float* device_x = nullptr;
    const float* device_cos = nullptr;
    const float* device_sin = nullptr;
    if (Status s = resolve_as(kEntry, "x", x, elements, device_x); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "cos", cos, angles, device_cos); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "sin", sin, angles, device_sin); !s.is_ok()) return s;
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    return launched(launch_rope(device_x, device_cos, device_sin, n_pos, n_heads, head_dim,
                                neox != 0, stream_.get()),
                    "the rope kernel");
}

Status CudaBackend::add(ferrox_tensor dst, ferrox_tensor src, uint64_t rows, uint32_t dim,
                        uint64_t src_stride, float alpha) {
    constexpr std::string_view kEntry = "add";
    uint64_t count = 0;
    if (Status s = product(kEntry, rows, dim, count); !s.is_ok()) return s;
    // src spans (rows - 1) * src_stride + dim elements (just `dim` for a bias).
    uint64_t src_count = 0;
    if (rows != 0) {
        if (Status s = product(kEntry, rows - 1, src_stride, src_count); !s.is_ok()) return s;
        if (src_count > std::numeric_limits<uint64_t>::max() - dim)
            return invalid("cuda: add: source extent overflows");
        src_count += dim;
    }
    float* device_dst = nullptr;
    const float* device_src = nullptr;
    if (Status s = resolve_as(kEntry, "dst", dst, count, device_dst); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "src", src, src_count, device_src); !s.is_ok()) return s;
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    return launched(launch_add(device_dst, device_src, rows, dim, src_stride, alpha, stream_.get()),
                    "the add kernel");
}

Status CudaBackend::glu(ferrox_glu_kind kind, ferrox_tensor gate, ferrox_tensor up,
                        uint64_t count) {
    constexpr std::string_view kEntry = "glu";
    if (kind != FERROX_GLU_SWIGLU && kind != FERROX_GLU_GEGLU && kind != FERROX_GLU_SWIGLU_OAI)
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: glu: unknown GLU kind {}", static_cast<int>(kind)));
    float* device_gate = nullptr;
    const float* device_up = nullptr;
    if (Status s = resolve_as(kEntry, "gate", gate, count, device_gate); !s.is_ok()) return s;
    if (Status s = resolve_as(kEntry, "up", up, count, device_up); !s.is_ok()) return s;
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    return launched(launch_glu(kind, device_gate, device_up, count, stream_.get()),
                    kind == FERROX_GLU_SWIGLU  ? "the swiglu kernel"
                    : kind == FERROX_GLU_GEGLU ? "the geglu kernel"
                                               : "the swiglu_oai kernel");
}

Status CudaBackend::convert(ferrox_tensor src, ferrox_tensor dst, ferrox_kind dst_kind,
                            uint64_t count) {
    constexpr std::string_view kEntry = "convert";
    if (!has_kernel(FERROX_OP_CONVERT, dst_kind))
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: convert: no kernel converts f32 to {} (kind id {})",
                                        kind_name(dst_kind), static_cast<int>(dst_kind)));
    const uint64_t dst_element = dst_kind == FERROX_KIND_F16 ? 2 : 4;
    const float* device_src = nullptr;
    void* device_dst = nullptr;
    if (Status s = resolve_as(kEntry, "src", src, count, device_src); !s.is_ok()) return s;
    if (Status s = resolve(kEntry, "dst", dst, count, dst_element, device_dst); !s.is_ok())
        return s;
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    return launched(launch_convert(device_src, device_dst, dst_kind, count, stream_.get()),
                    "the convert kernel");
}

Status CudaBackend::stage_ids(const int32_t* ids, uint64_t n, const int32_t*& device_ids) {
    cudaStream_t stream = stream_.get();
    if (!ids_copied_) {
        cudaEvent_t event = nullptr;
        if (const cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
            error != cudaSuccess)
            return cuda_failure(error, "creating the get_rows event");
        ids_copied_.reset(event);
    }
    // The previous call's copy out of the staging must be done before the
    // staging is overwritten; in decode it finished long ago.
    if (const cudaError_t error = cudaEventSynchronize(ids_copied_.get()); error != cudaSuccess)
        return cuda_failure(error, "waiting for the previous get_rows ids");
    if (n > ids_capacity_) {
        drain();  // queued get_rows kernels may still read the old device ids
        ids_staging_.reset();
        ids_device_.reset();
        ids_capacity_ = 0;
        void* pinned = nullptr;
        if (const cudaError_t error = cudaMallocHost(&pinned, n * sizeof(int32_t));
            error != cudaSuccess)
            return cuda_failure(error, fmt::format("allocating pinned staging for {} ids", n));
        ids_staging_.reset(pinned);
        cudaError_t error = cudaSuccess;
        ids_device_ = allocate_device(n * sizeof(int32_t), error);
        if (error != cudaSuccess)
            return cuda_failure(error, fmt::format("allocating device scratch for {} ids", n));
        ids_capacity_ = n;
    }
    std::memcpy(ids_staging_.get(), ids, n * sizeof(int32_t));
    cudaError_t error = cudaMemcpyAsync(ids_device_.get(), ids_staging_.get(), n * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream);
    if (error == cudaSuccess) error = cudaEventRecord(ids_copied_.get(), stream);
    if (error != cudaSuccess) return cuda_failure(error, "uploading get_rows ids");
    device_ids = static_cast<const int32_t*>(ids_device_.get());
    return Status::ok();
}

Status CudaBackend::get_rows(const ferrox_weight* weight, const int32_t* ids, uint64_t n,
                             float scale, ferrox_tensor out) {
    constexpr std::string_view kEntry = "get_rows";
    if (weight == nullptr || (ids == nullptr && n != 0))
        return invalid("cuda: get_rows: null weight or ids");
    const DeviceWeightView& view = weight->view;
    if (!has_kernel(FERROX_OP_GET_ROWS, view.kind))
        return Status::fail(
            FERROX_ERR_UNSUPPORTED,
            fmt::format("cuda: get_rows: no kernel for {} weights", kind_name(view.kind)));
    // Checked here, not on the device: a bad id would read outside the weight.
    for (uint64_t i = 0; i < n; ++i)
        if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= view.rows)
            return invalid(
                fmt::format("cuda: get_rows: id {} (at index {}) is outside [0, {}) "
                            "of the {} x {} {} weight",
                            ids[i], i, view.rows, view.rows, view.cols, kind_name(view.kind)));
    uint64_t count = 0;
    if (Status s = product(kEntry, n, view.cols, count); !s.is_ok()) return s;
    float* device_out = nullptr;
    if (Status s = resolve_as(kEntry, "out", out, count, device_out); !s.is_ok()) return s;
    if (n == 0) return Status::ok();
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    const int32_t* device_ids = nullptr;
    if (Status s = stage_ids(ids, n, device_ids); !s.is_ok()) return s;
    return launched(launch_get_rows(view, device_ids, n, scale, device_out, stream_.get()),
                    "the get_rows kernel");
}

Status CudaBackend::attention_resident(const ferrox_attention_desc* desc, ferrox_tensor q,
                                       ferrox_tensor keys, ferrox_tensor values,
                                       ferrox_tensor out) {
    constexpr std::string_view kEntry = "attention_resident";
    // The pointer members are ignored: a descriptor must reach kv_kind.
    constexpr size_t kNeeded = offsetof(ferrox_attention_desc, kv_kind) + sizeof(ferrox_kind);
    if (desc == nullptr || desc->struct_size < kNeeded)
        return invalid(
            fmt::format("cuda: attention_resident: null descriptor or one shorter than "
                        "{} bytes",
                        kNeeded));
    const ferrox_attention_desc& d = *desc;
    // ABI 1.8; a shorter descriptor's values are of the keys' kind.
    const ferrox_kind value_kind =
        d.struct_size >= offsetof(ferrox_attention_desc, value_kind) + sizeof d.value_kind
            ? d.value_kind
            : d.kv_kind;
    if (Status s = check_attention_heads(kEntry, d.kv_kind, value_kind, d.n_head, d.n_head_kv,
                                         d.head_dim_k, d.head_dim_v);
        !s.is_ok())
        return s;
    if (d.n_query == 0) return Status::ok();
    const uint64_t positions = uint64_t{d.pos0} + d.n_query;
    if (positions - 1 > std::numeric_limits<uint32_t>::max())
        return invalid("cuda: attention_resident: positions past 2^32");
    const uint64_t element = d.kv_kind == FERROX_KIND_F16 ? 2 : 4;
    const uint64_t rows = uint64_t{d.n_query} * d.n_head;  // both below 2^32
    uint64_t q_count = 0;
    uint64_t o_count = 0;
    if (Status s = product(kEntry, rows, d.head_dim_k, q_count); !s.is_ok()) return s;
    if (Status s = product(kEntry, rows, d.head_dim_v, o_count); !s.is_ok()) return s;
    uint64_t k_count = 0;
    uint64_t v_count = 0;
    if (Status s = product(kEntry, positions, uint64_t{d.n_head_kv} * d.head_dim_k, k_count);
        !s.is_ok())
        return s;
    if (Status s = product(kEntry, positions, uint64_t{d.n_head_kv} * d.head_dim_v, v_count);
        !s.is_ok())
        return s;
    AttentionLaunch launch{d.n_query,    d.pos0,       d.window, d.n_head,  d.n_head_kv,
                           d.head_dim_k, d.head_dim_v, d.scale,  d.kv_kind, nullptr,
                           nullptr,      nullptr,      nullptr};
    if (Status s = read_softcap(kEntry, d, launch.softcap); !s.is_ok()) return s;
    void* device_keys = nullptr;
    void* device_values = nullptr;
    if (Status s = resolve_as(kEntry, "q", q, q_count, launch.q); !s.is_ok()) return s;
    if (Status s = resolve(kEntry, "keys", keys, k_count, element, device_keys); !s.is_ok())
        return s;
    if (Status s = resolve(kEntry, "values", values, v_count, element, device_values); !s.is_ok())
        return s;
    if (Status s = resolve_as(kEntry, "out", out, o_count, launch.out); !s.is_ok()) return s;
    launch.keys = device_keys;
    launch.values = device_values;
    const uint32_t splits = attention_splits(d.n_query, d.pos0, d.window, d.n_head, sm_count_);
    return run_attention(launch, splits, kEntry,
                         attention_longest_span(d.n_query, d.pos0, d.window));
}

// The head layout both attention entries take: a kernel for the KV kind,
// query heads in whole groups per KV head, head dims the kernel holds.
Status CudaBackend::check_attention_heads(std::string_view entry, ferrox_kind kv_kind,
                                          ferrox_kind value_kind, uint32_t n_head,
                                          uint32_t n_head_kv, uint32_t head_dim_k,
                                          uint32_t head_dim_v) const {
    // attention_kinds names no pair of two kinds, so the core never sends one.
    if (value_kind != kv_kind)
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: {}: no kernel for K {} over V {} (the kernels read "
                                        "K and V of one kind)",
                                        entry, kind_name(kv_kind), kind_name(value_kind)));
    if (!has_kernel(FERROX_OP_ATTENTION, kv_kind))
        return Status::fail(
            FERROX_ERR_UNSUPPORTED,
            fmt::format("cuda: {}: no kernel for a {} KV cache", entry, kind_name(kv_kind)));
    if (n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 || head_dim_k == 0 ||
        head_dim_v == 0)
        return invalid(
            fmt::format("cuda: {}: {} query heads cannot share {} KV heads of dims {}/{}", entry,
                        n_head, n_head_kv, head_dim_k, head_dim_v));
    if (head_dim_k > kMaxAttentionHeadDim || head_dim_v > kMaxAttentionHeadDim)
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: {}: head dims {}/{} exceed the kernel's {}", entry,
                                        head_dim_k, head_dim_v, kMaxAttentionHeadDim));
    return Status::ok();
}

Status CudaBackend::run_attention(const AttentionLaunch& launch, uint32_t splits,
                                  std::string_view entry, uint64_t span) {
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    float* split_scratch = nullptr;
    if (splits > 1) {
        const uint64_t floats = attention_split_scratch_floats(launch.n_query, launch.n_head,
                                                               launch.head_dim_v, splits);
        if (Status s = ensure_attention_scratch(floats); !s.is_ok()) return s;
        split_scratch = static_cast<float*>(attention_scratch_.get());
        if (!logged_split_) {
            logged_split_ = true;
            log_.debug(
                fmt::format("cuda: {}: split decode, {} chunks per (row, head) for {} x {} "
                            "(row, head) over {} positions on {} SMs ({} floats of scratch)",
                            entry, splits, launch.n_query, launch.n_head, span, sm_count_, floats));
        }
    }
    return launched(launch_attention(launch, splits, split_scratch, stream_.get()),
                    splits > 1 ? "the split attention kernels" : "the attention kernel");
}

Status CudaBackend::attention_cells(const ferrox_attention_cells_desc* desc, ferrox_tensor q,
                                    ferrox_tensor keys, ferrox_tensor values,
                                    ferrox_tensor cell_index, ferrox_tensor spans,
                                    ferrox_tensor out) {
    constexpr std::string_view kEntry = "attention_cells";
    constexpr size_t kNeeded = offsetof(ferrox_attention_cells_desc, max_span) + sizeof(uint32_t);
    if (desc == nullptr || desc->struct_size < kNeeded)
        return invalid(fmt::format(
            "cuda: attention_cells: null descriptor or one shorter than {} bytes", kNeeded));
    const ferrox_attention_cells_desc& d = *desc;
    const ferrox_kind value_kind =
        d.struct_size >= offsetof(ferrox_attention_cells_desc, value_kind) + sizeof d.value_kind
            ? d.value_kind
            : d.kv_kind;
    if (Status s = check_attention_heads(kEntry, d.kv_kind, value_kind, d.n_head, d.n_head_kv,
                                         d.head_dim_k, d.head_dim_v);
        !s.is_ok())
        return s;
    if (d.n_query == 0) return Status::ok();
    const uint64_t element = d.kv_kind == FERROX_KIND_F16 ? 2 : 4;
    const uint64_t rows = uint64_t{d.n_query} * d.n_head;  // both below 2^32
    uint64_t q_count = 0;
    uint64_t o_count = 0;
    uint64_t k_count = 0;
    uint64_t v_count = 0;
    if (Status s = product(kEntry, rows, d.head_dim_k, q_count); !s.is_ok()) return s;
    if (Status s = product(kEntry, rows, d.head_dim_v, o_count); !s.is_ok()) return s;
    if (Status s = product(kEntry, d.n_cells, uint64_t{d.n_head_kv} * d.head_dim_k, k_count);
        !s.is_ok())
        return s;
    if (Status s = product(kEntry, d.n_cells, uint64_t{d.n_head_kv} * d.head_dim_v, v_count);
        !s.is_ok())
        return s;
    // The indices live on the device: their extents are checked here, their
    // values by the kernel (a cell >= n_cells or a span past n_index is skipped).
    AttentionLaunch launch{d.n_query,    0,       0,         d.n_head, d.n_head_kv, d.head_dim_k,
                           d.head_dim_v, d.scale, d.kv_kind, nullptr,  nullptr,     nullptr,
                           nullptr};
    launch.n_cells = d.n_cells;
    launch.n_index = d.n_index;
    if (Status s = read_softcap(kEntry, d, launch.softcap); !s.is_ok()) return s;
    void* device_keys = nullptr;
    void* device_values = nullptr;
    if (Status s = resolve_as(kEntry, "q", q, q_count, launch.q); !s.is_ok()) return s;
    if (Status s = resolve(kEntry, "keys", keys, k_count, element, device_keys); !s.is_ok())
        return s;
    if (Status s = resolve(kEntry, "values", values, v_count, element, device_values); !s.is_ok())
        return s;
    if (Status s = resolve_as(kEntry, "cell_index", cell_index, d.n_index, launch.cell_index);
        !s.is_ok())
        return s;
    if (Status s = resolve_as(kEntry, "spans", spans, 2 * uint64_t{d.n_query}, launch.spans);
        !s.is_ok())
        return s;
    if (Status s = resolve_as(kEntry, "out", out, o_count, launch.out); !s.is_ok()) return s;
    // 1.5: sinks, n_head floats; a 1.4 core's descriptor ends before them.
    if (d.struct_size >= offsetof(ferrox_attention_cells_desc, sinks) + sizeof d.sinks &&
        d.sinks.buffer != nullptr)
        if (Status s = resolve_as(kEntry, "sinks", d.sinks, d.n_head, launch.sinks); !s.is_ok())
            return s;
    launch.keys = device_keys;
    launch.values = device_values;
    const uint32_t splits = attention_splits_for_span(d.n_query, d.n_head, d.max_span, sm_count_);
    return run_attention(launch, splits, kEntry, d.max_span);
}

}  // namespace ferrox::cuda
