// What loading a model produces (Model::Impl: hyper-parameters, bound
// weights, residency, the constants the ops read) and the one memory plan
// that both Model::load and Context::create make.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decoder.h"
#include "ferrox/model/capacity.h"
#include "ferrox/model/model.h"
#include "ferrox/model/rope_tables.h"
#include "steps.h"
#include "weights.h"

namespace ferrox::model {

uint64_t next_model_instance();

struct Model::Impl {
    const gguf::File& file;
    Dispatcher& dispatcher;
    Hparams hp;
    CapacityPlan plan, device_plan;
    Residency residency;
    ModelWeights w;
    // token_embd as a matrix for a resident backend's get_rows (w.output when tied).
    std::optional<WeightMatrix> embedding_matrix;
    uint32_t context = 0, max_batch = 0;
    KvKinds kv_kinds;                        // the keys' and the values' cache kinds
    StepProfile* options_profile = nullptr;  // for forward()'s own context
    // Holds the constants below (device buffers when resident); contexts
    // make their own Steps for their cache and scratch.
    std::unique_ptr<Steps> steps;
    std::vector<LayerConstants> consts;
    Act output_norm;
    RopeSpec rope[2];  // [global, local]: how a position becomes angles

    // Unique among the models this process loaded: a recurrent-state
    // checkpoint names it, so none is ever applied to another model.
    const uint64_t instance = next_model_instance();

    Impl(const gguf::File& f, Dispatcher& d) : file(f), dispatcher(d) {}

    // Bytes of `elements` cache elements of `kind` (a whole number of blocks:
    // check_kv_cache_shape refused heads that are not).
    static uint64_t kv_row_bytes(ferrox_kind kind, uint64_t elements);
    // token_embd as a matrix, when output.weight is its own tensor (tied: w.output is it).
    Expected<void> bind_embedding_matrix();
    const WeightMatrix& embedding() const;
    std::unique_ptr<Steps> make_steps(uint32_t n_ctx) const;
    // A context's activation region, in floats (see load.cpp).
    uint64_t region_floats(uint32_t n_batch, uint32_t logits_rows) const;
    // A capacity plan's KV-cache terms for `cells` cells.
    CapacityInputs kv_terms(uint32_t cells) const;
    Expected<void> allocate_constants();
    // How a position becomes angles, for global and local layers.
    void set_rope();
    // Every matrix the forward pass multiplies by, once each.
    std::vector<const WeightMatrix*> matrices() const;
};

// What a memory plan covers: a KV cache of `cells` cells, scratch for
// batches of `n_batch` rows and `logits_rows` rows of logits kept between
// decodes; with `weights`, the weights and the constants too (the load-time
// plan). `available_bytes` (named `available_what`) is the host memory to
// plan against; 0: MemAvailable now. A resident model is planned on both
// sides: the device's against its free memory, the host's for what stays there.
struct MemoryDemand {
    std::string subject;  // empty: the plan's own
    uint32_t cells = 0, n_batch = 0, logits_rows = 0;
    uint32_t sequences = 1;  // each holds a recurrent state where the model has one
    bool weights = false;
    uint64_t available_bytes = 0;
    std::string available_what;
};

struct MemoryPlans {
    CapacityPlan host, device;  // device: all zero unless resident
};

// The one capacity plan: load's (the model and its own context) and
// Context::create's (a context added to a loaded model).
Expected<MemoryPlans> plan_memory(const Model::Impl& m, const MemoryDemand& demand);

}  // namespace ferrox::model
