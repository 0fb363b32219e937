#include <unistd.h>

#include <fstream>

#include "plugin_env.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

bool mapped_in_this_process(const std::filesystem::path& file) {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.find(file.string()) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("a text file named like a plugin is not-a-library and the cpu backend still loads") {
    TempDir dir;
    dir.write("libferrox_x.so", "this is not a shared library\n");
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [x, cpu]}"), only_folder(dir.path()));
    CHECK(record_of(set, "x").state == PluginState::NotALibrary);
    CHECK_THAT(record_of(set, "x").reason, Catch::Contains("not an ELF"));
    CHECK(record_of(set, "cpu").state == PluginState::Ready);
    REQUIRE(set.selected().size() == 1);
    CHECK(set.selected()[0]->name() == "cpu");
}

TEST_CASE("an ELF library without the entry symbols is missing-symbol") {
    TempDir dir;
    install_plugin(fixture("nosym"), dir.path());
    install_plugin(real_plugin("cpu"), dir.path());
    // Without a note as well: refused as no-note unless allowed, and then missing-symbol.
    const auto set = PluginSet::load(
        config_from("plugins: {allow_without_note: true}\nbackends: {order: [nosym, cpu]}"),
        only_folder(dir.path()));
    CHECK(record_of(set, "nosym").state == PluginState::MissingSymbol);
    CHECK_THAT(record_of(set, "nosym").reason, Catch::Contains("ferrox_plugin_describe"));
    CHECK(record_of(set, "cpu").state == PluginState::Ready);
}

