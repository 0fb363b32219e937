// YAML text -> Config, checking every key, type and range against the settings
// tables (ferrox/config_settings.h, ferrox/server_settings.h). A backend section's
// options are kept with their positions for the check against what its plugin
// declares. Every error names <source>:<line>:<column>.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "config/did_you_mean.h"
#include "config/parse_config_text.h"
#include "config/scalar_parse.h"
#include "config/yaml_document.h"
#include "ferrox/config.h"
#include "ferrox/config_settings.h"
#include "ferrox/escape.h"
#include "ferrox/seeded_hash.h"
#include "ferrox/server_settings.h"

namespace ferrox {
namespace config_detail {
namespace {

// --- Backend sections ----------------------------------------------------------------
// The core reads a backend section's `required` (ferrox/config_settings.h); its other
// keys are the plugin's, checked against what the plugin declares when it is loaded
// (apply_option_schema), so here they only have to be single values.

bool is_backend_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
}

// --- Describing what was found ------------------------------------------------------

// How a node reads in a message: 'two', a list, a map, nothing.
std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Scalar:
            return fmt::format("'{}'", node.Scalar());
        case YAML::NodeType::Sequence:
            return "a list";
        case YAML::NodeType::Map:
            return "a map";
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
            break;
    }
    return "nothing (an empty value)";
}

std::string quoted_list(std::span<const std::string> names) {
    std::string out;
    for (const std::string& name : names) {
        if (!out.empty()) out += ", ";
        out += fmt::format("'{}'", name);
    }
    return out;
}

// One key: value pair of a YAML map, with the nodes kept for their positions.
struct MapEntry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
};

// Where a value is: a missing value ("threads:") has no position of its own worth
// showing (yaml-cpp puts it at the next token), so point at its key instead.
YAML::Mark value_mark(const MapEntry& entry) {
    return entry.value.IsNull() ? entry.key_node.Mark() : entry.value.Mark();
}

class ConfigParser {
  public:
    ConfigParser(std::string_view source_name, std::filesystem::path base_dir)
        : source_(source_name), base_dir_(std::move(base_dir)) {}

    Expected<Config> parse(std::string_view text);

  private:
    // "<source>:<line>:<column>: <message>", positions 1-based.
    Error error_at(const YAML::Mark& mark, std::string_view message) const {
        const YAML::Mark where = mark.is_null() ? fallback_mark_ : mark;
        return make_error("{}:{}:{}: {}", source_, where.line + 1, where.column + 1, message);
    }
    Error error_at(const YAML::Node& node, std::string_view message) const {
        return error_at(node.Mark(), message);
    }

    Expected<std::vector<MapEntry>> entries_of(const YAML::Node& map, std::string_view where) const;
    Expected<std::vector<MapEntry>> section_entries(const MapEntry& section) const;
    // `where`: "in section 'cpu'", "at the top level". `hint` follows the list of
    // valid keys when no suggestion is close enough.
    Error unknown_key(const MapEntry& entry, std::string_view where,
                      std::span<const std::string> valid_keys, std::string_view hint = {}) const;

    Expected<bool> read_bool(const MapEntry& entry, std::string_view key_path) const;
    Expected<std::int64_t> read_integer(const MapEntry& entry, std::string_view key_path,
                                        std::int64_t min, std::int64_t max) const;
    Expected<std::uint64_t> read_byte_size(const MapEntry& entry, std::string_view key_path) const;
    Expected<std::string> read_choice(const MapEntry& entry, std::string_view key_path,
                                      std::span<const std::string_view> choices) const;

