#include "models_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ferrox/escape.h"
#include "ferrox/trusted_folder.h"

namespace fs = std::filesystem;

namespace ferrox::server {
namespace {

std::string shown(const fs::path& p) { return escape_text(p.string(), EscapeFor::Line); }

Expected<void> trusted_folder(const fs::path& folder, std::string_view who = "--models-dir") {
    auto fd = open_trusted_folder_fd(folder);
    if (!fd) return make_error("{}: {}", who, fd.error().message());
    ::close(*fd);
    return {};
}

// The file the entry names, held to the plugin file's rule; its size.
Expected<uint64_t> trusted_file(const fs::path& real, const fs::path& named,
                                std::string_view who = "--models-dir") {
    const int fd = ::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return make_error("{}: cannot open {}: {}", who, shown(named), std::strerror(errno));
    struct stat st {};
    const int got = ::fstat(fd, &st);
    ::close(fd);
    if (got != 0)
        return make_error("{}: cannot stat {}: {}", who, shown(named), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return make_error("{}: {} is not a regular file", who, shown(named));
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
        return make_error(
            "{}: refused: {} is owned by uid {}, not root or the running user (uid {})", who,
            shown(named), st.st_uid, ::geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return make_error(
            "{}: refused: {} is {}-writable (mode {:o}); another user could replace "
            "the model",
            who, shown(named), (st.st_mode & S_IWOTH) ? "world" : "group", st.st_mode & 07777);
    return static_cast<uint64_t>(st.st_size);
}

}  // namespace

bool path_inside(const fs::path& folder, const fs::path& p) {
    const auto [f, q] = std::mismatch(folder.begin(), folder.end(), p.begin(), p.end());
    return f == folder.end() && q != p.end();
}

Expected<TrustedModelFile> trusted_model_file(const fs::path& file, std::string_view who) {
    std::error_code ec;
    const fs::path real = fs::canonical(file, ec);
    if (ec) return make_error("{}: cannot resolve {}: {}", who, shown(file), ec.message());
    if (auto ok = trusted_folder(real.parent_path(), who); !ok) return ok.error();
    auto size = trusted_file(real, file, who);
    if (!size) return size.error();
    return TrustedModelFile{real, *size};
}

Expected<std::vector<ModelSpec>> scan_models_dir(const fs::path& dir) {
    if (auto ok = trusted_folder(dir); !ok) return ok.error();
    std::error_code ec;
    const fs::path real_dir = fs::canonical(dir, ec);
    if (ec) return make_error("--models-dir: cannot resolve {}: {}", shown(dir), ec.message());
    std::vector<ModelSpec> specs;
    fs::directory_iterator it(real_dir, ec);
    if (ec) return make_error("--models-dir: cannot list {}: {}", shown(dir), ec.message());
    size_t seen = 0;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) return make_error("--models-dir: cannot list {}: {}", shown(dir), ec.message());
        if (++seen > kMaxModelsDirEntries)
            return make_error("--models-dir: {} holds more than {} entries", shown(dir),
                              kMaxModelsDirEntries);
        const fs::path named = it->path();
        if (named.extension() != ".gguf" || named.stem().empty()) continue;
        fs::path real = named;
        if (it->is_symlink(ec)) {
            real = fs::canonical(named, ec);
            if (ec)
                return make_error("--models-dir: cannot resolve the symlink {}: {}", shown(named),
                                  ec.message());
            if (!path_inside(real_dir, real))
                return make_error(
                    "--models-dir: refused: the symlink {} leads to {}, outside the folder",
                    shown(named), shown(real));
            if (auto ok = trusted_folder(real.parent_path()); !ok) return ok.error();
        }
        auto size = trusted_file(real, named);
        if (!size) return size.error();
        specs.push_back({named.stem().string(), real, *size});
    }
    if (specs.empty()) return make_error("--models-dir: {} holds no .gguf file", shown(dir));
    std::sort(specs.begin(), specs.end(),
              [](const ModelSpec& a, const ModelSpec& b) { return a.id < b.id; });
    return specs;
}

}  // namespace ferrox::server
