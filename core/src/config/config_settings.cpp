#include "ferrox/config_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <type_traits>

namespace ferrox {
namespace {

using K = SettingKind;

constexpr std::array<std::string_view, 6> kLogLevels{"trace", "debug", "info",
                                                     "warn",  "error", "off"};
constexpr std::array<std::string_view, 2> kLogFormats{"text", "json"};
constexpr std::array<std::string_view, 2> kShippedBackends{"cpu", "cuda"};

// The order is the order of docs/config.md and of the top-level keys.
const std::array kSettings{
    ConfigSetting{
        .section = "plugins",
        .key = "paths",
        .kind = K::List,
        .member = +[](Config& c) -> std::vector<std::filesystem::path>& { return c.plugin_paths; },
        .help = "Extra folders to search for `libferrox_<name>.so`, after `--plugin-dir` and "
                "`$FERROX_PLUGIN_PATH` and before the installed plugin folder. A relative folder "
                "is relative to the folder of the configuration file (not to the current "
                "directory). An entry holding a NUL byte is refused.",
        .items = ListItems::Folders},
    ConfigSetting{
        .section = "plugins",
        .key = "allow_without_note",
        .kind = K::Switch,
        .member = +[](Config& c) -> bool& { return c.plugins.allow_without_note; },
        .help = "Load a plugin built without `FERROX_PLUGIN_NOTE` (before ABI 1.2). Its "
                "constructors and `describe()` run before its ABI and CPU needs can be checked, "
                "so by default it is refused with state `no-note`; when `true`, each one loaded "
                "is logged as a warning."},
    ConfigSetting{
        .section = "plugins",
        .key = "create_timeout",
        .kind = K::Count,
        .member = +[](Config& c) -> uint32_t& { return c.plugins.create_timeout; },
        .help = "Seconds a plugin's `create()` may take; past it the backend is `init-failed` "
                "(the call is abandoned on its thread, the library stays loaded).",
        .min = 1,
        .max = PluginPolicy::kMaxCreateTimeout},
    ConfigSetting{
        .section = "backends",
        .key = "order",
        .kind = K::List,
        .member = +[](Config& c) -> std::vector<std::string>& { return c.backend_order; },
        .help = "Which backends to open, in priority order. A backend not listed is never "
                "loaded, so a CPU-only host never touches the CUDA plugin unless `cuda` is "
                "listed. Names match `[a-z0-9_]+`, each at most once; the list may not be empty.",
        .items = ListItems::BackendNames},
    ConfigSetting{.section = kBackendSection,
                  .key = "required",
                  .kind = K::Switch,
                  .member = std::monostate{},
                  .help = "`true`: a failure of this backend (no driver, no device, an init "
                          "error) stops ferrox with an error. `false`: it is a warning, the "
                          "backend is skipped and the next one in `backends.order` takes the "
                          "work.",
                  .unset = "`true` for `cpu`, else `false`"},
    ConfigSetting{
        .section = "registry",
        .key = "strict",
        .kind = K::Switch,
        .member = +[](Config& c) -> bool& { return c.registry_strict; },
        .help = "`true`: a kernel-registry violation (a selected accelerator misses a kernel the "
                "model needs and falls back) fails the model load instead of being reported."},
    ConfigSetting{.section = "log",
                  .key = "level",
                  .kind = K::Choice,
                  .member = +[](Config& c) -> std::string& { return c.log_level; },
                  .help = "The least severe message written to stderr.",
                  .choices = kLogLevels,
                  .flags = "--log-level"},
    ConfigSetting{.section = "log",
                  .key = "format",
                  .kind = K::Choice,
                  .member = +[](Config& c) -> std::string& { return c.log_format; },
                  .help = "`text`: lines for a person. `json`: one JSON object a line, for a log "
                          "shipper; `ferrox serve` then writes each request as an object of its "
                          "own fields (docs/server.md, \"Logs\").",
                  .choices = kLogFormats,
                  .flags = "--log-format"},
};

std::string yaml_list(const auto& items) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += ", ";
        if constexpr (std::is_same_v<std::decay_t<decltype(item)>, std::filesystem::path>)
            out += item.string();
        else
            out += item;
    }
    return "[" + out + "]";
}

}  // namespace

