// The model store: pulled files under one folder, laid out OWNER/REPO/FILE.
// The root is held to the plugins' trust rule (owned by root or the user,
// writable by nobody else, every folder above it too) and created 0700; every
// folder and file below it is opened relative to its parent with O_NOFOLLOW,
// so a symlink planted in the store is refused, never followed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::hub {

// Owns a file descriptor.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Fd& operator=(Fd&& other) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd();
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }

  private:
    int fd_ = -1;
};

// A stored file's checksum lives beside it as FILE.sha256, in sha256sum's
// format (so `sha256sum -c` can check it); a download in progress is FILE.part.
inline constexpr std::string_view kDigestSuffix = ".sha256";
inline constexpr std::string_view kPartSuffix = ".part";

struct StoredFile {
    std::string owner, repo, file;  // file: relative to OWNER/REPO
    std::filesystem::path path;
    uint64_t bytes = 0;
    std::string sha256;  // from the digest file; empty when it is missing
};

class ModelStore {
  public:
    // $FERROX_MODELS, else $XDG_CACHE_HOME/ferrox/models, else ~/.cache/ferrox/models.
    static Expected<std::filesystem::path> default_root();
    // Creates the root (0700, and any missing folder above it 0700) when absent
    // and `create`, then checks it; the Error names the folder that fails the
    // rule. Without `create` an absent root is an empty store (lookups only).
    static Expected<ModelStore> open(const std::filesystem::path& root, bool create);

    const std::filesystem::path& root() const { return root_; }
    std::filesystem::path path_of(std::string_view owner, std::string_view repo,
                                  std::string_view file) const;
    // The folder holding `file` (a name check_file_name accepted), each part
    // opened O_NOFOLLOW and checked (ours, not group/world-writable); created
    // 0700 when `create`.
    Expected<Fd> folder_of(std::string_view owner, std::string_view repo, std::string_view file,
                           bool create) const;
    // The .gguf files stored for OWNER/REPO (verified ones: only those are ever
    // renamed into place), names relative to the repo folder, sorted.
    std::vector<std::string> files_of(std::string_view owner, std::string_view repo) const;
    // Every stored .gguf file, sorted by owner, repo, file.
    std::vector<StoredFile> list() const;
    Expected<StoredFile> find_file(std::string_view owner, std::string_view repo,
                                   std::string_view file) const;

  private:
    explicit ModelStore(std::filesystem::path root) : root_(std::move(root)) {}
    std::filesystem::path root_;  // canonical
};

// Reads FILE.sha256 beside a stored file (in `folder`); empty when absent or malformed.
std::string read_digest_file(int folder, std::string_view leaf);
Expected<void> write_digest_file(int folder, std::string_view leaf, std::string_view sha256);

}  // namespace ferrox::hub
