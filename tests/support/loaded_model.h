// For the model test programs: a model loaded from a file with its own kernel
// registry and dispatcher, kept together because the model refers to them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "plain_checks.h"

namespace ferrox::test {

#ifdef FERROX_PLUGIN_BUILD_DIR
// The CPU plugin this build made ($FERROX_PLUGIN_DIR: another build's), the
// environment not read; nothing selected (and a FAIL line) when none loads.
inline PluginSet build_plugins() {
    LoaderOptions loader;
    const char* plugin_dir = std::getenv("FERROX_PLUGIN_DIR");
    loader.plugin_dirs = {plugin_dir && *plugin_dir ? plugin_dir : FERROX_PLUGIN_BUILD_DIR};
    loader.read_environment = false;
    PluginSet plugins = PluginSet::load(default_config(), loader);
    if (plugins.selected().empty())
        std::printf("FAIL: no CPU plugin in %s\n", loader.plugin_dirs.front().c_str());
    return plugins;
}
#endif

struct LoadedModel {
    std::unique_ptr<KernelRegistry> registry;
    std::unique_ptr<Dispatcher> dispatcher;
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<model::Model> model;  // null when the load failed (a FAIL is counted)
};

inline LoadedModel load_model(const PluginSet& plugins, const std::filesystem::path& path,
                              const model::ModelOptions& options) {
    LoadedModel l;
    l.registry = std::make_unique<KernelRegistry>();
    l.dispatcher = std::make_unique<Dispatcher>(plugins.selected(), *l.registry);
    auto file = gguf::File::open(path);
    if (!file) {
        check(false, path.string() + ": " + file.error().message());
        return l;
    }
    l.file = std::make_unique<gguf::File>(std::move(*file));
    auto m = model::Model::load(*l.file, *l.dispatcher, *l.registry, options);
    if (!m) {
        check(false, path.string() + ": " + m.error().message());
        return l;
    }
    l.model = std::move(*m);
    return l;
}

}  // namespace ferrox::test
