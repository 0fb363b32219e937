// Subcommands: each registers its flags on the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/model.h"
#include "session.h"

namespace ferrox::cli {

// A registered subcommand and what to run (returning the exit code) when chosen.
struct Command {
    CLI::App* app;
    std::function<int()> run;
};

Command add_backends_command(CLI::App& app, CommonOptions& common);
Command add_bench_command(CLI::App& app, CommonOptions& common);
Command add_run_command(CLI::App& app, CommonOptions& common);
Command add_inspect_command(CLI::App& app, CommonOptions& common);
Command add_logits_command(CLI::App& app, CommonOptions& common);

// A loaded model with everything it borrows (file, dispatcher, registry), each
// on the heap so the references the model holds survive moves. run.cpp.
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