    Expected<void> parse_root(const YAML::Node& root);
    // A section declared in ferrox/config_settings.h: each key read by its row.
    Expected<void> parse_table_section(const MapEntry& section);
    Expected<void> read_setting(const MapEntry& entry, const ConfigSetting& setting);
    // A list of backend names (backends.order, a model entry's `backends`); key_path names it.
    Expected<std::vector<std::string>> read_order(
        const MapEntry& entry, std::string_view key_path = "backends.order") const;
    Expected<std::vector<std::filesystem::path>> read_folders(const MapEntry& entry) const;
    Expected<void> parse_server(const MapEntry& section);
    // One server setting's value, checked by its row, as set_server_setting reads it.
    Expected<std::string> read_server_value(const MapEntry& entry, const ServerSetting& setting,
                                            std::string_view key_path) const;
    Expected<void> parse_models(const MapEntry& entry);
    Expected<ServedModelEntry> parse_model_entry(const YAML::Node& item, size_t index) const;
    Expected<std::vector<std::string>> read_ids(const MapEntry& entry,
                                                std::string_view key_path) const;
    Expected<void> parse_backend_section(const MapEntry& section);

    std::string source_;
    std::filesystem::path base_dir_;
    YAML::Mark fallback_mark_;  // line 1, column 1: used only if yaml-cpp gives no mark
    Config config_;
};

Expected<std::vector<MapEntry>> ConfigParser::entries_of(const YAML::Node& map,
                                                         std::string_view where) const {
    std::vector<MapEntry> entries;
    // key -> index in entries: a duplicate check that stays linear for a file
    // of many keys (a linear search per key was quadratic).
    std::unordered_map<std::string, size_t, SeededHash, std::equal_to<>> seen;
    for (const auto& pair : map) {
        const YAML::Node& key_node = pair.first;
        if (!key_node.IsScalar()) {
            return error_at(key_node, fmt::format("a key {} must be a plain name, got {}", where,
                                                  describe(key_node)));
        }
        const std::string& key = key_node.Scalar();
        if (const auto earlier = seen.find(key); earlier != seen.end()) {
            const YAML::Mark first = entries[earlier->second].key_node.Mark();
            return error_at(key_node, fmt::format("duplicate key '{}' {} (first at line {})", key,
                                                  where, first.line + 1));
        }
        seen.emplace(key, entries.size());
        entries.push_back(MapEntry{key, key_node, pair.second});
    }
    return entries;
}

// An empty section ("cpu:" with nothing under it) is allowed and changes nothing.
Expected<std::vector<MapEntry>> ConfigParser::section_entries(const MapEntry& section) const {
    if (section.value.IsNull()) return std::vector<MapEntry>{};
    if (!section.value.IsMap()) {
        return error_at(section.value, fmt::format("section '{}' must be a map of keys, got {}",
                                                   section.key, describe(section.value)));
    }
    return entries_of(section.value, fmt::format("in section '{}'", section.key));
}

Error ConfigParser::unknown_key(const MapEntry& entry, std::string_view where,
                                std::span<const std::string> valid_keys,
                                std::string_view hint) const {
    std::string message = fmt::format("unknown key '{}' {}", entry.key, where);
    if (const auto suggestion = closest_match(entry.key, valid_keys)) {
        message += fmt::format("; did you mean '{}'?", *suggestion);
    } else {
        message += fmt::format("; valid keys are {}{}", quoted_list(valid_keys), hint);
    }
    return error_at(entry.key_node, message);
}

Expected<bool> ConfigParser::read_bool(const MapEntry& entry, std::string_view key_path) const {
    const YAML::Node& node = entry.value;
    const YAML::Mark at = value_mark(entry);
    if (node.IsScalar()) {
        const auto value = parse_bool(node.Scalar());
        if (const bool* flag = std::get_if<bool>(&value)) return *flag;
    }
    return error_at(at, fmt::format("{} must be true or false, got {}", key_path, describe(node)));
}

Expected<std::int64_t> ConfigParser::read_integer(const MapEntry& entry, std::string_view key_path,
                                                  std::int64_t min, std::int64_t max) const {
    const YAML::Node& node = entry.value;
    const YAML::Mark at = value_mark(entry);
    if (!node.IsScalar()) {
        return error_at(at, fmt::format("{} must be an integer, got {}", key_path, describe(node)));
    }
    const auto parsed = parse_integer(node.Scalar());
    if (const auto* problem = std::get_if<NumberProblem>(&parsed)) {
        if (*problem == NumberProblem::NotANumber) {
            return error_at(at,
                            fmt::format("{} must be an integer, got {}", key_path, describe(node)));
        }
        return error_at(at, fmt::format("{} must be between {} and {}, got {}", key_path, min, max,
                                        node.Scalar()));
    }
    const std::int64_t value = std::get<std::int64_t>(parsed);
    if (value < min || value > max) {
        return error_at(
            at, fmt::format("{} must be between {} and {}, got {}", key_path, min, max, value));
    }
    return value;
}

