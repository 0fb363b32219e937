// Opens the freshly built libferrox_cuda.so the way the core does (dlopen,
// then the two entries by name) so the tests exercise the real file.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "ferrox/backend_abi.h"

namespace ferrox::test {

// $FERROX_CUDA_PLUGIN, when set, names the file instead: a prebuilt bundle
// carried to a GPU machine (ci/gpu-check.sh) has no build folder.
inline std::string cuda_plugin_path() {
    if (const char* path = std::getenv("FERROX_CUDA_PLUGIN"); path != nullptr && *path != '\0')
        return path;
    return std::string(FERROX_PLUGIN_BUILD_DIR) + "/libferrox_cuda.so";
}

struct DlClose {
    void operator()(void* handle) const noexcept { dlclose(handle); }
};

class CudaPluginLibrary {
  public:
    // Empty (ok() false, error() says why) when the file cannot be opened.
    CudaPluginLibrary() : handle_(dlopen(cuda_plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL)) {
        if (!handle_) {
            error_ = dlerror();
            return;
        }
        describe = reinterpret_cast<ferrox_plugin_describe_fn>(
            dlsym(handle_.get(), FERROX_PLUGIN_DESCRIBE_SYMBOL));
        create = reinterpret_cast<ferrox_plugin_create_fn>(
            dlsym(handle_.get(), FERROX_PLUGIN_CREATE_SYMBOL));
        if (!describe || !create) error_ = "a plugin entry is missing";
    }

    bool ok() const { return handle_ && describe && create; }
    const std::string& error() const { return error_; }

    ferrox_plugin_describe_fn describe = nullptr;
    ferrox_plugin_create_fn create = nullptr;

  private:
    std::unique_ptr<void, DlClose> handle_;
    std::string error_;
};

// Owns a backend the plugin created and destroys it through its own table.
struct BackendDestroy {
    void operator()(ferrox_backend* backend) const noexcept { backend->destroy(backend); }
};
using OwnedBackend = std::unique_ptr<ferrox_backend, BackendDestroy>;

}  // namespace ferrox::test
