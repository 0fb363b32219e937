// Where one forward pass's activations live, and the ops that reach them.
//
// The decoder (decoder.cpp) is written once against Steps. HostSteps keeps
// activations and the KV cache in host memory and runs weight products and
// attention through the Dispatcher's 1.0/1.1 entries (any backend order, host
// fallbacks). ResidentSteps keeps all of them in the first backend's buffers
// (ABI 1.2), so a decode step moves only token ids and RoPE angles in and
// logits out; every op it issues is recorded in the kernel registry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ferrox/backend_abi.h"
#include "ferrox/dispatch.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/step_profile.h"
#include "ferrox/weight_matrix.h"

namespace ferrox::model {

struct PassTrace;

// A place for values: a host address (HostSteps) or a tensor in a backend
// buffer (ResidentSteps). Offsets move both, so the decoder need not know which.
struct Act {
    std::byte* host = nullptr;
    ferrox_tensor dev{nullptr, 0};

    Act at_bytes(uint64_t bytes) const {
        Act a = *this;
        if (a.host) a.host += bytes;
        a.dev.offset += bytes;
        return a;
    }
    Act at(uint64_t floats) const { return at_bytes(floats * sizeof(float)); }
    float* f32() const { return reinterpret_cast<float*>(host); }
};

// Whether the ABI's rope entry can apply a rotation of the first n_rot of
// head_dim dimensions. It takes no n_rot and pairs NeoX element i with
// i + head_dim / 2, so a rotated prefix works for adjacent pairs only: the
// angle tables give the pairs past n_rot / 2 cos 1 and sin 0, which leaves
// them exactly as they are. A NeoX prefix (pairs i, i + n_rot / 2) would need
// an n_rot argument in the ABI; until then such a model decodes on the host.
inline bool rope_entry_rotates(uint32_t n_rot, uint32_t head_dim, RopeStyle style) {
    return n_rot == head_dim || style == RopeStyle::Normal;
}

// One one-row weight product of Steps::project_many.
struct Projection {
    const WeightMatrix* w = nullptr;
    std::string_view role;
    Act x, y;
};

class Steps {
  public:
    virtual ~Steps() = default;
    virtual bool resident() const = 0;

    // Memory for `bytes` (activations, a KV cache), left uninitialised.
    virtual Expected<Act> allocate(uint64_t bytes) = 0;
    // A constant vector (a norm weight, a bias) the ops may read for the
    // model's lifetime; `values` must outlive the Steps (HostSteps uses it in place).
    virtual Expected<Act> constant(std::span<const float> values) = 0;

    virtual Expected<void> upload(std::span<const float> src, Act dst) = 0;
    virtual Expected<void> download(Act src, std::span<float> dst) = 0;

