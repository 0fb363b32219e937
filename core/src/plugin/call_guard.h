// Naming the plugin whose code is running while the loader calls into it: a
// plugin that kills the process in a constructor, describe() or create()
// leaves a line saying which file it was, instead of a bare "Segmentation fault".
#pragma once

#include <filesystem>
#include <string_view>

namespace ferrox::plugin {

// While one lives, SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT first write
// "ferrox: backend <name> (<file>) died in <phase>: signal N" to stderr, then
// get the action they had before (the default one kills the process as it
// would have). One at a time in the process: a second one waits.
class PluginCallScope {
  public:
    PluginCallScope(std::string_view backend, const std::filesystem::path& file,
                    std::string_view phase);
    ~PluginCallScope();
    PluginCallScope(const PluginCallScope&) = delete;
    PluginCallScope& operator=(const PluginCallScope&) = delete;
};

}  // namespace ferrox::plugin
