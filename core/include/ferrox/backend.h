// Backend: the core's owning view of one plugin's ferrox_backend table. Checks
// that every entry it calls is covered by the plugin's struct_size, turns
// statuses into Expected, and keeps the plugin library loaded while in use.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"
#include "ferrox/expected.h"

namespace ferrox {

class KernelRegistry;

struct KernelChoice {
    std::string_view kernel;     // empty: no kernel
    std::string_view by_design;  // with no kernel: why that is deliberate
};

// What the core lends a plugin through ferrox_host; one per backend, so a
// plugin's record_kernel is attributed to it.
struct HostContext {
    std::string backend_name;
    bool accelerator = false;
    KernelRegistry* registry = nullptr;  // where plugin-side records go, if anywhere
};

class FERROX_API Backend {
  public:
    // Takes ownership of `raw` (destroyed before `library` is released).
    Backend(ferrox_backend* raw, std::shared_ptr<void> library, std::unique_ptr<HostContext> host,
            std::string name);
    ~Backend();
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    const std::string& name() const { return name_; }
    bool is_accelerator() const { return accelerator_; }
    HostContext& host_context() { return *host_; }

    // At most kMaxDevices, whatever the plugin claims.
    static constexpr uint32_t kMaxDevices = 256;
    uint32_t device_count() const;
    Expected<ferrox_device_info> device_info(uint32_t device) const;

    KernelChoice kernel_for(ferrox_op op, ferrox_kind kind) const;
    std::string_view gemm_fallback() const;
    std::string_view matvec_fallback() const;

    Expected<ferrox_weight*> prepare_weight(const ferrox_weight_desc& desc, bool borrow);
    void release_weight(ferrox_weight* weight);
    Expected<void> matvec(const ferrox_weight* weight, const float* x, float* y);
    Expected<void> gemm(const ferrox_weight* weight, const float* x, uint64_t n, float* y);
    // Since ABI 1.10: many matvecs in one call, each to matvec's bits.
    bool has_matvec_batch() const;
    Expected<void> matvec_batch(std::span<const ferrox_matvec_item> items);
    // Since ABI 1.1; a 1.0 plugin has no attention entry.
    bool has_attention() const;
    Expected<void> attention(const ferrox_attention_desc& desc);

    // Since ABI 1.10: the gated delta rule on host memory.
    bool has_delta_net() const;
    Expected<void> delta_net(const ferrox_delta_net_desc& desc);

    // Since ABI 1.2: true when every resident-decoding entry (and the buffer
    // entries they work on) is present, so a forward pass can live here.
    bool has_resident() const;
    Expected<ferrox_buffer*> buffer_alloc(uint64_t bytes);
    void buffer_free(ferrox_buffer* buffer);
    Expected<void> upload(ferrox_buffer* buffer, uint64_t offset, const void* src, uint64_t bytes);
    // Waits for all work called before it (ABI 1.2: entries are asynchronous).
    Expected<void> download(const ferrox_buffer* buffer, uint64_t offset, void* dst,
                            uint64_t bytes);
    Expected<void> project(const ferrox_weight* weight, ferrox_tensor x, uint64_t n,
                           ferrox_tensor y);
    Expected<void> rms_norm(ferrox_tensor x, ferrox_tensor gamma, uint64_t rows, uint32_t dim,
                            float eps, ferrox_tensor y);
    Expected<void> rope(ferrox_tensor x, ferrox_tensor cos, ferrox_tensor sin, uint32_t n_pos,
                        uint32_t n_heads, uint32_t head_dim, bool neox);
    Expected<void> add(ferrox_tensor dst, ferrox_tensor src, uint64_t rows, uint32_t dim,
                       uint64_t src_stride, float alpha);
    Expected<void> glu(ferrox_glu_kind kind, ferrox_tensor gate, ferrox_tensor up, uint64_t count);
    Expected<void> convert(ferrox_tensor src, ferrox_tensor dst, ferrox_kind dst_kind,
                           uint64_t count);
    Expected<void> get_rows(const ferrox_weight* weight, const int32_t* ids, uint64_t n,
                            float scale, ferrox_tensor out);
    Expected<void> attention_resident(const ferrox_attention_desc& desc, ferrox_tensor q,
                                      ferrox_tensor keys, ferrox_tensor values, ferrox_tensor out);
    // Optional within 1.2: the fused residual add + RMS norm.
    bool has_add_rms_norm() const;
    Expected<void> add_rms_norm(ferrox_tensor dst, ferrox_tensor src, uint64_t src_stride,
                                float alpha, ferrox_tensor gamma, uint64_t rows, uint32_t dim,
                                float eps, ferrox_tensor y);

    // Since ABI 1.3: attention over a resident cache of cells for a batch of
    // many sequences; without it (a 1.2 plugin) a resident context holds one.
    bool has_attention_cells() const;
    Expected<void> attention_cells(const ferrox_attention_cells_desc& desc, ferrox_tensor q,
                                   ferrox_tensor keys, ferrox_tensor values,
                                   ferrox_tensor cell_index, ferrox_tensor spans,
                                   ferrox_tensor out);
    // "1.2": the ABI version the plugin's table was built against.
    std::string abi_version_text() const;
    // ABI 1.4: its attention entries read the descriptors' softcap.
    bool takes_attention_softcap() const;
    // ABI 1.5: its attention entries read the descriptors' sinks.
    bool takes_attention_sinks() const;
    // ABI 1.7: its host attention entry reads the descriptor's lookahead.
    bool takes_attention_lookahead() const;
    // The attention kernel for keys of `key_kind` and values of `value_kind`:
    // kernel_for(ATTENTION, kind) when they are one kind; else the 1.8
    // attention_kinds entry, and without it none, by design (the plugin
    // would read the values as keys' kind).
    KernelChoice attention_kernel(ferrox_kind key_kind, ferrox_kind value_kind) const;

    const ferrox_backend& raw() const { return *raw_; }

  private:
    ferrox_backend* raw_;
    std::shared_ptr<void> library_;
    std::unique_ptr<HostContext> host_;
    std::string name_;
    bool accelerator_ = false;
};

// The host table handed to a plugin's create(); callbacks route to `context`.
FERROX_API ferrox_host make_host_table(HostContext* context);

}  // namespace ferrox
