#include "ferrox/plugin_loader.h"

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "call_guard.h"
#include "elf_note.h"
#include "ferrox/cpu_features.h"
#include "ferrox/escape.h"
#include "ferrox/log.h"
#include "trusted_open.h"

namespace fs = std::filesystem;

namespace ferrox {

std::string_view state_name(PluginState state) {
    switch (state) {
        case PluginState::Ready:
            return "ready";
        case PluginState::NotSelected:
            return "not-selected";
        case PluginState::NotFound:
            return "not-found";
        case PluginState::NotALibrary:
            return "not-a-library";
        case PluginState::MissingLibrary:
            return "missing-library";
        case PluginState::MissingSymbol:
            return "missing-symbol";
        case PluginState::AbiMismatch:
            return "abi-mismatch";
        case PluginState::IsaUnsupported:
            return "isa-unsupported";
        case PluginState::InsecurePermissions:
            return "insecure-permissions";
        case PluginState::NoDriver:
            return "no-driver";
        case PluginState::NoDevice:
            return "no-device";
        case PluginState::InitFailed:
            return "init-failed";
        case PluginState::NoNote:
            return "no-note";
        case PluginState::BadOptions:
            return "bad-options";
    }
    return "?";
}

bool is_failure(PluginState state) {
    return state != PluginState::Ready && state != PluginState::NotSelected;
}

namespace {

constexpr std::string_view kPrefix = "libferrox_";
constexpr std::string_view kSuffix = ".so";

// "libferrox_cuda.so" -> "cuda"; nullopt for any other file name.
std::optional<std::string> plugin_name_of(const fs::path& file) {
    const std::string f = file.filename().string();
    if (f.size() <= kPrefix.size() + kSuffix.size() || !f.starts_with(kPrefix) ||
        !f.ends_with(kSuffix))
        return std::nullopt;
    std::string name = f.substr(kPrefix.size(), f.size() - kPrefix.size() - kSuffix.size());
    const bool valid = std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    return valid ? std::optional(name) : std::nullopt;
}

fs::path executable_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}

void append_path_list(std::vector<SearchDir>& dirs, std::string_view list,
                      std::string_view origin) {
    while (!list.empty()) {
        const size_t colon = list.find(':');
        const std::string_view item = list.substr(0, colon);
        // An empty entry would mean "the current directory" to a shell, and a
        // relative one resolves against it: neither is searched.
        if (!item.empty() && fs::path(item).is_relative())
            logger().warn(
                "{}: ignoring relative entry '{}' (the current directory is never "
                "searched; give an absolute folder)",
                origin, escape_text(item));
        else if (!item.empty())
            dirs.push_back({fs::path(item), std::string(origin)});
        if (colon == std::string_view::npos) break;
        list.remove_prefix(colon + 1);
    }
}

struct Opened {
    PluginState state;
    std::string reason;
};

// Classifies a dlopen failure by dlerror()'s text, which is all glibc gives.
Opened classify_dlopen_failure(const std::string& what) {
    if (what.find("cannot open shared object file") != std::string::npos)
        return {PluginState::MissingLibrary, what};
    if (what.find("invalid ELF header") != std::string::npos ||
        what.find("file too short") != std::string::npos ||
        what.find("wrong ELF class") != std::string::npos ||
        what.find("not a dynamic") != std::string::npos)
        return {PluginState::NotALibrary, what};
    if (what.find("undefined symbol") != std::string::npos)
        return {PluginState::MissingSymbol, what};
    return {PluginState::InitFailed, what};
}

// dlerror() names the descriptor path dlopen() was given; the reader wants the file.
std::string name_the_file(std::string text, const std::string& loaded_as, const fs::path& file) {
    for (size_t at = text.find(loaded_as); at != std::string::npos;
         at = text.find(loaded_as, at + file.native().size()))
        text.replace(at, loaded_as.size(), file.native());
    return text;
}

std::string message_text(const ferrox_message& m) {
    return std::string(m.text, strnlen(m.text, sizeof m.text));
}

std::string or_empty(const char* s) { return s ? std::string(s) : std::string(); }

// The checks the file alone can answer (from its note), before any of its code runs.
bool check_metadata(PluginRecord& record) {
    if (FERROX_ABI_MAJOR(record.abi_version) != FERROX_ABI_VERSION_MAJOR) {
        record.state = PluginState::AbiMismatch;
        record.reason =
            fmt::format("plugin speaks ABI {}.{}, this ferrox speaks {}.{}",
                        FERROX_ABI_MAJOR(record.abi_version), FERROX_ABI_MINOR(record.abi_version),
                        FERROX_ABI_VERSION_MAJOR, FERROX_ABI_VERSION_MINOR);
        return false;
    }
    if (auto lacking = cpu_features().missing(record.isa_required); !lacking.empty()) {
        record.state = PluginState::IsaUnsupported;
        record.reason = fmt::format("needs CPU features this host or its OS does not enable: {}",
                                    fmt::join(lacking, ", "));
        return false;
    }
    return true;
}

bool check_name(PluginRecord& record, const std::string& described, std::string_view where) {
    if (described == record.name) return true;
    record.state = PluginState::InitFailed;
    record.reason = fmt::format("file is named for backend '{}' but its {} says '{}'", record.name,
                                where, described);
    return false;
}

// One create() call and all it reads, owned jointly by the loader and the
// thread that makes the call: when the loader stops waiting, the thread (and
// the plugin code in it) still has valid arguments, and the library stays
// loaded for it.
struct CreateCall {
    std::shared_ptr<boost::dll::shared_library> library;
    std::vector<std::pair<std::string, std::string>> option_text;
    std::vector<ferrox_option> options;
    std::unique_ptr<HostContext> host;
    ferrox_host table{};
    ferrox_backend* raw = nullptr;
    ferrox_message message{};
    ferrox_status status = FERROX_ERR_INTERNAL;
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false, abandoned = false;
};

// Runs create() on a thread of its own and waits at most `timeout`. False when
// it did not return in time: the call is abandoned (a backend it returns later
// is destroyed on that thread), never waited for again.
bool create_within(const std::shared_ptr<CreateCall>& call, std::chrono::seconds timeout) {
    auto create = call->library->get<ferrox_status(const ferrox_host*, const ferrox_option*, size_t,
                                                   ferrox_backend**, ferrox_message*)>(
        FERROX_PLUGIN_CREATE_SYMBOL);
    std::thread([call, create] {
        const ferrox_status status = create(&call->table, call->options.data(),
                                            call->options.size(), &call->raw, &call->message);
        std::lock_guard lock(call->mutex);
        call->status = status;
        call->done = true;
        ferrox_backend* late = call->raw;
        if (call->abandoned && status == FERROX_OK && late &&
            late->struct_size >= offsetof(ferrox_backend, destroy) + sizeof late->destroy &&
            late->destroy)
            late->destroy(late);
        call->finished.notify_all();
    }).detach();
    std::unique_lock lock(call->mutex);
    if (call->finished.wait_for(lock, timeout, [&] { return call->done; })) return true;
    call->abandoned = true;
    return false;
}

// Everything from file checks to create(); fills `record` and returns the
// state. No plugin code runs before the file's trust chain, its ELF header and
// its note were checked; a plugin without the note runs only when the
// configuration allows it, and then describe() runs before the ABI check.
void open_plugin(PluginRecord& record, const BackendConfig* settings, const PluginPolicy& policy) {
    auto opened = plugin::open_trusted(record.path);
    if (auto* failure = std::get_if<plugin::TrustFailure>(&opened)) {
        record.state =
            failure->insecure ? PluginState::InsecurePermissions : PluginState::NotALibrary;
        record.reason = failure->reason;
        return;
    }
    const plugin::TrustedFile& file = std::get<plugin::TrustedFile>(opened);
    const plugin::NoteResult note =
        plugin::read_plugin_note(file.fd.get(), file.size, record.path.string());
    if (const auto* bad = std::get_if<plugin::NotALibrary>(&note)) {
        record.state = PluginState::NotALibrary;
        record.reason = bad->reason;
        return;
    }
    const auto* from_note = std::get_if<plugin::PluginNote>(&note);
    if (from_note) {
        record.metadata_source = "elf-note";
        record.abi_version = from_note->abi_version;
        record.version = from_note->version;
        record.isa_required = from_note->isa;
        record.driver_libraries = from_note->drivers;
        record.description = from_note->description;
        if (!check_name(record, from_note->name, "note") || !check_metadata(record)) return;
    } else {
        const std::string& why = std::get<plugin::NoNote>(note).reason;
        if (!policy.allow_without_note) {
            record.state = PluginState::NoNote;
            record.reason = fmt::format(
                "{}: {}; without it the plugin's code would run before its ABI and CPU "
                "needs are known (plugins.allow_without_note: true loads it anyway)",
                record.path.string(), why);
            return;
        }
        logger().warn(
            "backend {}: loading {} without a ferrox note ({}) because plugins.allow_without_note "
            "is set; its constructors and describe() run before any check",
            record.name, record.path.string(), why);
        record.metadata_source = fmt::format("describe() (ran after loading: {})", why);
    }
    logger().debug("backend {}: loading {}", record.name, record.path.string());

    auto library = std::make_shared<boost::dll::shared_library>();
    const std::string loaded_as = plugin::fd_path(file.fd);
    try {
        // The plugin's own code runs from here (its constructors): a fatal signal names it.
        const plugin::PluginCallScope in_plugin(record.name, record.path,
                                                "its constructors (dlopen)");
        // The descriptor that was checked, not the path: a file swapped in since
        // cannot be the one loaded.
        library->load(loaded_as,
                      boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        const Opened o = classify_dlopen_failure(e.what());
        record.state = o.state;
        record.reason = name_the_file(o.reason, loaded_as, record.path);
        return;
    }
    for (const char* symbol : {FERROX_PLUGIN_DESCRIBE_SYMBOL, FERROX_PLUGIN_CREATE_SYMBOL}) {
        if (!library->has(symbol)) {
            record.state = PluginState::MissingSymbol;
            record.reason = fmt::format("{} does not export '{}'; not a ferrox plugin",
                                        record.path.string(), symbol);
            return;
        }
    }

    auto describe = library->get<ferrox_status(ferrox_plugin_info*)>(FERROX_PLUGIN_DESCRIBE_SYMBOL);
    ferrox_plugin_info info{};
    info.struct_size = sizeof info;
    ferrox_status described = FERROX_ERR_INTERNAL;
    {
        const plugin::PluginCallScope in_plugin(record.name, record.path, "describe()");
        described = describe(&info);
    }
    if (described != FERROX_OK) {
        record.state = PluginState::InitFailed;
        record.reason = "describe() failed";
        return;
    }
    if (from_note) {
        // One plugin, one truth: a stale note is refused rather than believed.
        if (info.abi_version != from_note->abi_version) {
            record.state = PluginState::InitFailed;
            record.reason = fmt::format("its note says ABI {:#x} but describe() says {:#x}",
                                        from_note->abi_version, info.abi_version);
            return;
        }
        if (!check_name(record, or_empty(info.name), "describe()")) return;
    } else {
        record.abi_version = info.abi_version;
        // Only the members both sides know: an older plugin wrote a shorter prefix.
        record.version = or_empty(info.version);
        record.isa_required = or_empty(info.isa_required);
        record.driver_libraries = or_empty(info.driver_libraries);
        record.description = or_empty(info.description);
        if (!check_metadata(record) || !check_name(record, or_empty(info.name), "describe()"))
            return;
    }

    // The section against what the plugin declares, before any of it reaches create().
    auto declared = read_declared_options(info);
    if (!declared) {
        record.state = PluginState::InitFailed;
        record.reason =
            fmt::format("describe() declares malformed options: {}", declared.error().message());
        return;
    }
    record.options = std::move(*declared);
    auto call = std::make_shared<CreateCall>();
    call->library = library;
    if (settings) call->option_text = settings->options;
    if (!record.options.empty()) {
        auto checked = apply_option_schema(
            settings ? *settings : BackendConfig{record.name, false, {}, {}}, record.options);
        if (!checked) {
            record.state = PluginState::BadOptions;
            record.reason = checked.error().message();
            return;
        }
        call->option_text = std::move(*checked);
    }
    for (const auto& [key, value] : call->option_text)
        call->options.push_back({key.c_str(), value.c_str()});
    call->host = std::make_unique<HostContext>();
    call->host->backend_name = record.name;
    call->table = make_host_table(call->host.get());
    logger().debug("backend {}: calling create()", record.name);
    bool returned = false;
    {
        const plugin::PluginCallScope in_plugin(record.name, record.path, "create()");
        returned = create_within(call, std::chrono::seconds(policy.create_timeout));
    }
    if (!returned) {
        record.state = PluginState::InitFailed;
        record.reason = fmt::format(
            "create() did not return within {} s (plugins.create_timeout); the backend is given "
            "up on and its call left running",
            policy.create_timeout);
        return;
    }
    ferrox_backend* raw = call->raw;
    const ferrox_status status = call->status;
    const ferrox_message& message = call->message;
    if (status != FERROX_OK || !raw) {
        record.state = status == FERROX_ERR_NO_DRIVER   ? PluginState::NoDriver
                       : status == FERROX_ERR_NO_DEVICE ? PluginState::NoDevice
                                                        : PluginState::InitFailed;
        record.reason = message_text(message);
        if (record.reason.empty())
            record.reason =
                raw ? "create() failed without a message" : "create() returned no backend";
        return;
    }
    if (FERROX_ABI_MAJOR(raw->abi_version) != FERROX_ABI_VERSION_MAJOR ||
        raw->struct_size < offsetof(ferrox_backend, destroy) + sizeof raw->destroy) {
        record.state = PluginState::AbiMismatch;
        record.reason = fmt::format("backend table declares ABI {}.{} and {} bytes",
                                    FERROX_ABI_MAJOR(raw->abi_version),
                                    FERROX_ABI_MINOR(raw->abi_version), raw->struct_size);
        if (raw->destroy) raw->destroy(raw);
        return;
    }
    auto backend = std::make_shared<Backend>(raw, std::static_pointer_cast<void>(library),
                                             std::move(call->host), record.name);
    for (uint32_t d = 0; d < backend->device_count(); ++d) {
        auto dev = backend->device_info(d);
        if (!dev) continue;
        record.devices.push_back({dev->type, dev->name, dev->memory_total, dev->memory_free});
    }
    if (record.devices.empty()) {
        record.state = PluginState::NoDevice;
        record.reason = "initialised, but reports no device";
        return;
    }
    record.state = PluginState::Ready;
    record.backend = std::move(backend);
}

}  // namespace

std::vector<SearchDir> plugin_search_dirs(const Config& config, const LoaderOptions& options) {
    std::vector<SearchDir> dirs;
    for (const auto& d : options.plugin_dirs) dirs.push_back({d, "--plugin-dir"});
    if (options.read_environment)
        if (const char* env = std::getenv("FERROX_PLUGIN_PATH"))
            append_path_list(dirs, env, "FERROX_PLUGIN_PATH");
    for (const auto& d : config.plugin_paths) dirs.push_back({d, "plugins.paths"});
    dirs.push_back(
        {options.install_dir.empty() ? fs::path(FERROX_INSTALL_PLUGIN_DIR) : options.install_dir,
         "install folder"});
    const fs::path exe = options.exe_dir ? *options.exe_dir : executable_dir();
    if (!exe.empty())
        dirs.push_back({(exe / ".." / "lib" / "ferrox" / "plugins").lexically_normal(),
                        "beside the executable"});
    // Relative folders would depend on the current directory: resolve them once, here.
    for (auto& d : dirs) d.path = fs::absolute(d.path).lexically_normal();
    return dirs;
}

PluginSet PluginSet::load(const Config& config, const LoaderOptions& options) {
    PluginSet set;
    set.search_dirs_ = plugin_search_dirs(config, options);

    // First file of each name in search order wins; later ones are shadowed.
    std::map<std::string, size_t> first_of;
    for (const auto& dir : set.search_dirs_) {
        std::error_code ec;
        std::vector<fs::path> files;
        for (const auto& entry : fs::directory_iterator(dir.path, ec))
            if (plugin_name_of(entry.path())) files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        for (const auto& file : files) {
            PluginRecord record;
            record.name = *plugin_name_of(file);
            record.path = file;
            record.found_in = dir.origin;
            if (auto it = first_of.find(record.name); it != first_of.end()) {
                record.reason =
                    fmt::format("shadowed by {}", set.records_[it->second].path.string());
            } else {
                first_of.emplace(record.name, set.records_.size());
            }
            set.records_.push_back(std::move(record));
        }
    }

    for (const auto& name : config.backend_order) {
        const BackendConfig* settings = config.backend(name);
        auto it = first_of.find(name);
        if (it == first_of.end()) {
            PluginRecord missing;
            missing.name = name;
            missing.state = PluginState::NotFound;
            missing.required = settings && settings->required;
            std::vector<std::string> where;
            for (const auto& d : set.search_dirs_)
                where.push_back(fmt::format("{} ({})", d.path.string(), d.origin));
            missing.reason = fmt::format("no libferrox_{}.so in: {}", name, fmt::join(where, ", "));
            set.records_.push_back(std::move(missing));
            continue;
        }
        PluginRecord& record = set.records_[it->second];
        record.required = settings && settings->required;
        open_plugin(record, settings, config.plugins);
        if (record.state == PluginState::Ready) set.selected_.push_back(record.backend);
        if (record.state == PluginState::Ready)
            logger().debug("backend {} ready from {}", record.name, record.path.string());
        else
            logger().log(record.required || record.state == PluginState::BadOptions
                             ? spdlog::level::err
                             : spdlog::level::warn,
                         "backend {} {}: {}", record.name, state_name(record.state), record.reason);
    }
    for (auto& record : set.records_)
        if (record.state == PluginState::NotSelected && record.reason.empty())
            record.reason = "not in backends.order; not opened";
    return set;
}

std::vector<const PluginRecord*> PluginSet::option_errors() const {
    std::vector<const PluginRecord*> out;
    for (const auto& r : records_)
        if (r.state == PluginState::BadOptions) out.push_back(&r);
    return out;
}

std::vector<const PluginRecord*> PluginSet::required_failures() const {
    std::vector<const PluginRecord*> out;
    for (const auto& r : records_)
        if (r.required && r.state != PluginState::Ready) out.push_back(&r);
    return out;
}

}  // namespace ferrox
