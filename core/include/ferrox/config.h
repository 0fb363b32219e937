// ferrox's configuration: which backends to open, in which order, with what
// options. Read from a YAML file (config/ferrox.yaml documents every key) or
// taken from the built-in default, which holds the same values as the shipped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend_abi.h"
#include "ferrox/expected.h"

namespace ferrox {

// Where one backend option came from: "<file>:<line>:<column>" of its key and of
// its value in the configuration file, or the flag that set it ("--threads").
struct OptionOrigin {
    std::string key, value;
};

struct BackendConfig {
    std::string name;       // "cpu", "cuda", or a third-party plugin name ([a-z0-9_]+)
    bool required = false;  // a failure of a required backend is an error, else a warning
    // The section's other keys as written, in file order (single values only). The
    // loader checks them against the options the backend's plugin declares (ABI 1.6,
    // apply_option_schema below) before create(): then create() gets them normalised
    // (vram_budget "8GiB" arrives as "8589934592") followed by every declared default
    // the file leaves out. A plugin that declares none gets exactly these.
    std::vector<std::pair<std::string, std::string>> options;
    // Parallel to `options` where known; an option without one is named by key only.
    std::vector<OptionOrigin> origins;

    // Sets `key` (replacing the file's value, keeping its place) as a flag does;
    // `flag` names it in errors ("--threads").
    FERROX_API void set_option(std::string_view key, std::string value, std::string_view flag);
};

// One option a backend plugin declares (ferrox_option_spec, ABI 1.6), copied
// out of the plugin by the loader.
struct OptionSpec {
    std::string key;
    ferrox_option_kind kind = FERROX_OPTION_TEXT;
    int64_t min = 0, max = 0;          // INTEGER, BYTES (inclusive)
    std::vector<std::string> choices;  // CHOICE
    std::optional<std::string> default_value;
    std::string help;
};

// `text` checked as `spec` says and put in its normal form (plain decimal,
// bytes, "true"/"false"); the error names `key_path` (cpu.threads), the kind or
// range and the value, and the caller adds where the value came from.
FERROX_API Expected<std::string> normal_option_value(const OptionSpec& spec,
                                                     std::string_view key_path,
                                                     std::string_view text);

// The options create() receives for `backend` under `schema` (its plugin's
// declaration, non-empty): the section's in file order, normalised, then each
// declared default it leaves out. An unknown key (with a did-you-mean), a
// value of the wrong kind or out of range is an error that starts with its
// origin (file:line:column, or the flag) and names the key and the range.
FERROX_API Expected<std::vector<std::pair<std::string, std::string>>> apply_option_schema(
    const BackendConfig& backend, std::span<const OptionSpec> schema);

// The Markdown table docs/config.md shows for a backend's declared options.
FERROX_API std::string option_schema_markdown(std::span<const OptionSpec> schema);

// One entry of the `server.models` list (docs/config.md, "server.models"): a
// model the many-models server serves, under its own ids and settings. Its
// keys are declared in ferrox/server_settings.h (model_entry_keys, and the
// server settings marked per_model).
struct ServedModelEntry {
    static constexpr size_t kMaxEntries = 4096;  // as many as a models_dir may hold
    static constexpr size_t kMaxIdBytes = 256;
    std::string path;              // as written; a relative one names a file of models_dir
    std::vector<std::string> ids;  // `alias`, in order; empty: the file name without .gguf
    // Per-model server settings (`context`, `kv_type`, ...): key and checked
    // value as set_server_setting reads it, in file order, applied over the
    // server's own (server_config_for in ferrox/server_settings.h).
    std::vector<std::pair<std::string, std::string>> settings;
    std::vector<std::string> backend_order;  // `backends`; empty: backends.order
    std::string origin;                      // "<file>:<line>", how messages name the entry
};

// The `server:` section: what `ferrox serve` uses unless a flag overrides it
// (docs/config.md, docs/server.md). Each member's key, range, flag and help
// are declared once, in ferrox/server_settings.h; the defaults are these.
struct ServerConfig {
    std::string model;
    std::string host = "127.0.0.1";
    uint32_t port = 8080;
    uint32_t parallel = 4;
    uint32_t context = 0;
    std::string kv_type = "f32";
    std::string kv_type_k, kv_type_v;  // K's and V's own kinds; empty: kv_type's
    std::string api_key_file;
    std::string alias;
    uint32_t max_queue = 64;
    uint32_t request_timeout = 600;
    uint32_t drain_timeout = 30;
    uint32_t read_timeout = 30;
    uint32_t idle_timeout = 15;
    std::string cors_origin;
    std::string allowed_hosts;
    uint64_t max_body_bytes = 4u << 20;
    uint64_t request_memory = 1ull << 30;
    uint32_t max_connections = 256;
    uint32_t max_client_connections = 32;
    bool insecure_open = false;
    int32_t reasoning_budget = -1;  // a chat request's thinking budget when it names none
    uint32_t spec_draft_n_max = 0;  // speculation's draft tokens per step; 0: off
    std::string model_draft;        // the draft model's file; empty: n-gram prompt lookup
    // What a hybrid model's recurrent-state checkpoints may take; 0: none are kept.
    uint64_t checkpoint_memory = uint64_t{256} << 20;
    bool embedding_truncation = false;  // /v1/embeddings' `dimensions` may cut vectors
    std::string otlp_endpoint;          // OTLP/HTTP traces' base URL; empty: the OTEL_* variables
    std::string models_dir;             // many models: every .gguf file here (docs/server.md)
    uint64_t models_memory = 0;         // what those models may take together; 0: MemAvailable
    int32_t keep_alive = 300;           // a model's idle seconds before it is unloaded; -1: never
    std::vector<ServedModelEntry> models;  // server.models: no flag, the file only
};

// The `plugins:` section's policy for what a plugin file must show before its code runs.
struct PluginPolicy {
    static constexpr uint32_t kMaxCreateTimeout = 3600;
    // plugins.allow_without_note: load a plugin lacking FERROX_PLUGIN_NOTE, whose
    // constructors and describe() then run before its ABI and ISA are known.
    bool allow_without_note = false;
    // plugins.create_timeout: seconds a plugin's create() may take before the
    // backend is given up on (init-failed); a CUDA context takes a few.
    uint32_t create_timeout = 60;
};

struct FERROX_API Config {
    std::string source;  // the file it came from, or "<built-in default>"
    std::vector<std::filesystem::path> plugin_paths;  // plugins.paths, relative ones resolved
                                                      // against the config file's folder
    std::vector<std::string> backend_order{"cpu"};    // backends.order, never empty
    std::vector<BackendConfig> backends;  // one per name in backend_order, in that order
    PluginPolicy plugins;                 // plugins.allow_without_note, plugins.create_timeout
    bool registry_strict = false;         // registry.strict
    std::string log_level = "info";       // log.level: trace|debug|info|warn|error|off
    std::string log_format = "text";      // log.format: text|json
    ServerConfig server;                  // server.*