Expected<std::uint64_t> ConfigParser::read_byte_size(const MapEntry& entry,
                                                     std::string_view key_path) const {
    const YAML::Node& node = entry.value;
    const YAML::Mark at = value_mark(entry);
    constexpr std::string_view kForm =
        "a number of bytes or a size such as \"512MiB\", \"8GiB\" (units B, KiB, MiB, GiB, TiB)";
    if (!node.IsScalar()) {
        return error_at(at, fmt::format("{} must be {}, got {}", key_path, kForm, describe(node)));
    }
    const ByteSizeResult size = parse_byte_size(node.Scalar());
    if (size.ok) return size.bytes;
    if (size.negative || size.overflow) {
        return error_at(
            at, fmt::format("{} must be between 0 and 16EiB - 1, got {}", key_path, node.Scalar()));
    }
    std::string message = fmt::format("{} must be {}, got {}", key_path, kForm, describe(node));
    if (!size.suggestion.empty()) {
        message += fmt::format("; did you mean '{}'?", size.suggestion);
    }
    return error_at(at, message);
}

Expected<std::string> ConfigParser::read_choice(const MapEntry& entry, std::string_view key_path,
                                                std::span<const std::string_view> choices) const {
    const YAML::Node& node = entry.value;
    const YAML::Mark at = value_mark(entry);
    std::vector<std::string> names(choices.begin(), choices.end());
    if (node.IsScalar()) {
        const std::string& text = node.Scalar();
        if (std::find(names.begin(), names.end(), text) != names.end()) return text;
    }
    std::string message =
        fmt::format("{} must be one of {}, got {}", key_path, quoted_list(names), describe(node));
    if (node.IsScalar()) {
        if (const auto suggestion = closest_match(node.Scalar(), names)) {
            message += fmt::format("; did you mean '{}'?", *suggestion);
        }
    }
    return error_at(at, message);
}

Expected<Config> ConfigParser::parse(std::string_view text) {
    auto document = load_single_document(std::string(text));
    if (const auto* problem = std::get_if<YamlProblem>(&document)) {
        return error_at(problem->mark, problem->message);
    }
    try {
        if (auto parsed = parse_root(std::get<YAML::Node>(document)); !parsed) {
            return parsed.error();
        }
    } catch (const std::exception& e) {
        // Node accessors throw only on misuse, which the checks above rule out; this is a
        // last guard so that no input can take the process down.
        return error_at(fallback_mark_, fmt::format("cannot read the configuration: {}", e.what()));
    }

    // Backends the file did not configure: `required` by default, no options.
    std::vector<BackendConfig> ordered;
    for (const std::string& name : config_.backend_order) {
        const auto configured =
            std::find_if(config_.backends.begin(), config_.backends.end(),
                         [&](const BackendConfig& b) { return b.name == name; });
        if (configured != config_.backends.end()) {
            ordered.push_back(std::move(*configured));
        } else {
            ordered.push_back(BackendConfig{name, required_by_default(name), {}, {}});
        }
    }
    config_.backends = std::move(ordered);
    config_.source = source_;
    return std::move(config_);
}

