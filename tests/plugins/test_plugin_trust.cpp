// Where plugin code may come from: only files and folders nobody but root or
// the running user can write, with the metadata checked from the file (its
// ELF note) before any of its code runs. Fixtures built with
// FIXTURE_TRAP_LOAD abort in a static constructor, so a test that loads one
// passes only if the loader refused it before dlopen().
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>

#include "plugin_env.h"

using namespace ferrox;
using namespace ferrox::test;
namespace fs = std::filesystem;

namespace {

bool mapped_in_this_process(const fs::path& file) {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.find(file.string()) != std::string::npos) return true;
    return false;
}

fs::path make_folder(const fs::path& path, mode_t mode) {
    fs::create_directories(path);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    return path;
}

PluginRecord load_one(const fs::path& dir, const std::string& name) {
    const auto set =
        PluginSet::load(config_from("backends: {order: [" + name + "]}"), only_folder(dir));
    return record_of(set, name);
}

}  // namespace

TEST_CASE("a plugin in a group-writable folder is refused and the folder is named") {
    TempDir dir;
    const auto folder = make_folder(dir / "plugins", 0775);
    const auto fake = install_plugin(fixture("fake"), folder);
    const auto r = load_one(folder, "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains(folder.string()) && Catch::Contains("group-writable"));
    CHECK_FALSE(mapped_in_this_process(fake));
}

TEST_CASE("a world-writable folder anywhere above a plugin makes it insecure") {
    TempDir dir;
    const auto open_above = make_folder(dir / "shared", 0777);
    const auto folder = make_folder(open_above / "plugins", 0755);
    install_plugin(fixture("fake"), folder);
    const auto r = load_one(folder, "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains(open_above.string() + " is world-writable"));
}

TEST_CASE("a sticky world-writable folder is safe above a folder but not as the plugin's own") {
    TempDir dir;
    const auto sticky = make_folder(dir / "tmp", 01777);
    const auto below = make_folder(sticky / "mine", 0755);
    install_plugin(fixture("fake"), below);
    CHECK(load_one(below, "fake").state == PluginState::Ready);

    install_plugin(fixture("fake"), sticky);
    const auto r = load_one(sticky, "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains(sticky.string()));
}

TEST_CASE("a group-writable plugin file is refused") {
    TempDir dir;
    const auto fake = install_plugin(fixture("fake"), dir.path());
    REQUIRE(::chmod(fake.c_str(), 0664) == 0);
    const auto r = load_one(dir.path(), "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains("group-writable") && Catch::Contains("664"));
}

TEST_CASE("a plugin file or folder owned by another user is refused") {
    if (::geteuid() != 0) {
        WARN("not root: cannot give a file to another user; ownership cases not run");
        return;
    }
    TempDir dir;
    const auto fake = install_plugin(fixture("fake"), dir.path());
    REQUIRE(::chown(fake.c_str(), 4242, 4242) == 0);
    auto r = load_one(dir.path(), "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains("owned by uid 4242"));

    const auto folder = make_folder(dir / "theirs", 0755);
    install_plugin(fixture("fake"), folder);
    REQUIRE(::chown(folder.c_str(), 4242, 4242) == 0);
    r = load_one(folder, "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains("folder " + folder.string()));
}

TEST_CASE("a symlinked plugin is judged by the folders of the file it points to") {
    TempDir dir;
    const auto open_folder = make_folder(dir / "open", 0777);
    const auto target = install_plugin(fixture("fake"), open_folder);
    const auto folder = make_folder(dir / "plugins", 0755);
    fs::create_symlink(target, folder / "libferrox_fake.so");
    const auto r = load_one(folder, "fake");
    CHECK(r.state == PluginState::InsecurePermissions);
    CHECK_THAT(r.reason, Catch::Contains(open_folder.string()));
}

TEST_CASE("a FIFO named like a plugin is not-a-library and does not block the loader") {
    TempDir dir;
    REQUIRE(::mkfifo((dir / "libferrox_fifo.so").c_str(), 0644) == 0);
    const auto r = load_one(dir.path(), "fifo");
    CHECK(r.state == PluginState::NotALibrary);
    CHECK_THAT(r.reason, Catch::Contains("not a regular file"));
}

TEST_CASE(
    "relative FERROX_PLUGIN_PATH entries are ignored, so the current directory is not "
    "searched") {
    TempDir dir;
    install_plugin(fixture("fake"), make_folder(dir / "plugins", 0755));
    install_plugin(fixture("fake"), dir.path());
    const auto old = fs::current_path();
    fs::current_path(dir.path());
    ::setenv("FERROX_PLUGIN_PATH", ".:plugins:./plugins", 1);
    LoaderOptions o;
    o.install_dir = dir / "none";
    o.exe_dir = dir / "none";
    const auto dirs = plugin_search_dirs(Config{}, o);
    const auto set = PluginSet::load(config_from("backends: {order: [fake]}"), o);
    ::unsetenv("FERROX_PLUGIN_PATH");
    fs::current_path(old);
    CHECK(dirs.size() == 2);  // the install folder and beside the executable, nothing else
    CHECK(record_of(set, "fake").state == PluginState::NotFound);
}

TEST_CASE("a plugin whose note needs a CPU feature the host lacks is refused before it loads") {
    TempDir dir;
    const auto isa = install_plugin(fixture("isa"), dir.path());
    const auto r = load_one(dir.path(), "isa");  // FIXTURE_TRAP_LOAD: aborts if loaded
    CHECK(r.state == PluginState::IsaUnsupported);
    CHECK(r.metadata_source == "elf-note");
    CHECK_FALSE(mapped_in_this_process(isa));
}

TEST_CASE("a plugin whose note states another ABI major is refused before it loads") {
    TempDir dir;
    install_plugin(fixture("future"), dir.path());
    const auto r = load_one(dir.path(), "future");  // FIXTURE_TRAP_LOAD
    CHECK(r.state == PluginState::AbiMismatch);
    CHECK_THAT(r.reason, Catch::Contains("ABI 2.0"));
    CHECK(r.metadata_source == "elf-note");
}

TEST_CASE("a plugin whose note names another backend is refused before it loads") {
    TempDir dir;
    install_plugin(fixture("liar"), dir.path());
    const auto r = load_one(dir.path(), "liar");  // FIXTURE_TRAP_LOAD
    CHECK(r.state == PluginState::InitFailed);
    CHECK_THAT(r.reason, Catch::Contains("note says 'cpu'"));
}

TEST_CASE("a plugin without a note is refused before it loads unless the config allows it") {
    TempDir dir;
    const auto nonote = install_plugin(fixture("nonote"), dir.path());
    const auto refused = load_one(dir.path(), "nonote");
    CHECK(refused.state == PluginState::NoNote);
    CHECK(state_name(refused.state) == "no-note");
    CHECK_THAT(refused.reason, Catch::Contains(nonote.string()) &&
                                   Catch::Contains("plugins.allow_without_note: true"));
    CHECK_FALSE(mapped_in_this_process(nonote));
}

TEST_CASE("with plugins.allow_without_note a plugin without a note loads through describe()") {
    TempDir dir;
    install_plugin(fixture("nonote"), dir.path());
    install_plugin(fixture("nonoteisa"), dir.path());
    const auto load_allowed = [&](const std::string& name) {
        const auto set = PluginSet::load(
            config_from("plugins: {allow_without_note: true}\nbackends: {order: [" + name + "]}"),
            only_folder(dir.path()));
        return record_of(set, name);
    };
    const auto ok = load_allowed("nonote");
    CHECK(ok.state == PluginState::Ready);
    CHECK_THAT(ok.metadata_source,
               Catch::StartsWith("describe()") && Catch::Contains(".note.ferrox.plugin"));
    const auto isa = load_allowed("nonoteisa");
    CHECK(isa.state == PluginState::IsaUnsupported);
    CHECK_THAT(isa.metadata_source, Catch::StartsWith("describe()"));
}

TEST_CASE("a create() that never returns is given up on after plugins.create_timeout") {
    TempDir dir;
    install_plugin(fixture("hangcreate"), dir.path());
    const auto start = std::chrono::steady_clock::now();
    const auto set = PluginSet::load(
        config_from("plugins: {create_timeout: 1}\nbackends: {order: [hangcreate]}"),
        only_folder(dir.path()));
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto& r = record_of(set, "hangcreate");
    CHECK(r.state == PluginState::InitFailed);
    CHECK_THAT(r.reason, Catch::Contains("create() did not return within 1 s"));
    CHECK(waited >= 1.0);
    CHECK(waited < 10.0);
}

TEST_CASE("a position-independent executable named as a plugin is refused before dlopen") {
    TempDir dir;
    const auto pie = install_plugin(fixture("pie"), dir.path());
    const auto r = load_one(dir.path(), "pie");
    CHECK(r.state == PluginState::NotALibrary);
    CHECK_THAT(r.reason, Catch::Contains(pie.string()) && Catch::Contains("is an executable") &&
                             !Catch::Contains("/proc/self/fd"));
    CHECK_FALSE(mapped_in_this_process(pie));
}

TEST_CASE("a plugin folder whose name holds a NUL byte is not searched as the shorter name") {
    TempDir dir;
    install_plugin(fixture("fake"), dir.path());
    // The system calls would stop at the NUL and read dir itself.
    std::string with_nul = dir.path().string();
    with_nul += std::string("\0/elsewhere", 11);
    LoaderOptions o = only_folder(dir.path());
    o.plugin_dirs = {std::filesystem::path(with_nul)};
    const auto set = PluginSet::load(config_from("backends: {order: [fake]}"), o);
    const auto& r = record_of(set, "fake");
    CHECK(r.state != PluginState::Ready);
    CHECK_THAT(r.reason, Catch::Contains("NUL byte"));
}

TEST_CASE("the real plugins carry the note, and it agrees with describe()") {
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    const auto r = load_one(dir.path(), "cpu");
    REQUIRE(r.state == PluginState::Ready);
    CHECK(r.metadata_source == "elf-note");
    CHECK(r.abi_version == FERROX_ABI_VERSION);
    CHECK_THAT(r.description, Catch::Contains("CPU backend"));
}

TEST_CASE("a note that runs past its section is not-a-library, not a crash") {
    TempDir dir;
    const auto path = install_plugin(fixture("fake"), dir.path());
    std::string bytes;
    {
        std::ifstream in(path, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    // namesz 7, descsz, type "FX"1, then "ferrox": make descsz absurd.
    const std::string owner_at = std::string("\x01\x00\x58\x46", 4) + "ferrox";
    const size_t at = bytes.find(owner_at);
    REQUIRE(at != std::string::npos);
    REQUIRE(at >= 8);
    const uint32_t huge = 0x7fffff00u;
    std::memcpy(&bytes[at - 4], &huge, 4);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    const auto r = load_one(dir.path(), "fake");
    CHECK(r.state == PluginState::NotALibrary);
    CHECK_THAT(r.reason, Catch::Contains("runs past"));
}

TEST_CASE("a plugin claiming four billion devices is bounded, not looped over") {
    TempDir dir;
    install_plugin(fixture("manydevices"), dir.path());
    const auto r = load_one(dir.path(), "manydevices");
    CHECK(r.state == PluginState::Ready);
    CHECK(r.devices.size() == 1);  // device 0 exists; the rest of the claim fails per call
    REQUIRE(r.backend);
    CHECK(r.backend->device_count() == Backend::kMaxDevices);
}
