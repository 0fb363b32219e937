// A model opened for the commands that run one (run, inspect, logits): the
// configuration and plugins, then the GGUF file and the loaded model on top.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "ferrox/dispatch.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/model.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "session.h"

namespace ferrox::cli {

// A loaded model with everything it borrows (file, dispatcher, registry), each
// on the heap so the references the model holds survive moves.
struct ModelSession {
    Session session;
    std::unique_ptr<KernelRegistry> registry;
    std::unique_ptr<Dispatcher> dispatcher;
    std::unique_ptr<gguf::File> file;
    // Built from the file before any weight is bound, so that a tokenizer
    // ferrox refuses stops the load before the weights cost anything.
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<model::Model> model;
};

// What every command that loads a model lets the user choose.
struct ModelChoices {
    unsigned threads = 0;                   // > 0 overrides cpu.threads
    uint32_t context = 0;                   // 0: min(4096, training context)
    std::string kv_type = "f32";            // the KV cache's element kind: f32 or f16
    std::string resident = "auto";          // auto | off: may the forward pass live on a device
    bool special = false;                   // --special: special-token text in the prompt is parsed
    model::StepProfile* profile = nullptr;  // set by --profile: Model::forward's ops are timed
    // Sequences one context will hold (serve --parallel, batched-bench -npl):
    // a resident backend that can hold only one keeps the model in host memory.
    uint32_t sequences = 1;
};

// Registers -t/--threads, -c/--ctx-size, --kv-type, --resident and --special on `cmd`.
void add_model_choices(CLI::App& cmd, ModelChoices& choices);

Expected<ModelSession> open_model(const CommonOptions& common, const std::string& path,
                                  const ModelChoices& choices);

}  // namespace ferrox::cli