Expected<void> ConfigParser::parse_root(const YAML::Node& root) {
    if (root.IsNull()) return {};  // only comments: the built-in default
    if (!root.IsMap()) {
        return error_at(root, fmt::format("the configuration must be a map of sections "
                                          "(plugins, backends, cpu, ...), got {}",
                                          describe(root)));
    }
    auto entries = entries_of(root, "at the top level");
    if (!entries) return entries.error();

    // backends.order decides which third-party sections are allowed, so it goes first.
    const auto backends = std::find_if(entries->begin(), entries->end(),
                                       [](const MapEntry& e) { return e.key == "backends"; });
    if (backends != entries->end()) {
        if (auto parsed = parse_table_section(*backends); !parsed) return parsed;
    }

    std::vector<std::string> valid_keys = config_top_level_keys();
    for (const std::string& name : config_.backend_order) {
        if (std::find(valid_keys.begin(), valid_keys.end(), name) == valid_keys.end()) {
            valid_keys.push_back(name);
        }
    }

    for (const MapEntry& entry : *entries) {
        Expected<void> parsed;
        if (std::find(valid_keys.begin(), valid_keys.end(), entry.key) == valid_keys.end()) {
            return unknown_key(entry, "at the top level", valid_keys,
                               " (a section for a third-party backend is allowed only when "
                               "backends.order lists it)");
        } else if (entry.key == "backends") {
            continue;
        } else if (entry.key == "server") {
            parsed = parse_server(entry);
        } else if (!config_section_keys(entry.key).empty()) {
            parsed = parse_table_section(entry);
        } else {
            parsed = parse_backend_section(entry);
        }
        if (!parsed) return parsed;
    }
    return {};
}

Expected<void> ConfigParser::parse_table_section(const MapEntry& section) {
    auto entries = section_entries(section);
    if (!entries) return entries.error();
    const std::vector<std::string> keys = config_section_keys(section.key);
    for (const MapEntry& entry : *entries) {
        const ConfigSetting* setting = find_config_setting(section.key, entry.key);
        if (!setting) return unknown_key(entry, fmt::format("in section '{}'", section.key), keys);
        if (auto parsed = read_setting(entry, *setting); !parsed) return parsed;
    }
    return {};
}

// The value of one table row, checked by its kind and range, stored where the row says.
Expected<void> ConfigParser::read_setting(const MapEntry& entry, const ConfigSetting& setting) {
    const std::string key_path = fmt::format("{}.{}", setting.section, setting.key);
    auto store = [&](auto value) -> Expected<void> {
        using Access = decltype(value)& (*)(Config&);
        std::get<Access>(setting.member)(config_) = std::move(value);
        return {};
    };
    switch (setting.kind) {
        case SettingKind::Switch: {
            auto value = read_bool(entry, key_path);
            if (!value) return value.error();
            return store(*value);
        }
        case SettingKind::Count: {
            auto value = read_integer(entry, key_path, setting.min, setting.max);
            if (!value) return value.error();
            return store(static_cast<uint32_t>(*value));
        }
        case SettingKind::Choice: {
            auto value = read_choice(entry, key_path, setting.choices);
            if (!value) return value.error();
            return store(std::move(*value));
        }
        case SettingKind::Text:
            if (!entry.value.IsScalar() || entry.value.Scalar().empty())
                return error_at(value_mark(entry),
                                fmt::format("{} must be a non-empty string, got {}", key_path,
                                            describe(entry.value)));
            return store(entry.value.Scalar());
        case SettingKind::List:
            if (setting.items == ListItems::BackendNames) {
                auto order = read_order(entry);
                if (!order) return order.error();
                return store(std::move(*order));
            } else {
                auto folders = read_folders(entry);
                if (!folders) return folders.error();
                return store(std::move(*folders));
            }
        case SettingKind::Bytes:
            break;  // no row of these sections is a size
    }
    return error_at(value_mark(entry),
                    fmt::format("{}: a kind this section cannot read", key_path));
}

