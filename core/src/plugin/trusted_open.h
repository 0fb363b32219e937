// Opening a plugin file only when nobody but root or the running user could
// have written it or any folder above it -- and handing back the descriptor of
// exactly the file that was checked, so the check and the load cannot differ.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <variant>

#include "ferrox/expected.h"

namespace ferrox::plugin {

// Owns a file descriptor; closes it on every path.
class UniqueFd {
  public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept;
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd();
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }
    explicit operator bool() const { return fd_ >= 0; }

  private:
    int fd_ = -1;
};

struct TrustFailure {
    bool insecure = false;  // true: permissions/ownership; false: the file cannot be used at all
    std::string reason;     // names the path that failed
};

struct TrustedFile {
    UniqueFd fd;
    uint64_t size = 0;
};

// Opens `file` read-only when the file is a regular file, and it and every
// folder from / down to it (symlinks resolved) are owned by root or the
// effective user and writable by nobody else. A world- or group-writable
// folder with the sticky bit (/tmp) is accepted above another folder, never as
// the plugin's own folder. Each folder is opened relative to the one above it
// (O_NOFOLLOW), so a rename during the walk cannot redirect it.
std::variant<TrustedFile, TrustFailure> open_trusted(const std::filesystem::path& file);

// The folder (O_PATH) when it and every folder above it pass the rule above,
// the folder itself counting as the file's own (never sticky and writable by
// others): the model store's root is held to the plugin's rule.
std::variant<UniqueFd, TrustFailure> open_trusted_folder(const std::filesystem::path& folder);

// A path to the open file itself (/proc/self/fd/N, spelled uniquely per call)
// for dlopen(): what it loads is the file that was checked.
std::string fd_path(const UniqueFd& fd);

}  // namespace ferrox::plugin
