#include "model_reference.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "exit_status.h"
#include "output.h"
#include "progress_bar.h"

namespace ferrox::cli {

void add_model_source_flags(CLI::App& cmd, ModelSourceFlags& flags) {
    cmd.add_flag("--pull", flags.pull,
                 "A model reference (hf://OWNER/REPO/FILE.gguf, OWNER/REPO:QUANT) not yet in the "
                 "model store is downloaded first (ferrox pull); without it only stored models "
                 "are used and nothing touches the network");
    cmd.add_flag("--offline", flags.offline,
                 "Never touch the network, --pull included (also FERROX_OFFLINE=1)");
}

Expected<hub::ModelStore> open_model_store(bool create) {
    auto root = hub::ModelStore::default_root();
    if (!root) return root.error();
    return hub::ModelStore::open(*root, create);
}

Expected<hub::PullResult> pull_with_progress(const hub::ModelRef& ref, const hub::ModelStore& store,
                                             const ModelSourceFlags& flags, int* status) {
    ProgressBar bar(!flags.quiet);
    hub::PullOptions options;
    options.hub = hub::HubSettings::from_environment();
    options.offline = flags.offline || hub::offline_from_environment();
    options.on_progress = [&bar](const std::string& file, uint64_t done, uint64_t total) {
        bar.update(file, done, total);
    };
    options.on_file_done = [&bar](const std::string&) { bar.finish(); };
    hub::PullFailure why = hub::PullFailure::None;
    auto pulled = hub::pull(ref, store, options, &why);
    bar.finish();
    *status = pulled ? kExitOk : exit_status(why);
    if (!pulled) logger().error("pull: {}", pulled.error().message());
    return pulled;
}

int resolve_model_argument(std::string& model, const ModelSourceFlags& flags, std::string_view flag,
                           const std::filesystem::path& relative_to) {
    std::error_code ec;
    if (!hub::is_reference_syntax(model) ||
        (!model.starts_with("hf://") && std::filesystem::exists(relative_to / model, ec)))
        return kExitOk;  // a path, unchanged
    auto ref = hub::parse_model_ref(model);
    if (!ref) return usage_error(flag, "{}", ref.error().message());
    auto store = open_model_store(flags.pull);
    if (!store) return usage_error(flag, "{}", store.error().message());
    hub::PullFailure why = hub::PullFailure::None;
    auto found = hub::find_in_store(*ref, *store, &why);
    if (!found && flags.pull && !flags.offline && !hub::offline_from_environment()) {
        int status = kExitOk;
        found = pull_with_progress(*ref, *store, flags, &status);
        if (!found) return status;
    }
    if (!found) {
        logger().error("{}: {}{}", flag, found.error().message(),
                       flags.pull ? " (offline)" : ", or add --pull");
        return exit_status(why);
    }
    logger().debug("{}: {} is {}", flag, ref->text(), shown(found->model_path().string()));
    model = found->model_path().string();
    return kExitOk;
}

nlohmann::json pulled_json(const hub::PullResult& result, const hub::ModelStore& store) {
    nlohmann::json files = nlohmann::json::array();
    uint64_t bytes = 0;
    for (const hub::PulledFile& f : result.files) {
        files.push_back({{"name", f.name},
                         {"path", f.path.string()},
                         {"bytes", f.bytes},
                         {"sha256", f.sha256},
                         {"cached", f.cached},
                         {"resumed_from", f.resumed_from},
                         {"downloaded", f.downloaded}});
        bytes += f.bytes;
    }
    return {{"ref", result.ref.text()},
            {"repo", result.ref.repo_id()},
            {"store", store.root().string()},
            {"model", result.model_path().string()},
            {"bytes", bytes},
            {"files", files}};
}

}  // namespace ferrox::cli
