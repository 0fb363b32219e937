// The real CPU plugin loaded alone from a test folder, on a chosen ISA path.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/cpu_features.h"
#include "ferrox/dispatch.h"
#include "plugin_env.h"

namespace ferrox::test {

// Sets FERROX_CPU_ISA for the plugin's create() and restores it after.
class ScopedIsa {
  public:
    explicit ScopedIsa(std::string_view isa) {
        if (const char* old = std::getenv("FERROX_CPU_ISA")) saved_ = old;
        ::setenv("FERROX_CPU_ISA", std::string(isa).c_str(), 1);
    }
    ~ScopedIsa() {
        if (saved_)
            ::setenv("FERROX_CPU_ISA", saved_->c_str(), 1);
        else
            ::unsetenv("FERROX_CPU_ISA");
    }
    ScopedIsa(const ScopedIsa&) = delete;
    ScopedIsa& operator=(const ScopedIsa&) = delete;

  private:
    std::optional<std::string> saved_;
};

struct CpuRig {
    TempDir dir;
    PluginSet plugins;
    KernelRegistry registry;
    std::unique_ptr<Dispatcher> dispatch;

    explicit CpuRig(unsigned threads, std::string_view isa = "auto") {
        install_plugin(real_plugin("cpu"), dir.path());
        const ScopedIsa forced(isa);
        plugins = PluginSet::load(
            config_from(fmt::format("backends: {{order: [cpu]}}\ncpu: {{threads: {}}}", threads)),
            only_folder(dir.path()));
        REQUIRE(plugins.selected().size() == 1);
        dispatch = std::make_unique<Dispatcher>(plugins.selected(), registry);
    }
};

// The ISA paths this machine can run, each forced through the plugin option.
inline std::vector<std::string> runnable_isas() {
    std::vector<std::string> isas{"portable"};
    const CpuFeatures& f = cpu_features();
    if (f.avx2 && f.fma && f.f16c) isas.emplace_back("avx2");
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) isas.emplace_back("avx512");
    return isas;
}

}  // namespace ferrox::test
