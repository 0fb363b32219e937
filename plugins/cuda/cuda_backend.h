// CudaBackend: one CUDA device behind the ABI's ferrox_backend table.
//
// It owns a stream, the device scratch for activations and results (reused by
// every call, grown when a call needs more), and the accounting that keeps
// resident weights and buffers inside the optional vram_budget. Calls are
// serialised by one mutex because they share that scratch and stream.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "device_memory.h"
#include "device_probe.h"
#include "ferrox/backend_abi.h"
#include "host_log.h"
#include "kernels.h"
#include "options.h"
#include "resident_kernels.h"
#include "status.h"

// The ABI's opaque handles, defined by this plugin (hidden symbols).
struct ferrox_buffer {
    ferrox::cuda::DeviceAllocation memory;        // set for buffer_alloc
    ferrox::cuda::HostRegistration registration;  // set for buffer_wrap_host
    void* device = nullptr;                       // where kernels and copies go
    uint64_t bytes = 0;
};

struct ferrox_weight {
    ferrox::cuda::DeviceAllocation memory;  // the weight, uploaded once
    ferrox::cuda::DeviceWeightView view;
    uint64_t bytes = 0;
};

namespace ferrox::cuda {

struct CudaFreeHost {
    void operator()(void* pointer) const noexcept { static_cast<void>(cudaFreeHost(pointer)); }
};
using PinnedAllocation = std::unique_ptr<void, CudaFreeHost>;

struct CudaEventDestroy {
    void operator()(cudaEvent_t event) const noexcept {
        static_cast<void>(cudaEventDestroy(event));
    }
};
using OwnedEvent = std::unique_ptr<CUevent_st, CudaEventDestroy>;

class CudaBackend {
  public:
    // Creates the stream on the probed device; fails with the runtime's reason.
    static Status create(const HostLog& log, const CudaOptions& options,
                         const DeviceDescription& device, std::unique_ptr<CudaBackend>& out);

    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;
    ~CudaBackend();

    // The ABI table whose `self` is this object; plugin_entry.cpp fills the
    // entry points.
    ferrox_backend& table() { return table_; }
    const HostLog& log() const { return log_; }
    uint32_t sm_count() const { return sm_count_; }

    // One backend drives one device: the one the "device" option chose.
    uint32_t device_count() const { return 1; }
    Status device_info(uint32_t device, ferrox_device_info* out) const;

    Status buffer_alloc(uint64_t bytes, ferrox_buffer** out);
    void buffer_free(ferrox_buffer* buffer);
    Status buffer_upload(ferrox_buffer* buffer, uint64_t offset, const void* src, uint64_t bytes);
    Status buffer_download(const ferrox_buffer* buffer, uint64_t offset, void* dst, uint64_t bytes);
    Status buffer_wrap_host(void* host, uint64_t bytes, ferrox_buffer** out);

    Status weight_prepare(const ferrox_weight_desc* desc, ferrox_weight** out);
    void weight_release(ferrox_weight* weight);

    Status matvec(const ferrox_weight* weight, const float* x, float* y);
    Status gemm(const ferrox_weight* weight, const float* x, uint64_t n, float* y);

    // ABI 1.2 resident decoding: tensors in this backend's buffers, kernels
    // launched on the stream without waiting (buffer_download waits).
    Status project(const ferrox_weight* weight, ferrox_tensor x, uint64_t n, ferrox_tensor y);
    Status add_rms_norm(ferrox_tensor dst, ferrox_tensor src, uint64_t src_stride, float alpha,
                        ferrox_tensor gamma, uint64_t rows, uint32_t dim, float eps,
                        ferrox_tensor y);
    Status rms_norm(ferrox_tensor x, ferrox_tensor gamma, uint64_t rows, uint32_t dim, float eps,
                    ferrox_tensor y);
    Status rope(ferrox_tensor x, ferrox_tensor cos, ferrox_tensor sin, uint32_t n_pos,
                uint32_t n_heads, uint32_t head_dim, uint32_t neox);
    Status add(ferrox_tensor dst, ferrox_tensor src, uint64_t rows, uint32_t dim,
               uint64_t src_stride, float alpha);
    Status glu(ferrox_glu_kind kind, ferrox_tensor gate, ferrox_tensor up, uint64_t count);
    Status convert(ferrox_tensor src, ferrox_tensor dst, ferrox_kind dst_kind, uint64_t count);
    Status get_rows(const ferrox_weight* weight, const int32_t* ids, uint64_t n, float scale,
                    ferrox_tensor out);
    Status attention_resident(const ferrox_attention_desc* desc, ferrox_tensor q,
                              ferrox_tensor keys, ferrox_tensor values, ferrox_tensor out);
    // ABI 1.3: the same kernels walking each row's span of a cell list.
    Status attention_cells(const ferrox_attention_cells_desc* desc, ferrox_tensor q,
                           ferrox_tensor keys, ferrox_tensor values, ferrox_tensor cell_index,
                           ferrox_tensor spans, ferrox_tensor out);

