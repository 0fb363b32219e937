// `ferrox pull REF`: a model reference's files into the model store, resumed,
// verified against the hub's SHA-256, header-checked (hub/, docs/operations.md).
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands/commands.h"
#include "model_reference.h"
#include "output.h"

namespace ferrox::cli {

namespace {

struct PullCommandOptions {
    std::string ref;
    ModelSourceFlags flags;
    bool json = false;
};

int run_pull(const CommonOptions& common, const PullCommandOptions& o) {
    if (auto config = load_session_config(common); !config) {  // the log level
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    auto ref = hub::parse_model_ref(o.ref);
    if (!ref) return usage_error("REF", "{}", ref.error().message());
    auto store = open_model_store(true);
    if (!store) {
        logger().error("pull: {}", store.error().message());
        return kExitBadInput;
    }
    int status = kExitOk;
    auto pulled = pull_with_progress(*ref, *store, o.flags, &status);
    if (!pulled) return status;
    if (o.json) {
        print_json(pulled_json(*pulled, *store));
        return kExitOk;
    }
    uint64_t fetched = 0;
    for (const hub::PulledFile& f : pulled->files) fetched += f.downloaded;
    std::cout << shown(pulled->model_path().string()) << "\n";
    std::fprintf(
        stderr, "pull: %s: %zu file(s), %s, sha256 verified\n", shown(pulled->ref.text()).c_str(),
        pulled->files.size(),
        fetched ? fmt::format("{} bytes fetched", fetched).c_str() : "already in the store");
    return kExitOk;
}

}  // namespace

Command add_pull_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "pull",
        "Download a model from a Hugging Face hub into the model store ($FERROX_MODELS, else "
        "$XDG_CACHE_HOME/ferrox/models, else ~/.cache/ferrox/models): resumed from a .part "
        "file, kept only when its SHA-256 is the hub's and it reads as GGUF. Hub: $HF_ENDPOINT "
        "(default https://huggingface.co), token $HF_TOKEN (sent to that host only). Prints the "
        "model's path (docs/operations.md)");
    auto o = std::make_shared<PullCommandOptions>();
    cmd->add_option("REF", o->ref,
                    "hf://OWNER/REPO/FILE.gguf (a split file's whole set), OWNER/REPO:QUANT (the "
                    "repo's .gguf whose name holds QUANT, any case) or OWNER/REPO")
        ->required();
    cmd->add_flag("--quiet,-q", o->flags.quiet,
                  "No progress bar (there is none when stderr is "
                  "not a terminal either)");
    cmd->add_flag("--offline", o->flags.offline,
                  "Never touch the network: succeed only when the model is in the store (also "
                  "FERROX_OFFLINE=1)");
    cmd->add_flag("--json", o->json,
                  "Print one JSON object: {ref, repo, store, model, bytes, files: [{name, path, "
                  "bytes, sha256, cached, resumed_from, downloaded}]}");
    return {cmd, [o, &common]() { return run_pull(common, *o); }};
}

}  // namespace ferrox::cli
