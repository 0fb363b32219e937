// A model opened for the commands that run one (run, inspect, logits): the
// configuration and plugins, then the GGUF file and the loaded model on top.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferrox/dispatch.h"
#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/model.h"
#include "session.h"

namespace ferrox::cli {

// A loaded model with everything it borrows (file, dispatcher, registry), each
// on the heap so the references the model holds survive moves.
struct ModelSession {
    Session session;
    std::unique_ptr<KernelRegistry> registry;
    std::unique_ptr<Dispatcher> dispatcher;
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<model::Model> model;
};

// `threads` > 0 overrides cpu.threads; `context` 0 takes min(4096, training context).
Expected<ModelSession> open_model(const CommonOptions& common, const std::string& path,
                                  unsigned threads, uint32_t context);

}  // namespace ferrox::cli