  private:
    // Only create() constructs (and then on the heap, owned by the core).
    struct ConstructionKey {
        explicit ConstructionKey() = default;
    };

  public:
    CudaBackend(ConstructionKey, const HostLog& log, const CudaOptions& options,
                const DeviceDescription& device);

  private:
    Status make_current() const;
    // Waits for the stream (errors ignored); called before freeing memory.
    void drain() const;
    // Counts `bytes` as resident, or refuses (out of memory, with the
    // arithmetic) when they exceed vram_budget or the free device memory.
    Status reserve(uint64_t bytes, std::string_view what);
    Status ensure_scratch(uint64_t x_floats, uint64_t y_floats);
    // buffer_upload (host `src` to the buffer) and buffer_download (to host `dst`).
    Status copy_with_buffer(std::string_view entry, bool upload, const ferrox_buffer* buffer,
                            uint64_t offset, void* dst, const void* src, uint64_t bytes);
    // Activations up, `launch` on the stream, results down, then wait.
    template <class Launch>
    Status run(uint64_t x_floats, const float* x, uint64_t y_floats, float* y, Launch&& launch);
    // Grows the flash-decoding scratch of attention_resident to `floats`.
    Status ensure_attention_scratch(uint64_t floats);
    // Both attention entries' launch, once their tensors are resolved.
    // `value_kind`: the values' (ABI 1.8); the kernels read K and V of one kind.
    Status check_attention_heads(std::string_view entry, ferrox_kind kv_kind,
                                 ferrox_kind value_kind, uint32_t n_head, uint32_t n_head_kv,
                                 uint32_t head_dim_k, uint32_t head_dim_v) const;
    Status run_attention(const AttentionLaunch& launch, uint32_t splits, std::string_view entry,
                         uint64_t span);
    // Puts get_rows' ids on the device, in stream order, without waiting for
    // the copy: they go through pinned staging the previous copy has left.
    Status stage_ids(const int32_t* ids, uint64_t n, const int32_t*& device_ids);

    HostLog log_;
    DeviceDescription device_;
    uint64_t budget_ = 0;    // vram_budget; 0 = no cap but free memory
    uint32_t sm_count_ = 0;  // multiprocessors: how far attention splits a decode
    ferrox_backend table_{};

    std::mutex mutex_;             // guards everything below
    uint64_t resident_bytes_ = 0;  // weights + buffers, for vram_budget
    OwnedStream stream_;
    DeviceAllocation x_scratch_;
    DeviceAllocation y_scratch_;
    uint64_t x_capacity_ = 0;  // floats
    uint64_t y_capacity_ = 0;  // floats
    // get_rows ids: pinned host staging, its device copy, and the event that
    // marks the staging free again.
    PinnedAllocation ids_staging_;
    DeviceAllocation ids_device_;
    uint64_t ids_capacity_ = 0;  // ids
    OwnedEvent ids_copied_;
    // attention_resident's split parts (attention_split.h): grown, never
    // shrunk, like the scratch above and likewise not counted against
    // vram_budget; bounded by 3 * sm_count_ * (2 + 512) floats (~0.8 MiB on
    // 132 SMs).
    DeviceAllocation attention_scratch_;
    uint64_t attention_capacity_ = 0;  // floats
    bool logged_split_ = false;        // the first split launch is logged once
};

}  // namespace ferrox::cuda
