// Every setting of the `server:` section, declared once: its YAML key, the
// ServerConfig member it fills, its kind and range, the `ferrox serve` flag
// and the help. The YAML parser, the flags, `--help` (defaults printed from
// ServerConfig{}), the merge of flags over the file and docs/config.md's table
// are all derived from this table (a test holds the docs to it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/config.h"
#include "ferrox/config_settings.h"
#include "ferrox/expected.h"

namespace ferrox {

// SettingKind: ferrox/config_settings.h (List is not a server kind).
struct ServerSetting {
    std::string_view key;    // server.<key>
    std::string_view flags;  // CLI11 names: "-m,--model"
    SettingKind kind;
    std::variant<std::string ServerConfig::*, uint32_t ServerConfig::*, uint64_t ServerConfig::*,
                 bool ServerConfig::*, int32_t ServerConfig::*>  // int32_t: a Count that may be -1
        member;
    std::string_view help;
    int64_t min = 0, max = 0;                   // Count, Bytes (inclusive)
    std::span<const std::string_view> choices;  // Choice
    std::string_view unset = {};  // what the empty or zero default means, shown as the default
    bool per_model = false;       // a `server.models` entry may set it for its model
};

FERROX_API std::span<const ServerSetting> server_settings();
FERROX_API const ServerSetting* find_server_setting(std::string_view key);

// Reads `text` into `config` by the setting's kind and range. The error names
// server.<key>, the range and the value; the caller adds where it came from.
FERROX_API Expected<void> set_server_setting(ServerConfig& config, const ServerSetting& setting,
                                             std::string_view text);
// to.<member> = from.<member>
FERROX_API void copy_server_setting(ServerConfig& to, const ServerConfig& from,
                                    const ServerSetting& setting);

// A `server.models` entry's own keys (path, alias, backends); its other keys
// are the server settings marked per_model, read by their rows.
struct ModelEntryKey {
    std::string_view key;
    std::string_view type;
    std::string_view help;
    std::string_view unset;  // what leaving it out means
};
FERROX_API std::span<const ModelEntryKey> model_entry_keys();
// Every key an entry takes, its own then the per-model settings, in table order.
FERROX_API std::vector<std::string> model_entry_key_names();
// The Markdown table docs/config.md shows under "### `server.models`".
FERROX_API std::string model_entries_markdown();
// The server settings for the model of `entry`: `server` with the entry's
// per-model settings on top (each checked again, naming the entry).
FERROX_API Expected<ServerConfig> server_config_for(const ServerConfig& server,
                                                    const ServedModelEntry& entry);

// The default as a reader should see it ("8080", "4MiB", "(none)", the unset note).
FERROX_API std::string server_setting_default(const ServerSetting& setting);
// The type and range ("integer 0..65535", "size 1KiB..1GiB", "`f32`, `f16`").
FERROX_API std::string server_setting_type(const ServerSetting& setting);
// The Markdown table docs/config.md shows under "### `server`".
FERROX_API std::string server_settings_markdown();

}  // namespace ferrox