std::span<const ConfigSetting> config_settings() { return kSettings; }

const ConfigSetting* find_config_setting(std::string_view section, std::string_view key) {
    for (const ConfigSetting& s : kSettings)
        if (s.section == section && s.key == key) return &s;
    return nullptr;
}

std::vector<std::string> config_section_keys(std::string_view section) {
    std::vector<std::string> keys;
    for (const ConfigSetting& s : kSettings)
        if (s.section == section) keys.emplace_back(s.key);
    return keys;
}

std::vector<std::string> config_top_level_keys() {
    std::vector<std::string> keys;
    auto add = [&](std::string_view key) {
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.emplace_back(key);
    };
    for (const ConfigSetting& s : kSettings) {
        if (s.section != kBackendSection) {
            add(s.section);
            continue;
        }
        for (std::string_view backend : kShippedBackends) add(backend);
    }
    add("server");
    return keys;
}

std::span<const std::string_view> shipped_backends() { return kShippedBackends; }

bool required_by_default(std::string_view backend) { return backend == "cpu"; }

std::string config_setting_value(const Config& config, const ConfigSetting& s) {
    // The accessors hand out references into a Config they may change; reading
    // goes through a copy so that `config` stays const.
    Config copy = config;
    return std::visit(
        [&](auto member) -> std::string {
            if constexpr (std::is_same_v<decltype(member), std::monostate>) {
                return std::string(s.unset);
            } else {
                const auto& v = member(copy);
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, bool>)
                    return v ? "true" : "false";
                else if constexpr (std::is_same_v<T, uint32_t>)
                    return std::to_string(v);
                else if constexpr (std::is_same_v<T, std::string>)
                    return v;
                else
                    return yaml_list(v);
            }
        },
        s.member);
}

std::string setting_type_text(SettingKind kind, int64_t min, int64_t max,
                              std::span<const std::string_view> choices) {
    switch (kind) {
        case K::Text:
            return "string";
        case K::Count:
            return fmt::format("integer {}..{}", min, max);
        case K::Bytes:
            return fmt::format("size {}..{}", size_text(uint64_t(min)), size_text(uint64_t(max)));
        case K::Switch:
            return "`true`, `false`";
        case K::Choice: {
            std::string out;
            for (std::string_view c : choices)
                out += fmt::format("{}`{}`", out.empty() ? "" : ", ", c);
            return out;
        }
        case K::List:
            break;
    }
    return "";
}

std::string size_text(uint64_t bytes) {
    constexpr std::array<std::pair<uint64_t, const char*>, 4> kUnits{{{uint64_t(1) << 40, "TiB"},
                                                                      {uint64_t(1) << 30, "GiB"},
                                                                      {1u << 20, "MiB"},
                                                                      {1u << 10, "KiB"}}};
    for (const auto& [unit, name] : kUnits)
        if (bytes >= unit && bytes % unit == 0) return fmt::format("{}{}", bytes / unit, name);
    return std::to_string(bytes);
}

std::string config_setting_type(const ConfigSetting& s) {
    if (s.kind == K::List)
        return s.items == ListItems::Folders ? "list of folders" : "list of backend names";
    return setting_type_text(s.kind, s.min, s.max, s.choices);
}

std::string config_setting_choices_text(const ConfigSetting& s) {
    std::string out;
    for (size_t i = 0; i < s.choices.size(); ++i)
        out += fmt::format("{}{}",
                           i == 0                      ? ""
                           : i + 1 == s.choices.size() ? " or "
                                                       : ", ",
                           s.choices[i]);
    return out;
}

std::string config_section_markdown(std::string_view section) {
    static const Config defaults{};
    std::string out = "| Key | Type | Default | Meaning |\n|-----|------|---------|---------|\n";
    for (const ConfigSetting& s : kSettings) {
        if (s.section != section) continue;
        const std::string value = config_setting_value(defaults, s);
        const std::string shown =
            std::holds_alternative<std::monostate>(s.member) ? value : fmt::format("`{}`", value);
        std::string help(s.help);
        if (!s.flags.empty()) help += fmt::format(" The flag `{}` overrides it.", s.flags);
        out += fmt::format("| `{}` | {} | {} | {} |\n", s.key, config_setting_type(s), shown, help);
    }
    return out;
}

}  // namespace ferrox
