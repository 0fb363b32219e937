// Every setting of the `plugins`, `backends`, `registry` and `log` sections, and
// the `required` key every backend section has, declared once: its YAML key,
// where it lives in Config, its kind and range, the flag that overrides it and
// the help. The YAML parser, those flags, docs/config.md's tables and the check
// of the shipped config/ferrox.yaml all read this table (tests hold the docs and
// the file to it). The `server` section has its own table
// (ferrox/server_settings.h); a backend's other options are declared by its
// plugin (ferrox_option_spec in ferrox/backend_abi.h, docs/abi.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/config.h"

namespace ferrox {

enum class SettingKind {
    Text,    // a non-empty string
    Count,   // a whole number in [min, max]
    Bytes,   // a byte size ("4MiB") in [min, max]
    Choice,  // one word of `choices`
    Switch,  // true or false (a flag without a value)
    List,    // a YAML list of `items`
};

// What each item of a List setting must be.
enum class ListItems {
    Folders,       // folder names without NUL; relative ones resolve against the file's folder
    BackendNames,  // [a-z0-9_]+, each at most once, at least one
};

// The section name under which the key every backend section has is declared.
inline constexpr std::string_view kBackendSection = "<backend>";

struct ConfigSetting {
    std::string_view section;  // "plugins", "backends", "registry", "log", kBackendSection
    std::string_view key;
    SettingKind kind;
    // Where the value lives; monostate for a backend section's key, which lives in
    // each BackendConfig.
    std::variant<std::monostate, bool& (*)(Config&), uint32_t& (*)(Config&),
                 std::string& (*)(Config&), std::vector<std::string>& (*)(Config&),
                 std::vector<std::filesystem::path>& (*)(Config&)>
        member;
    std::string_view help;
    int64_t min = 0, max = 0;                        // Count, Bytes (inclusive)
    std::span<const std::string_view> choices = {};  // Choice
    ListItems items = ListItems::Folders;            // List
    std::string_view flags = {};                     // the CLI option that overrides it, if any
    std::string_view unset = {};  // the default in words, where Config{} has none
};

// In the order of docs/config.md.
FERROX_API std::span<const ConfigSetting> config_settings();
FERROX_API const ConfigSetting* find_config_setting(std::string_view section, std::string_view key);
// The keys a section takes, in table order.
FERROX_API std::vector<std::string> config_section_keys(std::string_view section);
// The top-level keys of a file, in order: the sections above, the shipped
// backends' sections in their place, then `server`.
FERROX_API std::vector<std::string> config_top_level_keys();

// The backends ferrox ships, whose sections are valid even when backends.order
// leaves them out.
FERROX_API std::span<const std::string_view> shipped_backends();
// backend.required when the file is silent: the CPU is the backend of last
// resort, so its failure is fatal by default; any other backend's is not.
FERROX_API bool required_by_default(std::string_view backend);

// A setting's value in `config` as YAML writes it ("false", "60", "[cpu]", "[]");
// for a backend section's key, its default in words.
FERROX_API std::string config_setting_value(const Config& config, const ConfigSetting& setting);
// The type and range for a reader ("integer 1..3600", "`true`, `false`", "list of folders").
FERROX_API std::string config_setting_type(const ConfigSetting& setting);
// The same text for any setting of `kind` with these bounds and words, config
// file and server alike; empty for List (its items say what it holds).
FERROX_API std::string setting_type_text(SettingKind kind, int64_t min, int64_t max,
                                         std::span<const std::string_view> choices);
// A byte count in the largest binary unit that divides it ("4MiB", "1000").
FERROX_API std::string size_text(uint64_t bytes);
// The Markdown table docs/config.md shows under "### `<section>`".
FERROX_API std::string config_section_markdown(std::string_view section);
// "trace, debug, info, warn, error or off": a Choice setting's words for help text.
FERROX_API std::string config_setting_choices_text(const ConfigSetting& setting);

}  // namespace ferrox
