#include "model_list.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "ferrox/escape.h"
#include "models_dir.h"

namespace fs = std::filesystem;

namespace ferrox::server {
namespace {

// "qwen3-8b.gguf" -> "qwen3-8b"; a name without .gguf stays whole.
std::string id_of_file(const fs::path& named) {
    return named.extension() == ".gguf" && !named.stem().empty() ? named.stem().string()
                                                                 : named.filename().string();
}

// The file an entry names: an absolute path as given, a relative one inside models_dir.
Expected<fs::path> entry_file(const ServedModelEntry& entry, const fs::path& models_dir,
                              std::string_view who) {
    const fs::path path(entry.path);
    if (path.is_absolute()) return path;
    if (models_dir.empty())
        return make_error(
            "{}: the path '{}' is relative, and a relative path names a file of models_dir: "
            "give an absolute path or set server.models_dir (--models-dir)",
            who, escape_text(entry.path));
    std::error_code ec;
    const fs::path dir = fs::canonical(models_dir, ec);
    if (ec)
        return make_error("{}: cannot resolve models_dir {}: {}", who,
                          escape_text(models_dir.string()), ec.message());
    const fs::path real = fs::weakly_canonical(dir / path, ec);
    if (ec || !path_inside(dir, real))
        return make_error("{}: the path '{}' leads outside models_dir {}", who,
                          escape_text(entry.path), escape_text(models_dir.string()));
    return dir / path;
}

}  // namespace

Expected<std::vector<ModelSpec>> served_model_specs(const ServerConfig& s) {
    std::vector<ModelSpec> specs;
    std::map<std::string, std::string> owner;  // id -> who took it, for the refusal
    const auto claim = [&](const std::string& id, const std::string& who) -> Expected<void> {
        const auto [it, fresh] = owner.emplace(id, who);
        if (!fresh)
            return make_error("{} answers to '{}', as {} does; an id names one model", who,
                              escape_text(id), it->second);
        return {};
    };
    std::vector<fs::path> named_files;  // real paths the entries take from models_dir
    for (size_t i = 0; i < s.models.size(); ++i) {
        const ServedModelEntry& entry = s.models[i];
        const std::string who = fmt::format("server.models[{}] ({})", i, entry.origin);
        auto file = entry_file(entry, s.models_dir, who);
        if (!file) return file.error();
        auto trusted = trusted_model_file(*file, who);
        if (!trusted) return trusted.error();
        named_files.push_back(trusted->real);
        ModelSpec spec;
        spec.path = trusted->real;
        spec.file_bytes = trusted->bytes;
        spec.entry = i;
        if (entry.ids.empty()) {
            spec.id = id_of_file(*file);
        } else {
            spec.id = entry.ids.front();
            spec.aliases.assign(entry.ids.begin() + 1, entry.ids.end());
        }
        if (auto ok = claim(spec.id, who); !ok) return ok.error();
        for (const std::string& alias : spec.aliases)
            if (auto ok = claim(alias, who); !ok) return ok.error();
        specs.push_back(std::move(spec));
    }
    if (!s.models_dir.empty()) {
        auto scanned = scan_models_dir(s.models_dir);
        if (!scanned) return scanned.error();
        for (ModelSpec& spec : *scanned) {
            // An entry that names the file sets its ids and settings.
            if (std::find(named_files.begin(), named_files.end(), spec.path) != named_files.end())
                continue;
            const std::string who = fmt::format("the file {}.gguf of models_dir",
                                                escape_text(spec.id, EscapeFor::Line));
            if (auto ok = claim(spec.id, who); !ok) return ok.error();
            specs.push_back(std::move(spec));
        }
    }
    if (specs.empty()) return make_error("server.models lists no model");
    return specs;
}

}  // namespace ferrox::server