Expected<std::vector<std::string>> ConfigParser::read_order(const MapEntry& entry,
                                                            std::string_view key_path) const {
    const YAML::Node& node = entry.value;
    if (!node.IsSequence()) {
        return error_at(value_mark(entry), fmt::format("{} must be a list of backend names such "
                                                       "as [cuda, cpu], got {}",
                                                       key_path, describe(node)));
    }
    if (node.size() == 0) {
        return error_at(
            node, fmt::format("{} is empty; list at least one backend, e.g. [cpu]", key_path));
    }
    std::vector<std::string> order;
    std::vector<YAML::Node> listed_at;
    for (const YAML::Node& item : node) {
        if (!item.IsScalar()) {
            return error_at(
                item, fmt::format("{} must list backend names, got {}", key_path, describe(item)));
        }
        const std::string& name = item.Scalar();
        if (!is_backend_name(name)) {
            return error_at(item, fmt::format("backend name '{}' in {} must use only "
                                              "a-z, 0-9 and _",
                                              name, key_path));
        }
        const auto earlier = std::find(order.begin(), order.end(), name);
        if (earlier != order.end()) {
            const YAML::Mark first =
                listed_at[static_cast<std::size_t>(earlier - order.begin())].Mark();
            return error_at(item, fmt::format("backend '{}' is listed twice in {} "
                                              "(first at line {}, column {})",
                                              name, key_path, first.line + 1, first.column + 1));
        }
        order.push_back(name);
        listed_at.push_back(item);
    }
    return order;
}

Expected<std::vector<std::filesystem::path>> ConfigParser::read_folders(
    const MapEntry& entry) const {
    std::vector<std::filesystem::path> folders;
    if (entry.value.IsNull()) return folders;  // "paths:" with no list: none
    if (!entry.value.IsSequence()) {
        return error_at(entry.value, fmt::format("{}.{} must be a list of folders, got {}",
                                                 "plugins", entry.key, describe(entry.value)));
    }
    for (const YAML::Node& item : entry.value) {
        if (!item.IsScalar() || item.Scalar().empty()) {
            return error_at(item, fmt::format("plugins.{} must list folder names, got {}",
                                              entry.key, describe(item)));
        }
        // The system calls stop at a NUL: "/opt/p\0/x" would search /opt/p.
        if (item.Scalar().find('\0') != std::string::npos)
            return error_at(item, fmt::format("plugins.{} entry '{}' holds a NUL byte; "
                                              "a folder name cannot",
                                              entry.key, escape_text(item.Scalar())));
        std::filesystem::path folder(item.Scalar());
        if (folder.is_relative() && !base_dir_.empty()) folder = base_dir_ / folder;
        folders.push_back(folder.lexically_normal());
    }
    return folders;
}

Expected<void> ConfigParser::parse_server(const MapEntry& section) {
    auto entries = section_entries(section);
    if (!entries) return entries.error();
    std::vector<std::string> keys;
    for (const ServerSetting& s : server_settings()) keys.emplace_back(s.key);
    keys.emplace_back("models");
    for (const MapEntry& entry : *entries) {
        if (entry.key == "models") {
            if (auto parsed = parse_models(entry); !parsed) return parsed;
            continue;
        }
        const ServerSetting* setting = find_server_setting(entry.key);
        if (!setting) return unknown_key(entry, "in section 'server'", keys);
        auto value = read_server_value(entry, *setting, "server." + entry.key);
        if (!value) return value.error();
        if (auto set = set_server_setting(config_.server, *setting, *value); !set)
            return error_at(value_mark(entry), set.error().message());
    }
    return {};
}

Expected<std::string> ConfigParser::read_server_value(const MapEntry& entry,
                                                      const ServerSetting& setting,
                                                      std::string_view key_path) const {
    switch (setting.kind) {
        case SettingKind::Switch: {
            auto v = read_bool(entry, key_path);
            if (!v) return v.error();
            return std::string(*v ? "true" : "false");
        }
        case SettingKind::Choice:
            return read_choice(entry, key_path, setting.choices);
        case SettingKind::Count: {
            auto v = read_integer(entry, key_path, setting.min, setting.max);
            if (!v) return v.error();
            return std::to_string(*v);
        }
        case SettingKind::Bytes: {
            auto v = read_byte_size(entry, key_path);
            if (!v) return v.error();
            return std::to_string(*v);
        }
        case SettingKind::Text:
        case SettingKind::List:
            break;
    }
    if (!entry.value.IsScalar() || entry.value.Scalar().empty())
        return error_at(value_mark(entry), fmt::format("{} must be a non-empty string, got {}",
                                                       key_path, describe(entry.value)));
    return entry.value.Scalar();
}