    // out[i] = scale * row ids[i] of the token embedding (ids already checked).
    virtual Expected<void> embed(std::span<const int32_t> ids, float scale, Act out) = 0;
    virtual Expected<void> project(const WeightMatrix& w, std::string_view role, Act x, uint32_t n,
                                   Act y) = 0;
    // Independent one-row products, each y to project(w, role, x, 1, y)'s
    // bits (a token's expert products): on the host in one backend call
    // where it has the entry (ABI 1.10 matvec_batch), so its threads wake
    // once for all of them; recorded together under `batch_role`. This
    // default issues them one project() each, each recorded as project()
    // records it (resident decoding: they queue on the backend's stream in
    // order, with no thread pool to wake, and every op stays predicted).
    virtual Expected<void> project_many(std::span<const Projection> products,
                                        std::string_view batch_role) {
        (void)batch_role;
        for (const Projection& p : products)
            if (auto r = project(*p.w, p.role, p.x, 1, p.y); !r) return r;
        return {};
    }
    virtual Expected<void> rms_norm(std::string_view role, Act x, Act gamma, uint64_t rows,
                                    uint32_t dim, float eps, Act y) = 0;
    // x = [n_pos][n_heads][head_dim]: the first n_rot dimensions of each head
    // rotate by the angles cos, sin = [n_pos][head_dim / 2] (NeoX pairs i with
    // i + n_rot / 2), the rest pass through.
    virtual Expected<void> rope(Act x, Act cos, Act sin, uint32_t n_pos, uint32_t n_heads,
                                uint32_t head_dim, uint32_t n_rot, RopeStyle style) = 0;
    // dst[r][i] += alpha * src[r * src_stride + i]; stride 0 broadcasts a row.
    virtual Expected<void> add(std::string_view role, Act dst, Act src, uint64_t rows, uint32_t dim,
                               uint64_t src_stride, float alpha) = 0;
    // add(dst, src, ...) then y = rms_norm(dst) * gamma, recorded under the
    // norm's role: one pass where the backend fuses them (each layer's
    // residual add and the next norm), two calls otherwise.
    virtual Expected<void> add_rms_norm(std::string_view norm_role, Act dst, Act src,
                                        uint64_t src_stride, float alpha, Act gamma, uint64_t rows,
                                        uint32_t dim, float eps, Act y) = 0;
    virtual Expected<void> glu(FfnActivation act, Act gate, Act up, uint64_t count) = 0;
    // `count` f32 values stored into a cache of `kind` at `cache`.
    virtual Expected<void> store_kv(Act rows, Act cache, ferrox_kind kind, uint64_t count) = 0;
    // desc's pointers are filled in by the implementation from the Acts.
    // desc.softcap != 0 (gemma2) caps the scores, `sinks` (gpt-oss: the
    // layer's n_head sink logits, or null) join each head's softmax: only
    // plugins of ABI 1.4 and 1.5 can be told (attention_refusal); the core's
    // own loop runs such attention otherwise.
    virtual Expected<void> attention(ferrox_attention_desc desc, Act q, Act keys, Act values,
                                     Act out, const Act* sinks) = 0;

    // The gated delta rule (ABI 1.10) over host memory, whichever steps hold
    // the activations: the recurrent state lives in the context, so the
    // recurrent block works on host copies of the rows. dispatch_delta_net
    // runs it; tracing steps note it for the probe.
    virtual Expected<void> delta_net(const ferrox_delta_net_desc& desc) = 0;
    // What delta_net() runs (a kernel's name or the core's fallback), for the profile.
    virtual std::string delta_net_runner() const = 0;

    // ABI 1.3 (resident, on a backend with attention_cells): every row of a
    // batch attends in one call over the cells its span names, whatever
    // sequence it belongs to. Others say false and never get the calls below.
    virtual bool attends_over_cells() const { return false; }
    // uint32 values (cell lists, spans) into `dst`.
    virtual Expected<void> upload_words(std::span<const uint32_t>, Act) {
        return make_error("these steps attend without cell lists");
    }
    virtual Expected<void> attention_cells(ferrox_attention_cells_desc, Act, Act, Act, Act, Act,
                                           Act, const Act*) {
        return make_error("these steps attend without cell lists");
    }
};

// The delta rule through the dispatcher: the first backend with the entry,
// else the core's loop over the heads (delta_net.cpp).
Expected<void> dispatch_delta_net(Dispatcher& dispatcher, const ferrox_delta_net_desc& desc);

// `embedding`: token_embd; `embedding_matrix`: the same bytes as a matrix
// (resident get_rows needs a prepared weight), which must outlive the Steps.
std::unique_ptr<Steps> make_host_steps(Dispatcher& dispatcher, const gguf::Tensor& embedding,
                                       uint32_t n_embd, uint32_t max_context);
std::unique_ptr<Steps> make_resident_steps(Dispatcher& dispatcher,
                                           const WeightMatrix& embedding_matrix);
// ResidentSteps that run nothing and allocate nothing: each op they would
// issue goes into `trace` (trace_pass).
std::unique_ptr<Steps> make_tracing_steps(Dispatcher& dispatcher,
                                          const WeightMatrix& embedding_matrix, PassTrace& trace);
// `inner` with every op timed into `profile` (which must outlive the result).
std::unique_ptr<Steps> make_profiling_steps(std::unique_ptr<Steps> inner, StepProfile& profile);

}  // namespace ferrox::model
