// The flags every command that opens a model shares, and the one way the
// CLI opens one: Engine::open (ferrox/engine.h) with the session's
// configuration. run and logits open through ferrox.h (api_model.h), which
// is the same Engine::open behind the C API.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferrox/engine.h"
#include "ferrox/expected.h"
#include "ferrox/model/step_profile.h"
#include "session.h"

namespace ferrox::cli {

// What every command that loads a model lets the user choose. 0 leaves a
// number to the engine's rule (ferrox/model/defaults.h).
struct ModelChoices {
    unsigned threads = 0;         // > 0 overrides cpu.threads
    uint32_t context = 0;         // KV cells; 0: sequences x min(4096, training)
    std::string kv_type = "f32";  // the KV cache's kind (model::kKvCacheTypeNames)
    // -ctk / -ctv (llama.cpp's spelling): K's and V's kind, which may differ
    // (q8_0 keys over f16 values); empty: kv_type's.
    std::string kv_type_k, kv_type_v;
    std::string resident = "auto";          // auto | off: may the forward pass live on a device
    bool special = false;                   // --special: special-token text in the prompt is parsed
    model::StepProfile* profile = nullptr;  // set by --profile: Model::forward's ops are timed
    // Sequences one context will hold (serve --parallel, batched-bench -npl):
    // a resident backend that can hold only one keeps the model in host memory.
    uint32_t sequences = 1;
    uint32_t batch = 0;       // tokens per decode; 0: 256; never more than the context
    bool embeddings = false;  // an embedding model is accepted (embed, serve), not refused
    // Some of backends.order's backends, in the order this model opens them
    // (a server.models entry's `backends`); empty: backends.order.
    std::vector<std::string> backend_order;
};

// -t/--threads in cpu.threads' range (0 ... 1024), for every command that has it.
void add_threads_flag(CLI::App& cmd, unsigned& threads);

// Registers -t/--threads, -c/--ctx-size, --kv-type, -ctk/--cache-type-k,
// -ctv/--cache-type-v, --resident and --special on `cmd`.
void add_model_choices(CLI::App& cmd, ModelChoices& choices);

// --kv-type's choices (model::kKvCacheTypeNames), for every command that has it.
CLI::Validator kv_type_choices();

// The K and V kinds the choices ask for: -ctk / -ctv each, else --kv-type.
model::KvKinds kv_kinds_of(const ModelChoices& choices);

// Engine::open with --config (its log level applied), --plugin-dir and the
// choices; the load's progress logged a tenth at a time.
// `why` (may be NULL) says which step refused (exit_status(why)).
Expected<std::unique_ptr<Engine>> open_engine(const CommonOptions& common, const std::string& path,
                                              const ModelChoices& choices,
                                              OpenFailure* why = nullptr);

}  // namespace ferrox::cli
