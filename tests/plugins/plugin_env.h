// Loading plugins for a test from a folder of its own, with nothing else on
// the search path (no environment, no install folder, no exe-relative folder).
#pragma once

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <string_view>

#include "ferrox/config.h"
#include "ferrox/plugin_loader.h"
#include "temp_dir.h"

namespace ferrox::test {

inline const std::filesystem::path kFixtureDir = FERROX_FIXTURE_PLUGIN_DIR;
inline const std::filesystem::path kRealPluginDir = FERROX_PLUGIN_BUILD_DIR;

// Copies a built plugin into `dir`, under its own name or `as`.
inline std::filesystem::path install_plugin(const std::filesystem::path& from,
                                            const std::filesystem::path& dir,
                                            std::string_view as = {}) {
    const auto to = dir / (as.empty() ? from.filename().string() : std::string(as));
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
    ::chmod(to.c_str(), 0755);
    return to;
}

inline std::filesystem::path fixture(std::string_view name) {
    return kFixtureDir / ("libferrox_" + std::string(name) + ".so");
}

inline std::filesystem::path real_plugin(std::string_view name) {
    return kRealPluginDir / ("libferrox_" + std::string(name) + ".so");
}

inline Config config_from(std::string_view yaml) {
    auto c = parse_config(yaml, "test.yaml");
    REQUIRE(c.has_value());
    return *c;
}

inline LoaderOptions only_folder(const std::filesystem::path& dir) {
    LoaderOptions o;
    o.plugin_dirs = {dir};
    o.read_environment = false;
    o.install_dir = dir / "no-install-dir";
    o.exe_dir = dir / "no-exe-dir";
    return o;
}

inline const PluginRecord& record_of(const PluginSet& set, std::string_view name) {
    for (const auto& r : set.records())
        if (r.name == name) return r;
    FAIL("no record for backend " << name);
    throw std::logic_error("unreachable");
}

}  // namespace ferrox::test