TEST_CASE("a plugin built for a newer ABI major is refused and never created") {
    TempDir dir;
    install_plugin(fixture("future"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [future]}"), only_folder(dir.path()));
    const auto& r = record_of(set, "future");
    CHECK(r.state == PluginState::AbiMismatch);
    const std::string ours =
        fmt::format("{}.{}", FERROX_ABI_VERSION_MAJOR, FERROX_ABI_VERSION_MINOR);
    CHECK_THAT(r.reason, Catch::Contains("ABI 2.0") && Catch::Contains(ours));
    CHECK(r.backend == nullptr);
    CHECK(set.selected().empty());
}

TEST_CASE("a plugin built for an older minor of the same ABI major loads") {
    TempDir dir;
    install_plugin(fixture("old"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [old]}"), only_folder(dir.path()));
    const auto& r = record_of(set, "old");
    INFO(r.reason);
    CHECK(r.state == PluginState::Ready);
    CHECK(r.abi_version == ((1u << 16) | 0u));
    CHECK(set.selected().size() == 1);
}

TEST_CASE("a plugin whose create fails is init-failed and carries its message") {
    TempDir dir;
    install_plugin(fixture("failing"), dir.path());
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [failing, cpu]}"), only_folder(dir.path()));
    CHECK(record_of(set, "failing").state == PluginState::InitFailed);
    CHECK_THAT(record_of(set, "failing").reason, Catch::Contains("deliberate create() failure"));
    CHECK(record_of(set, "cpu").state == PluginState::Ready);
}

TEST_CASE("a plugin that needs an uninstalled library is missing-library and names it") {
    TempDir dir;
    install_plugin(fixture("needslib"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [needslib]}"), only_folder(dir.path()));
    CHECK(record_of(set, "needslib").state == PluginState::MissingLibrary);
    CHECK_THAT(record_of(set, "needslib").reason, Catch::Contains("libferrox_fixture_dep.so"));
}

TEST_CASE("a world-writable plugin is refused and the rest still load") {
    TempDir dir;
    const auto fake = install_plugin(fixture("fake"), dir.path());
    install_plugin(real_plugin("cpu"), dir.path());
    REQUIRE(::chmod(fake.c_str(), 0777) == 0);
    const auto set =
        PluginSet::load(config_from("backends: {order: [fake, cpu]}"), only_folder(dir.path()));
    CHECK(record_of(set, "fake").state == PluginState::InsecurePermissions);
    CHECK_THAT(record_of(set, "fake").reason, Catch::Contains("world-writable"));
    CHECK_FALSE(mapped_in_this_process(fake));
    CHECK(record_of(set, "cpu").state == PluginState::Ready);
}

TEST_CASE("a plugin needing a CPU feature the host lacks is isa-unsupported") {
    TempDir dir;
    install_plugin(fixture("isa"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [isa]}"), only_folder(dir.path()));
    CHECK(record_of(set, "isa").state == PluginState::IsaUnsupported);
    CHECK_THAT(record_of(set, "isa").reason, Catch::Contains("no_such_feature"));
}

TEST_CASE("a plugin the configuration does not select is listed but never opened") {
    TempDir dir;
    const auto fake = install_plugin(fixture("fake"), dir.path(), "libferrox_unselected.so");
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set =
        PluginSet::load(config_from("backends: {order: [cpu]}"), only_folder(dir.path()));
    CHECK(record_of(set, "unselected").state == PluginState::NotSelected);
    CHECK_FALSE(mapped_in_this_process(fake));
}

TEST_CASE("a selected backend with no file is not-found and says where it looked") {
    TempDir dir;
    const auto set =
        PluginSet::load(config_from("backends: {order: [ghost]}"), only_folder(dir.path()));
    const auto& r = record_of(set, "ghost");
    CHECK(r.state == PluginState::NotFound);
    CHECK_THAT(r.reason, Catch::Contains(dir.path().string()) && Catch::Contains("--plugin-dir"));
}

TEST_CASE("a required backend that fails is reported but an optional one is not") {
    TempDir dir;
    install_plugin(fixture("failing"), dir.path());
    install_plugin(real_plugin("cpu"), dir.path());
    const auto optional =
        PluginSet::load(config_from("backends: {order: [failing, cpu]}"), only_folder(dir.path()));
    CHECK(optional.required_failures().empty());
    const auto required =
        PluginSet::load(config_from("backends: {order: [failing, cpu]}\nfailing: {required: true}"),
                        only_folder(dir.path()));
    REQUIRE(required.required_failures().size() == 1);
    CHECK(required.required_failures()[0]->name == "failing");
}

TEST_CASE("the file named for one backend that describes itself as another is refused") {
    TempDir dir;
    install_plugin(fixture("fake"), dir.path(), "libferrox_impostor.so");
    const auto set =
        PluginSet::load(config_from("backends: {order: [impostor]}"), only_folder(dir.path()));
    CHECK(record_of(set, "impostor").state == PluginState::InitFailed);
    CHECK_THAT(record_of(set, "impostor").reason, Catch::Contains("'fake'"));
}

TEST_CASE("an earlier search folder shadows a later one") {
    TempDir first, second;
    install_plugin(fixture("fake"), first.path());
    install_plugin(fixture("fake"), second.path());
    LoaderOptions o = only_folder(first.path());
    o.plugin_dirs.push_back(second.path());
    const auto set = PluginSet::load(config_from("backends: {order: [fake]}"), o);
    REQUIRE(set.records().size() == 2);
    CHECK(set.records()[0].path.parent_path() == first.path());
    CHECK(set.records()[0].state == PluginState::Ready);
    CHECK(set.records()[1].state == PluginState::NotSelected);
    CHECK_THAT(set.records()[1].reason, Catch::Contains("shadowed"));
}

TEST_CASE("the search order is flag, environment, config, install folder, beside the executable") {
    TempDir dir;
    ::setenv("FERROX_PLUGIN_PATH", (dir.path() / "env1").c_str(), 1);
    auto config = config_from("plugins: {paths: [/from/config]}");
    LoaderOptions o;
    o.plugin_dirs = {dir.path() / "flag"};
    o.install_dir = "/install/dir";
    o.exe_dir = "/opt/x/bin";
    const auto dirs = plugin_search_dirs(config, o);
    ::unsetenv("FERROX_PLUGIN_PATH");
    REQUIRE(dirs.size() == 5);
    CHECK(dirs[0].origin == "--plugin-dir");
    CHECK(dirs[1].origin == "FERROX_PLUGIN_PATH");
    CHECK(dirs[2].path == "/from/config");
    CHECK(dirs[3].path == "/install/dir");
    CHECK(dirs[4].path == "/opt/x/lib/ferrox/plugins");
}

TEST_CASE("the current directory is never searched, even through an empty path entry") {
    TempDir dir;
    install_plugin(fixture("fake"), dir.path());
    const auto old = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    ::setenv("FERROX_PLUGIN_PATH", ":", 1);
    LoaderOptions o;
    o.install_dir = dir.path() / "none";
    o.exe_dir = dir.path() / "none";
    const auto set = PluginSet::load(config_from("backends: {order: [fake]}"), o);
    ::unsetenv("FERROX_PLUGIN_PATH");
    std::filesystem::current_path(old);
    CHECK(record_of(set, "fake").state == PluginState::NotFound);
}

TEST_CASE("a ready backend reports its devices and its plugin's describe() fields") {
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set = PluginSet::load(config_from("backends: {order: [cpu]}\ncpu: {threads: 2}"),
                                     only_folder(dir.path()));
    const auto& r = record_of(set, "cpu");
    REQUIRE(r.state == PluginState::Ready);
    CHECK(r.abi_version == FERROX_ABI_VERSION);
    REQUIRE(r.devices.size() == 1);
    CHECK(r.devices[0].type == FERROX_DEVICE_CPU);
    CHECK(r.devices[0].memory_total > 0);
    CHECK_THAT(r.devices[0].name, Catch::Contains("2 threads"));
    CHECK_FALSE(r.backend->is_accelerator());
}
