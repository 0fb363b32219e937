#include "cuda_backend.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
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

}  // namespace

CudaBackend::CudaBackend(ConstructionKey, const HostLog& log, const CudaOptions& options,
                         const DeviceDescription& device)
    : log_(log), device_(device), budget_(options.vram_budget.value_or(0)) {}

CudaBackend::~CudaBackend() {
    // Owners free in reverse order; make the device current so they free on it.
    static_cast<void>(cudaSetDevice(device_.ordinal));
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
    if (owned->memory) resident_bytes_ -= owned->bytes;
    owned->memory.reset();
    owned->registration.reset();
}

Status CudaBackend::buffer_upload(ferrox_buffer* buffer, uint64_t offset, const void* src,
                                  uint64_t bytes) {
    if (buffer == nullptr || (src == nullptr && bytes != 0))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            "cuda: buffer_upload: null buffer or source");
    if (!in_bounds(offset, bytes, buffer->bytes))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            fmt::format("cuda: buffer_upload: bytes [{}, {}+{}) outside a buffer "
                                        "of {} bytes",
                                        offset, offset, bytes, buffer->bytes));
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    if (const cudaError_t error =
            cudaMemcpy(static_cast<char*>(buffer->device) + offset, src, bytes, cudaMemcpyDefault);
        error != cudaSuccess)
        return cuda_failure(error, "buffer_upload");
    return Status::ok();
}

Status CudaBackend::buffer_download(const ferrox_buffer* buffer, uint64_t offset, void* dst,
                                    uint64_t bytes) {
    if (buffer == nullptr || (dst == nullptr && bytes != 0))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            "cuda: buffer_download: null buffer or destination");
    if (!in_bounds(offset, bytes, buffer->bytes))
        return Status::fail(FERROX_ERR_INVALID_ARGUMENT,
                            fmt::format("cuda: buffer_download: bytes [{}, {}+{}) outside a "
                                        "buffer of {} bytes",
                                        offset, offset, bytes, buffer->bytes));
    const std::lock_guard lock(mutex_);
    if (Status current = make_current(); !current.is_ok()) return current;
    if (const cudaError_t error = cudaMemcpy(dst, static_cast<const char*>(buffer->device) + offset,
                                             bytes, cudaMemcpyDefault);
        error != cudaSuccess)
        return cuda_failure(error, "buffer_download");
    return Status::ok();
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
    if (const cudaError_t error = cudaHostGetDevicePointer(&device, host, 0); error != cudaSuccess)
        return Status::fail(FERROX_ERR_UNSUPPORTED,
                            fmt::format("cuda: wrapped host memory has no device address: {}",
                                        describe_cuda_error(error)));
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
    if (error == cudaSuccess)
        error = cudaMemcpy(weight->memory.get(), desc->data, *bytes, cudaMemcpyHostToDevice);
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
    resident_bytes_ -= owned->bytes;
    owned->memory.reset();
}

Status CudaBackend::ensure_scratch(uint64_t x_floats, uint64_t y_floats) {
    // Grown, never shrunk: after the first prefill, decode allocates nothing.
    auto grow = [](DeviceAllocation& scratch, uint64_t& capacity, uint64_t floats) {
        if (floats <= capacity) return cudaSuccess;
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

}  // namespace ferrox::cuda
