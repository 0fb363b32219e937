// Subcommands: each registers its flags on the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "session.h"

namespace ferrox::cli {

// A registered subcommand and what to run (returning the exit code) when chosen.
struct Command {
    CLI::App* app;
    std::function<int()> run;
};

Command add_backends_command(CLI::App& app, CommonOptions& common);
Command add_bench_command(CLI::App& app, CommonOptions& common);
Command add_batched_bench_command(CLI::App& app, CommonOptions& common);
Command add_run_command(CLI::App& app, CommonOptions& common);
Command add_inspect_command(CLI::App& app, CommonOptions& common);
Command add_logits_command(CLI::App& app, CommonOptions& common);
Command add_chat_command(CLI::App& app, CommonOptions& common);
Command add_serve_command(CLI::App& app, CommonOptions& common);
Command add_architectures_command(CLI::App& app, CommonOptions& common);
Command add_pull_command(CLI::App& app, CommonOptions& common);
Command add_models_command(CLI::App& app, CommonOptions& common);
Command add_embed_command(CLI::App& app, CommonOptions& common);

}  // namespace ferrox::cli
