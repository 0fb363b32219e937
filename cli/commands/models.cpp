// `ferrox models`: what the model store holds (list), one model's files and
// header (show REF), and removing one (rm REF). Never touches the network.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands/commands.h"
#include "ferrox/gguf/file.h"
#include "model_reference.h"
#include "output.h"

namespace ferrox::cli {
namespace {

struct ModelsOptions {
    std::string ref;  // show / rm
    bool json = false;
};

// One stored model per entry: a split set is one, named by its first shard.
struct ListedModel {
    std::string ref;
    std::filesystem::path path;
    uint64_t bytes = 0;
    size_t files = 0;
    std::string sha256;  // the first file's
};

std::vector<ListedModel> stored_models(const hub::ModelStore& store) {
    std::map<std::string, ListedModel> models;
    for (const hub::StoredFile& f : store.list()) {
        const auto split = hub::parse_split_name(f.file);
        const std::string first = split ? hub::split_set(*split).front() : f.file;
        ListedModel& m = models[fmt::format("hf://{}/{}/{}", f.owner, f.repo, first)];
        m.ref = fmt::format("hf://{}/{}/{}", f.owner, f.repo, first);
        m.bytes += f.bytes;
        ++m.files;
        if (f.file == first) {
            m.path = f.path;
            m.sha256 = f.sha256;
        }
    }
    std::vector<ListedModel> out;
    for (auto& [key, m] : models) out.push_back(std::move(m));
    return out;
}

int list(const hub::ModelStore& store, bool json) {
    const std::vector<ListedModel> models = stored_models(store);
    if (json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const ListedModel& m : models)
            rows.push_back({{"ref", m.ref},
                            {"path", m.path.string()},
                            {"bytes", m.bytes},
                            {"files", m.files},
                            {"sha256", m.sha256}});
        print_json({{"store", store.root().string()}, {"models", rows}});
        return kExitOk;
    }
    std::cout << fmt::format("{:<64} {:>10} {:>5}  {}\n", "REF", "MiB", "FILES", "SHA256");
    for (const ListedModel& m : models)
        std::cout << fmt::format("{:<64} {:>10.1f} {:>5}  {}\n", shown(m.ref),
                                 static_cast<double>(m.bytes) / (1024.0 * 1024.0), m.files,
                                 m.sha256.substr(0, 12));
    std::fprintf(stderr, "models: %zu in %s\n", models.size(),
                 shown(store.root().string()).c_str());
    return kExitOk;
}

int show(const hub::ModelStore& store, const hub::PullResult& found, bool json) {
    nlohmann::json doc = pulled_json(found, store);
    auto file = gguf::File::open(found.model_path());
    if (!file) {
        logger().error("models show: {}", file.error().message());
        return kExitBadInput;
    }
    doc["gguf_version"] = file->version();
    const auto text = [&](std::string_view key) {
        auto value = file->get_string_or(key, "");
        return value ? *value : std::string();
    };
    doc["architecture"] = text("general.architecture");
    doc["name"] = text("general.name");
    doc["tensors"] = file->tensors().size();
    if (json) {
        print_json(std::move(doc));
        return kExitOk;
    }
    std::cout << fmt::format(
        "ref           {}\narchitecture  {}\nname          {}\ntensors       "
        "{}\nGGUF version  {}\n",
        shown(found.ref.text()), shown(doc["architecture"].get<std::string>()),
        shown(doc["name"].get<std::string>()), file->tensors().size(), file->version());
    for (const hub::PulledFile& f : found.files)
        std::cout << fmt::format("file          {} ({} bytes, sha256 {})\n", shown(f.path.string()),
                                 f.bytes, f.sha256.empty() ? "unknown" : f.sha256);
    return kExitOk;
}

int run_models(const CommonOptions& common, const ModelsOptions& o, const CLI::App& show_cmd,
               const CLI::App& rm_cmd) {
    if (auto config = load_session_config(common); !config) {  // the log level
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    auto store = open_model_store(false);
    if (!store) {
        logger().error("models: {}", store.error().message());
        return kExitBadInput;
    }
    if (!show_cmd.parsed() && !rm_cmd.parsed()) return list(*store, o.json);
    auto ref = hub::parse_model_ref(o.ref);
    if (!ref) return usage_error("REF", "{}", ref.error().message());
    hub::PullFailure why = hub::PullFailure::None;
    auto found = rm_cmd.parsed() ? hub::remove_from_store(*ref, *store, &why)
                                 : hub::find_in_store(*ref, *store, &why);
    if (!found) {
        logger().error("models: {}", found.error().message());
        return exit_status(why);
    }
    if (show_cmd.parsed()) return show(*store, *found, o.json);
    if (o.json)
        print_json(pulled_json(*found, *store));
    else
        for (const hub::PulledFile& f : found->files)
            std::cout << "removed " << shown(f.path.string()) << "\n";
    return kExitOk;
}

}  // namespace

Command add_models_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "models",
        "The model store: list what `ferrox pull` stored, `show REF` (files, SHA-256, GGUF "
        "header), `rm REF`; never touches the network");
    auto o = std::make_shared<ModelsOptions>();
    cmd->add_flag("--json", o->json,
                  "Print JSON: {store, models: [{ref, path, bytes, files, "
                  "sha256}]} (show/rm: as ferrox pull --json)");
    cmd->require_subcommand(0, 1);
    cmd->fallthrough();
    auto* show_cmd = cmd->add_subcommand("show", "A stored model's files and header");
    show_cmd->add_option("REF", o->ref, "hf://OWNER/REPO/FILE.gguf or OWNER/REPO:QUANT")
        ->required();
    auto* rm_cmd = cmd->add_subcommand("rm", "Delete a stored model's files");
    rm_cmd->add_option("REF", o->ref, "hf://OWNER/REPO/FILE.gguf or OWNER/REPO:QUANT")->required();
    return {cmd, [o, &common, show_cmd, rm_cmd]() {
                return run_models(common, *o, *show_cmd, *rm_cmd);
            }};
}

}  // namespace ferrox::cli
