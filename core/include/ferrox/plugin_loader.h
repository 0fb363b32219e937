// Finds libferrox_<name>.so files, opens only the backends the configuration
// selects from files and folders only root or the running user can write,
// checks each one's ABI and ISA from its ELF note before running any of its
// code (describe() for plugins without one), and gives every file a visible,
// typed state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/backend.h"
#include "ferrox/config.h"

namespace ferrox {

enum class PluginState {
    Ready,                // opened, ABI matched, created, has devices: selected
    NotSelected,          // present but not in backends.order: never opened
    NotFound,             // in backends.order, no file in any search folder
    NotALibrary,          // not an ELF shared object
    MissingLibrary,       // a library it needs is not installed
    MissingSymbol,        // lacks ferrox_plugin_describe / ferrox_plugin_create
    AbiMismatch,          // built for another ABI major
    IsaUnsupported,       // needs CPU features this host (or its OS) lacks
    InsecurePermissions,  // the file or a folder above it is writable by another user
    NoDriver,             // its driver library is absent or too old
    NoDevice,             // driver present, no usable device
    InitFailed,           // create() or a later check failed, or create() timed out
    NoNote,               // no FERROX_PLUGIN_NOTE and plugins.allow_without_note is off
    BadOptions,           // its section does not match the options it declares (a config
                          // error: it stops every front end, required or not)
};

FERROX_API std::string_view state_name(PluginState state);  // "ready", "no-driver", ...
FERROX_API bool is_failure(PluginState state);

struct DeviceSummary {
    ferrox_device_type type = FERROX_DEVICE_CPU;
    std::string name;
    uint64_t memory_total = 0;
    uint64_t memory_free = 0;
};

struct PluginRecord {
    std::string name;
    std::filesystem::path path;  // empty for NotFound
    std::string found_in;        // which search folder rule found it
    PluginState state = PluginState::NotSelected;
    std::string reason;  // human message for every state but Ready
    bool required = false;
    uint32_t abi_version = 0;  // from the note or describe(), 0 if never read
    // "elf-note" when the metadata came from the file before loading it, else
    // "describe() (...)" with why it could not (empty: never opened).
    std::string metadata_source;
    std::string version, isa_required, driver_libraries, description;
    std::vector<OptionSpec> options;  // what it declares (ABI 1.6); empty: none
    std::vector<DeviceSummary> devices;
    std::shared_ptr<Backend> backend;  // set when Ready
};

struct SearchDir {
    std::filesystem::path path;
    std::string origin;  // "--plugin-dir", "FERROX_PLUGIN_PATH", "plugins.paths", ...
};

struct LoaderOptions {
    std::vector<std::filesystem::path> plugin_dirs;  // --plugin-dir, in order
    bool read_environment = true;                    // honour FERROX_PLUGIN_PATH
    std::filesystem::path install_dir;               // empty: the compiled-in one
    std::optional<std::filesystem::path> exe_dir;    // empty: /proc/self/exe's folder
};

// Search order: --plugin-dir, FERROX_PLUGIN_PATH, plugins.paths, the install
// folder, <exe>/../lib/ferrox/plugins. Never the current directory: relative
// FERROX_PLUGIN_PATH entries are ignored with a warning (--plugin-dir may be
// relative; it is made absolute once).
FERROX_API std::vector<SearchDir> plugin_search_dirs(const Config& config,
                                                     const LoaderOptions& options);

// The options a plugin's describe() declares (ABI 1.6), copied out of the plugin
// and checked: keys [a-z0-9_]+ and unique, known kinds, non-empty ranges and word
// lists, bounded strings, defaults that pass their own rule. Empty for a plugin
// that declares none (every plugin older than 1.6). An error names the option.
FERROX_API Expected<std::vector<OptionSpec>> read_declared_options(const ferrox_plugin_info& info);

class FERROX_API PluginSet {
  public:
    static PluginSet load(const Config& config, const LoaderOptions& options = {});

    const std::vector<PluginRecord>& records() const { return records_; }
    const std::vector<SearchDir>& search_dirs() const { return search_dirs_; }
    // Ready backends in backends.order.
    const std::vector<std::shared_ptr<Backend>>& selected() const { return selected_; }
    // Records of required backends that are not Ready.
    std::vector<const PluginRecord*> required_failures() const;
    // Records whose configuration section their plugin refused (BadOptions).
    std::vector<const PluginRecord*> option_errors() const;

  private:
    std::vector<PluginRecord> records_;
    std::vector<SearchDir> search_dirs_;
    std::vector<std::shared_ptr<Backend>> selected_;
};

}  // namespace ferrox
