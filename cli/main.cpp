// ferrox: command-line entry. Parses flags, runs one subcommand, and turns
// errors into a message on stderr and an exit code -- once, here.
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "ferrox/config_settings.h"
#include "ferrox/gguf/truncation_guard.h"
#include "ferrox/log.h"
#include "output.h"
#include "usage_errors.h"

int main(int argc, char** argv) {
    using namespace ferrox::cli;
    ignore_sigpipe();  // a closed stdout is an EPIPE reported by finish_stdout
    ferrox::gguf::install_truncation_guard();  // a model truncated under us: named, exit 1
    CLI::App app{"ferrox: run GGUF language models on CPU and GPU backend plugins"};
    app.set_version_flag("--version", std::string("ferrox ") + FERROX_VERSION);
    app.require_subcommand(1);
    app.fallthrough();
    app.footer(
        "Exit status: 0 success; 1 the work failed (a required backend, the weights' load, a "
        "decode, or writing the output); 2 a usage error, naming the flag (a bad, missing or "
        "conflicting flag, or a --config, model, prompt or template file that is absent or "
        "malformed, a model reference the hub or the store lacks, a token the hub refuses); 130 "
        "generation stopped by Ctrl-C. A download that breaks off or fails its SHA-256 is "
        "1.\nConfig lookup: "
        "--config, $FERROX_CONFIG, $XDG_CONFIG_HOME/ferrox/ferrox.yaml, "
        "/etc/ferrox/ferrox.yaml, built-in default.\nPlugin search: --plugin-dir, "
        "$FERROX_PLUGIN_PATH, plugins.paths, the install folder, <exe>/../lib/ferrox/plugins.");

    CommonOptions common;
    std::string config_path;
    app.add_option("--config", config_path, "Configuration file (YAML)");
    app.add_option("--plugin-dir", common.plugin_dirs,
                   "Folder to search for libferrox_<name>.so first (repeatable)")
        ->check(non_empty_folder_name("--plugin-dir"));
    // log.level's words and default come from its row of the settings table.
    const ferrox::ConfigSetting& level = *ferrox::find_config_setting("log", "level");
    app.add_option("--log-level", common.log_level,
                   fmt::format("{} (overrides log.level; default {})",
                               ferrox::config_setting_choices_text(level),
                               ferrox::config_setting_value(ferrox::Config{}, level)))
        ->check(
            CLI::IsMember(std::vector<std::string>(level.choices.begin(), level.choices.end())));
    const ferrox::ConfigSetting& format = *ferrox::find_config_setting("log", "format");
    app.add_option("--log-format", common.log_format,
                   fmt::format("{} (overrides log.format; default {})",
                               ferrox::config_setting_choices_text(format),
                               ferrox::config_setting_value(ferrox::Config{}, format)))
        ->check(
            CLI::IsMember(std::vector<std::string>(format.choices.begin(), format.choices.end())));

    const Command commands[] = {
        add_backends_command(app, common),      add_bench_command(app, common),
        add_batched_bench_command(app, common), add_run_command(app, common),
        add_inspect_command(app, common),       add_logits_command(app, common),
        add_chat_command(app, common),          add_serve_command(app, common),
        add_architectures_command(app, common), add_pull_command(app, common),
        add_models_command(app, common),        add_embed_command(app, common),
    };

    // llama-cli spells the system prompt -sys, and the KV cache kinds -ctk / -ctv;
    // CLI11 takes single-dash names of one letter only.
    std::vector<std::string> args(argv, argv + argc);
    for (std::string& a : args) {
        if (a == "-sys") a = "--sys";
        if (a == "-ctk") a = "--cache-type-k";
        if (a == "-ctv") a = "--cache-type-v";
    }

    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        if (report_unknown_subcommand(app, argc, argv)) return kExitBadInput;
        const int code = app.exit(e);
        return code == 0 ? kExitOk : kExitBadInput;
    }
    if (!config_path.empty()) common.config_path = config_path;

    for (const Command& command : commands)
        if (command.app->parsed()) {
            try {
                return finish_stdout(command.run());
            } catch (const std::exception& e) {
                ferrox::logger().error("{}", e.what());
                return finish_stdout(kExitFailure);
            }
        }
    return kExitBadInput;
}
