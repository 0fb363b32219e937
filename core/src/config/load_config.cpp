// Finding and reading the configuration file: --config, $FERROX_CONFIG, the XDG
// user folder, the system folder, else the built-in default.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "config/parse_config_text.h"
#include "ferrox/config.h"

namespace ferrox {
namespace {

// A configuration is a page of text; anything this large is the wrong file
// (and the cap keeps a path such as /dev/zero from reading forever).
constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;

struct FileCloser {
    void operator()(std::FILE* file) const { std::fclose(file); }
};
using FileHandle = std::unique_ptr<std::FILE, FileCloser>;

Expected<std::string> read_small_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return make_error("{}: is a folder, not a configuration file", path.string());
    }
    // O_NONBLOCK: a FIFO named as the configuration must not hang the open.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return make_error("{}: cannot open the configuration file: {}", path.string(),
                          std::generic_category().message(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return make_error(
            "{}: not a regular file (a FIFO, device or socket), not a "
            "configuration file",
            path.string());
    }
    FileHandle file(::fdopen(fd, "rb"));
    if (!file) {
        ::close(fd);
        return make_error("{}: cannot open the configuration file: {}", path.string(),
                          std::generic_category().message(errno));
    }
    std::string text;
    std::array<char, 4096> buffer;
    while (true) {
        const std::size_t count = std::fread(buffer.data(), 1, buffer.size(), file.get());
        text.append(buffer.data(), count);
        if (text.size() > kMaxConfigBytes) {
            return make_error("{}: larger than {} bytes, too large to be a configuration file",
                              path.string(), kMaxConfigBytes);
        }
        if (count < buffer.size()) break;
    }
    if (std::ferror(file.get())) {
        return make_error("{}: cannot read the configuration file: {}", path.string(),
                          std::generic_category().message(errno));
    }
    return text;
}

// Empty and unset read the same: "FERROX_CONFIG= ferrox run" means "not set".
std::string environment(const char* name) {
    const char* value = std::getenv(name);
    return value ? std::string(value) : std::string();
}

struct SearchedPath {
    std::filesystem::path path;
    const char* named_by;  // what named it, when a missing file is an error; else nullptr
};

std::vector<SearchedPath> candidates(const ConfigSearch& search) {
    if (search.explicit_path) return {{*search.explicit_path, "--config"}};
    if (const std::string from_env = environment("FERROX_CONFIG"); !from_env.empty()) {
        return {{from_env, "$FERROX_CONFIG"}};
    }
    std::vector<SearchedPath> found;
    // XDG: a relative $XDG_CONFIG_HOME is invalid and ignored; the default is ~/.config.
    std::filesystem::path user_dir = environment("XDG_CONFIG_HOME");
    if (user_dir.is_relative()) {
        const std::string home = environment("HOME");
        user_dir = home.empty() ? std::filesystem::path() : std::filesystem::path(home) / ".config";
    }
    if (!user_dir.empty()) found.push_back({user_dir / "ferrox" / "ferrox.yaml", nullptr});
    const std::filesystem::path system_dir =
        search.sysconfdir.empty() ? default_sysconfdir() : search.sysconfdir;
    found.push_back({system_dir / "ferrox" / "ferrox.yaml", nullptr});
    return found;
}

}  // namespace

Expected<Config> load_config_file(const std::filesystem::path& path) {
    auto text = read_small_file(path);
    if (!text) return text.error();
    std::error_code ec;
    std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
    if (ec) folder = path.parent_path();
    return config_detail::parse_config_text(*text, path.string(), folder);
}

Config default_config() {
    auto config = config_detail::parse_config_text("", kBuiltInConfigSource, {});
    // Empty text has nothing that could fail; the tests hold this.
    return config ? std::move(*config) : Config{};
}

std::filesystem::path default_sysconfdir() { return FERROX_INSTALL_SYSCONFDIR; }

std::vector<std::filesystem::path> config_candidates(const ConfigSearch& search) {
    std::vector<std::filesystem::path> paths;
    for (SearchedPath& candidate : candidates(search)) paths.push_back(std::move(candidate.path));
    return paths;
}

Expected<Config> load_config(const ConfigSearch& search) {
    for (const SearchedPath& candidate : candidates(search)) {
        std::error_code ec;
        // exists() fails (rather than says no) on e.g. a permission problem: then try to
        // read it and report why it cannot be read, instead of quietly skipping it.
        const bool exists = std::filesystem::exists(candidate.path, ec);
        if (!exists && !ec) {
            if (candidate.named_by) {
                return make_error("{}: the configuration file named by {} does not exist",
                                  candidate.path.string(), candidate.named_by);
            }
            continue;
        }
        return load_config_file(candidate.path);
    }
    return default_config();
}

}  // namespace ferrox
