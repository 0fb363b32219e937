// A decoder-only language model over a mapped GGUF file: weights bound by
// name to borrowed WeightMatrix objects (zero-copy), every product through
// the Dispatcher. The model is read-only after load; KV caches and scratch
// belong to contexts (ferrox/model/context.h), several of which may share
// one model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/dispatch.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/capacity.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/kv_kinds.h"

namespace ferrox::model {

// Where a model's forward pass lives: in the first backend's buffers
// (resident decoding, ABI 1.2) or in host memory; `reason` says why not.
struct Residency {
    bool resident = false;
    std::string reason;
};

// Decides residency for this model and records what every op will use: the
// weight products and attention (host memory), or every op of the forward
// pass on the resident backend. The ops are those the decoder issues, found
// by running it over steps that only record (nothing computed or moved).
// Model::load and `ferrox inspect` both call it.
// `max_sequences` > 1: contexts will hold several sequences, which a resident
// backend without ABI 1.3's attention_cells cannot run (host memory, and why).
FERROX_API Expected<Residency> probe_model(const gguf::File& file, const Hparams& hp,
                                           Dispatcher& dispatcher, KvKinds kv_kinds,
                                           bool allow_resident = true, uint32_t max_sequences = 1);

class StepProfile;

// Whether a KV cache may hold `kind` (kKvCacheKinds, model/resident_ops.h);
// an error naming the kind and the ones allowed.
FERROX_API Expected<void> check_kv_cache_kind(ferrox_kind kind);

// Whether a model's heads fit caches of `kinds`: a block kind (Q8_0, Q4_0)
// of keys needs a key_length, of values a value_length, of whole blocks;
// an error naming the GGUF key, its value and the block size.
FERROX_API Expected<void> check_kv_cache_shape(KvKinds kinds, const Hparams& hp);

struct ModelOptions {
    uint32_t context = 4096;  // KV cache positions; 0: default_context (model/defaults.h)
    uint32_t batch = 256;     // positions per forward chunk; derived_batch (model/defaults.h)
    bool registry_strict = false;
    // The KV cache's element kinds, keys' and values' (they may differ):
    // F32 (exact), F16 (half the memory, as llama.cpp's default cache), Q8_0
    // or Q4_0 (ggml blocks of 32: 34 or 18 bytes per 32 elements).
    KvKinds kv_kinds;
    // Memory the capacity plan checks against; 0: MemAvailable.
    uint64_t available_bytes = 0;
    // Keep the forward pass on the first backend when it can (ABI 1.2);
    // false keeps activations in host memory whatever the backend.
    bool allow_resident = true;
    // The most sequences one context of this model will hold. Above 1, a
    // resident backend whose plugin predates ABI 1.3 (one sequence per
    // context) leaves the model in host memory, with the reason logged.
    uint32_t sequences = 1;
    // Called while weights move to a resident backend: done and total bytes.
    std::function<void(uint64_t, uint64_t)> on_upload;
    // Model::forward's own context times its ops into this profile (not
    // owned; must outlive the model): `ferrox run --profile`.
    StepProfile* profile = nullptr;
};

class Context;

class FERROX_API Model {
  public:
    // Reads hparams, plans capacity, binds and probes weights, enforces the registry.
    // `file` and `dispatcher` must outlive the model; `registry` is the
    // dispatcher's, sealed after the probe and checked against registry.strict.
    static Expected<std::unique_ptr<Model>> load(const gguf::File& file, Dispatcher& dispatcher,
                                                 KernelRegistry& registry,
                                                 const ModelOptions& options);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const Hparams& hparams() const;
    const CapacityPlan& capacity() const;
    const Residency& residency() const;
    // The device side of a resident model (weights, KV cache and scratch in
    // the backend's memory); all zero when the model is not resident.
    const CapacityPlan& device_capacity() const;
    uint32_t context() const;
    uint64_t vocab() const;
    // The KV cache of `cells` cells in the model's KV kind, as the capacity
    // plan counts it (wherever the cache lives).
    uint64_t kv_cache_bytes(uint32_t cells) const;

    // The options' context and batch: what Context::create defaults to.
    uint32_t max_batch() const;
    // True when a sequence carries a recurrent state (qwen35's Gated DeltaNet
    // layers) that cannot be rolled back: removing the tail of a sequence is
    // refused, so a caller that would trim one processes its tokens again
    // from position 0 instead.
    bool recurrent() const;

    // The single-sequence convenience over a context the model owns (made on
    // first use with ModelOptions' context and batch, one sequence): runs
    // `tokens` at positions [pos, pos + n), forgetting positions >= pos
    // first. `logits` may be empty (none), hold vocab floats (the last
    // position's) or n * vocab (every position's). Not for shared models:
    // it mutates that context; use a Context per thread instead.
    Expected<void> forward(std::span<const int32_t> tokens, uint32_t pos, std::span<float> logits);

    // Defined in core/src/model/load.h; named here so the pass tracer
    // (context.cpp) can make one.
    struct Impl;

  private:
    friend class Context;
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
    std::unique_ptr<Context> default_context_;
};

}  // namespace ferrox::model