// server.models: a list of maps, each a model of the many-models server.
Expected<void> ConfigParser::parse_models(const MapEntry& entry) {
    std::vector<ServedModelEntry> models;
    if (!entry.value.IsNull() && !entry.value.IsSequence())
        return error_at(value_mark(entry),
                        fmt::format("server.models must be a list of models (each a map with "
                                    "path, alias, ...), got {}",
                                    describe(entry.value)));
    if (entry.value.IsSequence() && entry.value.size() > ServedModelEntry::kMaxEntries)
        return error_at(entry.value,
                        fmt::format("server.models lists {} models; at most {}", entry.value.size(),
                                    ServedModelEntry::kMaxEntries));
    // id -> the entry that took it: a duplicate names both.
    std::unordered_map<std::string, size_t, SeededHash, std::equal_to<>> owner;
    size_t index = 0;
    if (entry.value.IsNull()) return {};  // "models:" with no list: none
    for (const YAML::Node& item : entry.value) {
        auto model = parse_model_entry(item, index);
        if (!model) return model.error();
        for (const std::string& id : model->ids) {
            const auto [it, fresh] = owner.emplace(id, index);
            if (!fresh)
                return error_at(item, fmt::format("server.models[{}] answers to '{}', as "
                                                  "server.models[{}] ({}) does; an id names one "
                                                  "model",
                                                  index, escape_text(id), it->second,
                                                  models[it->second].origin));
        }
        models.push_back(std::move(*model));
        ++index;
    }
    config_.server.models = std::move(models);
    return {};
}

Expected<ServedModelEntry> ConfigParser::parse_model_entry(const YAML::Node& item,
                                                           size_t index) const {
    const std::string where = fmt::format("server.models[{}]", index);
    if (!item.IsMap())
        return error_at(item, fmt::format("{} must be a map (path, alias, ...), got {}", where,
                                          describe(item)));
    auto entries = entries_of(item, fmt::format("in {}", where));
    if (!entries) return entries.error();
    ServedModelEntry model;
    const YAML::Mark mark = item.Mark().is_null() ? fallback_mark_ : item.Mark();
    model.origin = fmt::format("{}:{}", source_, mark.line + 1);
    const std::vector<std::string> keys = model_entry_key_names();
    bool has_path = false;
    for (const MapEntry& e : *entries) {
        const std::string key_path = fmt::format("{}.{}", where, e.key);
        if (e.key == "path") {
            if (!e.value.IsScalar() || e.value.Scalar().empty())
                return error_at(value_mark(e), fmt::format("{} must be a file name, got {}",
                                                           key_path, describe(e.value)));
            if (e.value.Scalar().find('\0') != std::string::npos)
                return error_at(value_mark(e),
                                fmt::format("{} '{}' holds a NUL byte; a file name cannot",
                                            key_path, escape_text(e.value.Scalar())));
            model.path = e.value.Scalar();
            has_path = true;
        } else if (e.key == "alias") {
            auto ids = read_ids(e, key_path);
            if (!ids) return ids.error();
            model.ids = std::move(*ids);
        } else if (e.key == "backends") {
            auto order = read_order(e, key_path);
            if (!order) return order.error();
            for (const std::string& name : *order)
                if (std::find(config_.backend_order.begin(), config_.backend_order.end(), name) ==
                    config_.backend_order.end())
                    return error_at(
                        value_mark(e),
                        fmt::format("{} lists '{}', which backends.order ({}) does "
                                    "not: a model picks among the backends opened",
                                    key_path, name, quoted_list(config_.backend_order)));
            model.backend_order = std::move(*order);
        } else if (const ServerSetting* s = find_server_setting(e.key); s && s->per_model) {
            auto value = read_server_value(e, *s, key_path);
            if (!value) return value.error();
            ServerConfig scratch;
            if (auto set = set_server_setting(scratch, *s, *value); !set)
                return error_at(value_mark(e), set.error().message());
            model.settings.emplace_back(e.key, std::move(*value));
        } else {
            return unknown_key(e, fmt::format("in {}", where), keys,
                               " (the other server settings apply to every model)");
        }
    }
    if (!has_path) return error_at(item, fmt::format("{} has no path: name the GGUF file", where));
    return model;
}