    // The entry for `name`, or nullptr when backends.order does not list it.
    const BackendConfig* backend(std::string_view name) const;
};

// The name Config::source carries when no file was found.
inline constexpr std::string_view kBuiltInConfigSource = "<built-in default>";

// Parses YAML text. `source_name` starts every error message ("<source>:<line>:<col>: ...")
// and, unless it is a "<...>" placeholder, its folder anchors relative plugins.paths.
// Empty text (or only comments) gives the built-in default.
FERROX_API Expected<Config> parse_config(std::string_view yaml_text, std::string_view source_name);

// Reads and parses one file; relative plugins.paths become absolute against its folder.
FERROX_API Expected<Config> load_config_file(const std::filesystem::path& path);

// The built-in default: what an empty file means; config/ferrox.yaml spells it out.
FERROX_API Config default_config();

struct ConfigSearch {
    std::optional<std::filesystem::path> explicit_path;  // --config
    std::filesystem::path sysconfdir;  // empty: the compiled-in FERROX_INSTALL_SYSCONFDIR
};

// The compiled-in system configuration folder (e.g. /etc or /usr/local/etc).
FERROX_API std::filesystem::path default_sysconfdir();

// Where load_config looks, in order, for `--help` and diagnostics:
//   1. the explicit path (--config), alone when given;
//   2. else $FERROX_CONFIG, alone when set and non-empty;
//   3. else $XDG_CONFIG_HOME/ferrox/ferrox.yaml (XDG_CONFIG_HOME defaults to ~/.config),
//      then <sysconfdir>/ferrox/ferrox.yaml.
// The built-in default, used when none of these exists, is not a path and is not listed.
FERROX_API std::vector<std::filesystem::path> config_candidates(const ConfigSearch& search);

// Loads the first candidate that exists, else the built-in default. A file named
// explicitly (--config or $FERROX_CONFIG) that does not exist is an error; the
// well-known locations are skipped when absent. A file that exists but is unreadable
// or invalid is an error, never silently skipped.
FERROX_API Expected<Config> load_config(const ConfigSearch& search);

}  // namespace ferrox
