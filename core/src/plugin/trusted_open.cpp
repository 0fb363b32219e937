#include "trusted_open.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "ferrox/escape.h"
#include "ferrox/trusted_folder.h"

namespace fs = std::filesystem;

namespace ferrox::plugin {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

UniqueFd::~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
}

std::string fd_path(const UniqueFd& fd) {
    // glibc's dlopen returns an already loaded library whose name equals the
    // path, before it looks at the file: "/proc/self/fd/5" a second time would
    // hand back whatever was loaded through descriptor 5 before. Each call
    // therefore spells the path differently -- 32 segments, "/" or "/." per
    // bit of a counter -- all resolving to the same descriptor.
    static std::atomic<uint32_t> loads{0};
    const uint32_t n = loads.fetch_add(1, std::memory_order_relaxed);
    std::string path = "/proc/self/fd";
    for (int bit = 31; bit >= 0; --bit) path += (n >> bit) & 1u ? "/." : "/";
    return path + fmt::format("/{}", fd.get());
}

namespace {

bool trusted_owner(const struct stat& st) { return st.st_uid == 0 || st.st_uid == ::geteuid(); }

std::string mode_text(const struct stat& st) { return fmt::format("{:o}", st.st_mode & 07777); }

// Who besides the owner may write, in words; empty when nobody.
std::string other_writers(const struct stat& st) {
    if (st.st_mode & S_IWOTH) return "world-writable";
    if (st.st_mode & S_IWGRP) return "group-writable";
    return {};
}

TrustFailure insecure(std::string reason) { return {true, std::move(reason)}; }

TrustFailure unusable(const fs::path& path, std::string_view what) {
    return {false, fmt::format("cannot {} {}: {}", what, path.string(), std::strerror(errno))};
}

// A folder on the way down; `holds_file` when the plugin file sits directly in it.
std::optional<TrustFailure> check_folder(const fs::path& path, const struct stat& st,
                                         bool holds_file) {
    if (!trusted_owner(st))
        return insecure(fmt::format(
            "refused: folder {} is owned by uid {}, not root or the running user (uid {}); its "
            "owner could replace what it holds",
            path.string(), st.st_uid, ::geteuid()));
    const std::string writers = other_writers(st);
    if (writers.empty()) return std::nullopt;
    // Sticky: others may add entries but not rename or remove ours, so a trusted
    // folder below it stays ours. A file beside their files is not safe from a
    // same-named plant before it exists, so the plugin's own folder must not be.
    if ((st.st_mode & S_ISVTX) && !holds_file) return std::nullopt;
    return insecure(
        fmt::format("refused: folder {} is {} (mode {}); another user could replace "
                    "what it holds",
                    path.string(), writers, mode_text(st)));
}

}  // namespace

namespace {

// Every folder from / down to `real` (canonical), each opened relative to the one
// above it with O_NOFOLLOW and checked; `holds_file`: `real` holds the file we
// trust, so it may not be sticky and writable by others.
std::variant<UniqueFd, TrustFailure> walk_trusted_folders(const fs::path& real, bool holds_file) {
    UniqueFd dir(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return unusable("/", "open");
    fs::path walked = "/";
    std::vector<fs::path> parts(std::next(real.begin()), real.end());  // skip the root
    for (size_t i = 0;; ++i) {
        struct stat st {};
        if (::fstat(dir.get(), &st) != 0) return unusable(walked, "stat");
        const bool last_folder = i == parts.size();
        if (auto bad = check_folder(walked, st, last_folder && holds_file)) return *bad;
        if (last_folder) return dir;
        walked /= parts[i];
        UniqueFd next(
            ::openat(dir.get(), parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!next) return unusable(walked, "open folder");
        dir = std::move(next);
    }
}

TrustFailure nul_refusal(const fs::path& path) {
    return TrustFailure{false,
                        fmt::format("refused: the path {} holds a NUL byte, so the file opened "
                                    "would not be the one named",
                                    escape_text(path.native()))};
}

}  // namespace

std::variant<UniqueFd, TrustFailure> open_trusted_folder(const fs::path& folder) {
    if (folder.native().find('\0') != std::string::npos) return nul_refusal(folder);
    std::error_code ec;
    const fs::path real = fs::canonical(folder, ec);
    if (ec)
        return TrustFailure{false,
                            fmt::format("cannot resolve {}: {}", folder.string(), ec.message())};
    return walk_trusted_folders(real, true);
}

std::variant<TrustedFile, TrustFailure> open_trusted(const fs::path& file) {
    // The system calls below stop at a NUL: "/trusted\0/../x" would name "/trusted".
    if (file.native().find('\0') != std::string::npos) return nul_refusal(file);
    std::error_code ec;
    const fs::path real = fs::canonical(file, ec);
    if (ec)
        return TrustFailure{false,
                            fmt::format("cannot resolve {}: {}", file.string(), ec.message())};
    if (real == real.root_path())
        return TrustFailure{false, fmt::format("{} is not a file", real.string())};
    auto walked = walk_trusted_folders(real.parent_path(), true);
    if (auto* bad = std::get_if<TrustFailure>(&walked)) return std::move(*bad);
    const UniqueFd dir = std::move(std::get<UniqueFd>(walked));
    const fs::path leaf = real.filename();

    // O_NONBLOCK: a FIFO planted under the plugin's name must not hang the open.
    UniqueFd fd(::openat(dir.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) return unusable(real, "open");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return unusable(real, "stat");
    if (!S_ISREG(st.st_mode))
        return TrustFailure{false, fmt::format("{} is not a regular file", real.string())};
    if (!trusted_owner(st))
        return insecure(
            fmt::format("refused: {} is owned by uid {}, not root or the running user (uid {})",
                        real.string(), st.st_uid, ::geteuid()));
    if (const std::string writers = other_writers(st); !writers.empty())
        return insecure(
            fmt::format("refused: {} is {} (mode {}); another user could replace "
                        "its code",
                        real.string(), writers, mode_text(st)));
    return TrustedFile{std::move(fd), static_cast<uint64_t>(st.st_size)};
}

}  // namespace ferrox::plugin

namespace ferrox {

Expected<int> open_trusted_folder_fd(const fs::path& folder) {
    auto opened = plugin::open_trusted_folder(folder);
    if (auto* bad = std::get_if<plugin::TrustFailure>(&opened))
        return Error(std::move(bad->reason));
    return std::get<plugin::UniqueFd>(opened).release();
}

}  // namespace ferrox
