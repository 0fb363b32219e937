#include "ferrox/backend.h"

#include <cstring>

#include "ferrox/kernel_registry.h"
#include "ferrox/log.h"

namespace ferrox {
namespace {

// True when the plugin's struct is long enough to contain `member` and the
// entry is set: the core never reads past what the plugin declared.
template <class Member>
bool covers(const ferrox_backend& b, const Member& member) {
    const auto offset = static_cast<size_t>(reinterpret_cast<const char*>(&member) -
                                            reinterpret_cast<const char*>(&b));
    return offset + sizeof(Member) <= b.struct_size;
}

template <class Fn>
bool callable(const ferrox_backend& b, const Fn& fn) {
    return covers(b, fn) && fn != nullptr;
}

Error plugin_error(std::string_view backend, std::string_view entry, ferrox_status status,
                   const ferrox_message& message) {
    const size_t n = strnlen(message.text, sizeof message.text);
    return make_error("{} backend: {} failed (status {}): {}", backend, entry,
                      static_cast<int>(status),
                      n ? std::string_view(message.text, n) : std::string_view("no message"));
}

Error missing_entry(std::string_view backend, std::string_view entry) {
    return make_error("{} backend does not provide '{}'", backend, entry);
}

// Calls entry `fn` of `raw` (named `entry` in errors) with `args` and a
// message buffer, after checking the plugin's table covers it. `fn` must be
// the member itself (a reference): covers() measures its offset in the table.
template <class Fn, class... Args>
Expected<void> call_entry(ferrox_backend& raw, const std::string& backend, std::string_view entry,
                          const Fn& fn, Args... args) {
    if (!callable(raw, fn)) return missing_entry(backend, entry);
    ferrox_message message{};
    const ferrox_status s = fn(&raw, args..., &message);
    if (s != FERROX_OK) return plugin_error(backend, entry, s, message);
    return {};
}

void host_log(void* context, ferrox_log_level level, const char* message) {
    const auto* host = static_cast<const HostContext*>(context);
    const auto spd = static_cast<spdlog::level::level_enum>(
        level <= FERROX_LOG_ERROR ? static_cast<int>(level) : static_cast<int>(FERROX_LOG_ERROR));
    logger().log(spd, "[{}] {}", host ? host->backend_name : "?", message ? message : "");
}

void host_record_kernel(void* context, ferrox_op op, ferrox_kind kind, const char* role,
                        ferrox_outcome outcome, const char* detail) {
    const auto* host = static_cast<const HostContext*>(context);
    if (!host || !host->registry) return;
    const Outcome o = outcome == FERROX_OUTCOME_HIT    ? Outcome::Hit
                      : outcome == FERROX_OUTCOME_MISS ? Outcome::Miss
                                                       : Outcome::ByDesign;
    host->registry->record(Phase::Dispatch, {host->backend_name, op, role ? role : "", kind}, o,
                           detail ? detail : "", host->accelerator);
}

}  // namespace

ferrox_host make_host_table(HostContext* context) {
    ferrox_host host{};
    host.struct_size = sizeof host;
    host.abi_version = FERROX_ABI_VERSION;
    host.context = context;
    host.log = host_log;
    host.record_kernel = host_record_kernel;
    return host;
}

Backend::Backend(ferrox_backend* raw, std::shared_ptr<void> library,
                 std::unique_ptr<HostContext> host, std::string name)
    : raw_(raw), library_(std::move(library)), host_(std::move(host)), name_(std::move(name)) {
    for (uint32_t d = 0; d < device_count(); ++d) {
        auto info = device_info(d);
        if (info && info->type == FERROX_DEVICE_GPU) accelerator_ = true;
    }
    host_->accelerator = accelerator_;
}

Backend::~Backend() {
    if (raw_ && callable(*raw_, raw_->destroy)) raw_->destroy(raw_);
    raw_ = nullptr;
    // library_ is released after this body: the plugin's code outlives its table.
}

uint32_t Backend::device_count() const {
    const uint32_t claimed = callable(*raw_, raw_->device_count) ? raw_->device_count(raw_) : 0;
    // The core asks each device for its info: a plugin's count bounds that
    // loop, so it is clamped rather than trusted (4 billion calls is a hang).
    if (claimed > kMaxDevices) {
        logger().warn("{} backend claims {} devices; only the first {} are used", name_, claimed,
                      kMaxDevices);
        return kMaxDevices;
    }
    return claimed;
}

Expected<ferrox_device_info> Backend::device_info(uint32_t device) const {
    if (!callable(*raw_, raw_->device_info)) return missing_entry(name_, "device_info");
    ferrox_device_info info{};
    info.struct_size = sizeof info;
    info.abi_version = FERROX_ABI_VERSION;
    ferrox_message message{};
    const ferrox_status s = raw_->device_info(raw_, device, &info, &message);
    if (s != FERROX_OK) return plugin_error(name_, "device_info", s, message);
    info.name[sizeof info.name - 1] = '\0';
    return info;
}

KernelChoice Backend::kernel_for(ferrox_op op, ferrox_kind kind) const {
    if (!callable(*raw_, raw_->kernel_for)) return {};
    ferrox_kernel_info info{};
    info.struct_size = sizeof info;
    info.abi_version = FERROX_ABI_VERSION;
    raw_->kernel_for(raw_, op, kind, &info);
    KernelChoice choice;
    if (info.kernel) choice.kernel = info.kernel;
    if (!info.kernel && info.by_design) choice.by_design = info.by_design;
    return choice;
}

std::string_view Backend::gemm_fallback() const {
    return covers(*raw_, raw_->gemm_fallback) && raw_->gemm_fallback ? raw_->gemm_fallback
                                                                     : std::string_view{};
}

std::string_view Backend::matvec_fallback() const {
    return covers(*raw_, raw_->matvec_fallback) && raw_->matvec_fallback ? raw_->matvec_fallback
                                                                         : std::string_view{};
}

Expected<ferrox_weight*> Backend::prepare_weight(const ferrox_weight_desc& desc, bool borrow) {
    if (!callable(*raw_, raw_->weight_prepare)) return missing_entry(name_, "weight_prepare");
    ferrox_weight* weight = nullptr;
    ferrox_message message{};
    const ferrox_status s = raw_->weight_prepare(raw_, &desc, borrow ? 1 : 0, &weight, &message);
    if (s != FERROX_OK) return plugin_error(name_, "weight_prepare", s, message);
    if (!weight) return make_error("{} backend: weight_prepare returned no handle", name_);
    return weight;
}

void Backend::release_weight(ferrox_weight* weight) {
    if (weight && callable(*raw_, raw_->weight_release)) raw_->weight_release(raw_, weight);
}

Expected<void> Backend::matvec(const ferrox_weight* weight, const float* x, float* y) {
    return call_entry(*raw_, name_, "matvec", raw_->matvec, weight, x, y);
}

Expected<void> Backend::gemm(const ferrox_weight* weight, const float* x, uint64_t n, float* y) {
    return call_entry(*raw_, name_, "gemm", raw_->gemm, weight, x, n, y);
}

bool Backend::has_matvec_batch() const { return callable(*raw_, raw_->matvec_batch); }

Expected<void> Backend::matvec_batch(std::span<const ferrox_matvec_item> items) {
    return call_entry(*raw_, name_, "matvec_batch", raw_->matvec_batch, items.data(),
                      static_cast<uint64_t>(items.size()));
}

bool Backend::has_attention() const { return callable(*raw_, raw_->attention); }

Expected<void> Backend::attention(const ferrox_attention_desc& desc) {
    return call_entry(*raw_, name_, "attention", raw_->attention, &desc);
}

bool Backend::has_delta_net() const { return callable(*raw_, raw_->delta_net); }

Expected<void> Backend::delta_net(const ferrox_delta_net_desc& desc) {
    return call_entry(*raw_, name_, "delta_net", raw_->delta_net, &desc);
}

bool Backend::has_resident() const {
    const ferrox_backend& b = *raw_;
    return callable(b, b.buffer_alloc) && callable(b, b.buffer_free) &&
           callable(b, b.buffer_upload) && callable(b, b.buffer_download) &&
           callable(b, b.project) && callable(b, b.rms_norm) && callable(b, b.rope) &&
           callable(b, b.add) && callable(b, b.glu) && callable(b, b.convert) &&
           callable(b, b.get_rows) && callable(b, b.attention_resident);
}

Expected<ferrox_buffer*> Backend::buffer_alloc(uint64_t bytes) {
    ferrox_buffer* buffer = nullptr;
    auto r = call_entry(*raw_, name_, "buffer_alloc", raw_->buffer_alloc, bytes, &buffer);
    if (!r) return r.error();
    if (!buffer) return make_error("{} backend: buffer_alloc returned no handle", name_);
    return buffer;
}

void Backend::buffer_free(ferrox_buffer* buffer) {
    if (buffer && callable(*raw_, raw_->buffer_free)) raw_->buffer_free(raw_, buffer);
}

Expected<void> Backend::upload(ferrox_buffer* buffer, uint64_t offset, const void* src,
                               uint64_t bytes) {
    return call_entry(*raw_, name_, "buffer_upload", raw_->buffer_upload, buffer, offset, src,
                      bytes);
}

Expected<void> Backend::download(const ferrox_buffer* buffer, uint64_t offset, void* dst,
                                 uint64_t bytes) {
    return call_entry(*raw_, name_, "buffer_download", raw_->buffer_download, buffer, offset, dst,
                      bytes);
}

Expected<void> Backend::project(const ferrox_weight* weight, ferrox_tensor x, uint64_t n,
                                ferrox_tensor y) {
    return call_entry(*raw_, name_, "project", raw_->project, weight, x, n, y);
}

Expected<void> Backend::rms_norm(ferrox_tensor x, ferrox_tensor gamma, uint64_t rows, uint32_t dim,
                                 float eps, ferrox_tensor y) {
    return call_entry(*raw_, name_, "rms_norm", raw_->rms_norm, x, gamma, rows, dim, eps, y);
}

Expected<void> Backend::rope(ferrox_tensor x, ferrox_tensor cos, ferrox_tensor sin, uint32_t n_pos,
                             uint32_t n_heads, uint32_t head_dim, bool neox) {
    return call_entry(*raw_, name_, "rope", raw_->rope, x, cos, sin, n_pos, n_heads, head_dim,
                      neox ? 1u : 0u);
}

Expected<void> Backend::add(ferrox_tensor dst, ferrox_tensor src, uint64_t rows, uint32_t dim,
                            uint64_t src_stride, float alpha) {
    return call_entry(*raw_, name_, "add", raw_->add, dst, src, rows, dim, src_stride, alpha);
}

Expected<void> Backend::glu(ferrox_glu_kind kind, ferrox_tensor gate, ferrox_tensor up,
                            uint64_t count) {
    return call_entry(*raw_, name_, "glu", raw_->glu, kind, gate, up, count);
}

Expected<void> Backend::convert(ferrox_tensor src, ferrox_tensor dst, ferrox_kind dst_kind,
                                uint64_t count) {
    return call_entry(*raw_, name_, "convert", raw_->convert, src, dst, dst_kind, count);
}

Expected<void> Backend::get_rows(const ferrox_weight* weight, const int32_t* ids, uint64_t n,
                                 float scale, ferrox_tensor out) {
    return call_entry(*raw_, name_, "get_rows", raw_->get_rows, weight, ids, n, scale, out);
}

Expected<void> Backend::attention_resident(const ferrox_attention_desc& desc, ferrox_tensor q,
                                           ferrox_tensor keys, ferrox_tensor values,
                                           ferrox_tensor out) {
    return call_entry(*raw_, name_, "attention_resident", raw_->attention_resident, &desc, q, keys,
                      values, out);
}

bool Backend::has_add_rms_norm() const { return callable(*raw_, raw_->add_rms_norm); }

Expected<void> Backend::add_rms_norm(ferrox_tensor dst, ferrox_tensor src, uint64_t src_stride,
                                     float alpha, ferrox_tensor gamma, uint64_t rows, uint32_t dim,
                                     float eps, ferrox_tensor y) {
    return call_entry(*raw_, name_, "add_rms_norm", raw_->add_rms_norm, dst, src, src_stride, alpha,
                      gamma, rows, dim, eps, y);
}

bool Backend::has_attention_cells() const { return callable(*raw_, raw_->attention_cells); }

Expected<void> Backend::attention_cells(const ferrox_attention_cells_desc& desc, ferrox_tensor q,
                                        ferrox_tensor keys, ferrox_tensor values,
                                        ferrox_tensor cell_index, ferrox_tensor spans,
                                        ferrox_tensor out) {
    return call_entry(*raw_, name_, "attention_cells", raw_->attention_cells, &desc, q, keys,
                      values, cell_index, spans, out);
}

bool Backend::takes_attention_softcap() const { return FERROX_ABI_MINOR(raw_->abi_version) >= 4; }
bool Backend::takes_attention_sinks() const { return FERROX_ABI_MINOR(raw_->abi_version) >= 5; }
bool Backend::takes_attention_lookahead() const { return FERROX_ABI_MINOR(raw_->abi_version) >= 7; }

KernelChoice Backend::attention_kernel(ferrox_kind key_kind, ferrox_kind value_kind) const {
    if (key_kind == value_kind) return kernel_for(FERROX_OP_ATTENTION, key_kind);
    if (!callable(*raw_, raw_->attention_kinds))
        return {{},
                FERROX_ABI_MINOR(raw_->abi_version) < 8
                    ? "its plugin predates ABI 1.8: K and V of different kinds cannot be told"
                    : "no attention_kinds entry: K and V of one kind only"};
    ferrox_kernel_info info{};
    info.struct_size = sizeof info;
    info.abi_version = FERROX_ABI_VERSION;
    raw_->attention_kinds(raw_, key_kind, value_kind, &info);
    KernelChoice choice;
    if (info.kernel) choice.kernel = info.kernel;
    if (!info.kernel && info.by_design) choice.by_design = info.by_design;
    return choice;
}

std::string Backend::abi_version_text() const {
    return fmt::format("{}.{}", FERROX_ABI_MAJOR(raw_->abi_version),
                       FERROX_ABI_MINOR(raw_->abi_version));
}

}  // namespace ferrox