// `alias`: one id, or a list of them.
Expected<std::vector<std::string>> ConfigParser::read_ids(const MapEntry& entry,
                                                          std::string_view key_path) const {
    std::vector<YAML::Node> items;
    if (entry.value.IsScalar()) {
        items.push_back(entry.value);
    } else if (entry.value.IsSequence() && entry.value.size() > 0) {
        if (entry.value.size() > ServedModelEntry::kMaxEntries)
            return error_at(entry.value,
                            fmt::format("{} lists {} ids; at most {}", key_path, entry.value.size(),
                                        ServedModelEntry::kMaxEntries));
        for (const YAML::Node& item : entry.value) items.push_back(item);
    } else {
        return error_at(value_mark(entry),
                        fmt::format("{} must be an id or a non-empty list of ids, got {}", key_path,
                                    describe(entry.value)));
    }
    std::vector<std::string> ids;
    for (const YAML::Node& item : items) {
        if (!item.IsScalar() || item.Scalar().empty())
            return error_at(
                item, fmt::format("{} must list non-empty ids, got {}", key_path, describe(item)));
        const std::string& id = item.Scalar();
        if (id.size() > ServedModelEntry::kMaxIdBytes)
            return error_at(item, fmt::format("{}: an id of {} bytes; at most {}", key_path,
                                              id.size(), ServedModelEntry::kMaxIdBytes));
        if (std::any_of(id.begin(), id.end(),
                        [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
            return error_at(item, fmt::format("{}: the id '{}' holds a control character", key_path,
                                              escape_text(id)));
        if (std::find(ids.begin(), ids.end(), id) != ids.end())
            return error_at(item, fmt::format("{} lists '{}' twice", key_path, id));
        ids.push_back(id);
    }
    return ids;
}

// A backend section: `required` by its table row, any other key a single value kept
// with where it was written, for the check against the plugin's declaration.
Expected<void> ConfigParser::parse_backend_section(const MapEntry& section) {
    auto entries = section_entries(section);
    if (!entries) return entries.error();
    BackendConfig backend{section.key, required_by_default(section.key), {}, {}};
    const auto where = [&](const YAML::Mark& mark) {
        const YAML::Mark m = mark.is_null() ? fallback_mark_ : mark;
        return fmt::format("{}:{}:{}", source_, m.line + 1, m.column + 1);
    };
    for (const MapEntry& entry : *entries) {
        const std::string key_path = fmt::format("{}.{}", section.key, entry.key);
        if (find_config_setting(kBackendSection, entry.key) != nullptr) {
            auto required = read_bool(entry, key_path);
            if (!required) return required.error();
            backend.required = *required;
            continue;
        }
        if (!entry.value.IsScalar()) {
            return error_at(value_mark(entry), fmt::format("{} must be a single value (text, "
                                                           "number or true/false), got {}",
                                                           key_path, describe(entry.value)));
        }
        backend.options.emplace_back(entry.key, entry.value.Scalar());
        backend.origins.push_back({where(entry.key_node.Mark()), where(entry.value.Mark())});
    }
    config_.backends.push_back(std::move(backend));
    return {};
}

}  // namespace

Expected<Config> parse_config_text(std::string_view yaml_text, std::string_view source_name,
                                   const std::filesystem::path& base_dir) {
    return ConfigParser(source_name, base_dir).parse(yaml_text);
}

}  // namespace config_detail

const BackendConfig* Config::backend(std::string_view name) const {
    const auto found = std::find_if(backends.begin(), backends.end(),
                                    [&](const BackendConfig& b) { return b.name == name; });
    return found == backends.end() ? nullptr : &*found;
}

Expected<Config> parse_config(std::string_view yaml_text, std::string_view source_name) {
    // "<built-in default>", "<stdin>": no folder to anchor relative paths to.
    std::filesystem::path base_dir;
    if (!source_name.empty() && source_name.front() != '<') {
        base_dir = std::filesystem::path(source_name).parent_path();
    }
    return config_detail::parse_config_text(yaml_text, source_name, base_dir);
}

}  // namespace ferrox
