#include "ferrox/hub/model_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "ferrox/escape.h"
#include "ferrox/hub/model_ref.h"
#include "ferrox/hub/sha256.h"
#include "ferrox/trusted_folder.h"

namespace fs = std::filesystem;

namespace ferrox::hub {
namespace {

constexpr size_t kMaxListed = 100000;  // entries one listing walks, whatever the store holds
constexpr int kMaxDepth = 6;           // OWNER/REPO/ + check_file_name's 4 parts

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
}

Error system_error(std::string_view what, const fs::path& path) {
    return make_error("cannot {} {}: {}", what, escape_text(path.string()), std::strerror(errno));
}

// Every missing folder down to `root`, created 0700 (the umask can only narrow it).
Expected<void> create_folders(const fs::path& root) {
    fs::path walked;
    for (const fs::path& part : root) {
        walked /= part;
        if (::mkdir(walked.c_str(), 0700) != 0 && errno != EEXIST)
            return system_error("create the model store folder", walked);
    }
    return {};
}

// A folder inside the store: ours (or root's) and writable by nobody else.
Expected<void> check_store_folder(int fd, const fs::path& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return system_error("stat", path);
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
        return make_error(
            "refused: folder {} in the model store is owned by uid {}, not the "
            "running user (uid {})",
            escape_text(path.string()), st.st_uid, ::geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return make_error(
            "refused: folder {} in the model store is group- or world-writable "
            "(mode {:o})",
            escape_text(path.string()), st.st_mode & 07777);
    return {};
}

std::vector<std::string> split_parts(std::string_view file) {
    std::vector<std::string> parts;
    for (size_t start = 0; start <= file.size();) {
        size_t end = file.find('/', start);
        if (end == std::string_view::npos) end = file.size();
        parts.emplace_back(file.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

bool is_gguf_name(const std::string& name) { return name.size() > 5 && name.ends_with(".gguf"); }

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

Fd::~Fd() {
    if (fd_ >= 0) ::close(fd_);
}

Expected<fs::path> ModelStore::default_root() {
    if (const std::string models = env("FERROX_MODELS"); !models.empty()) return fs::path(models);
    if (const std::string cache = env("XDG_CACHE_HOME"); !cache.empty() && cache.front() == '/')
        return fs::path(cache) / "ferrox" / "models";
    if (const std::string home = env("HOME"); !home.empty())
        return fs::path(home) / ".cache" / "ferrox" / "models";
    return make_error("no model store: set FERROX_MODELS (or XDG_CACHE_HOME or HOME)");
}

Expected<ModelStore> ModelStore::open(const fs::path& root, bool create) {
    if (root.native().find('\0') != std::string::npos || root.empty())
        return make_error("the model store folder \"{}\" is empty or holds a NUL byte",
                          escape_text(root.native()));
    const fs::path absolute = fs::absolute(root);
    std::error_code absent;
    if (!create && !fs::exists(absolute, absent)) return ModelStore(absolute);
    if (auto made = create_folders(absolute); !made) return made.error();
    auto fd = open_trusted_folder_fd(absolute);
    if (!fd)
        return make_error("model store {}: {}", escape_text(absolute.string()),
                          fd.error().message());
    ::close(*fd);
    std::error_code ec;
    fs::path real = fs::canonical(absolute, ec);
    if (ec)
        return make_error("cannot resolve {}: {}", escape_text(absolute.string()), ec.message());
    return ModelStore(std::move(real));
}

fs::path ModelStore::path_of(std::string_view owner, std::string_view repo,
                             std::string_view file) const {
    return root_ / owner / repo / file;
}

Expected<Fd> ModelStore::folder_of(std::string_view owner, std::string_view repo,
                                   std::string_view file, bool create) const {
    auto root = open_trusted_folder_fd(root_);
    if (!root)
        return make_error("model store {}: {}", escape_text(root_.string()),
                          root.error().message());
    Fd dir(*root);
    std::vector<std::string> parts{std::string(owner), std::string(repo)};
    std::vector<std::string> inside = split_parts(file);
    parts.insert(parts.end(), inside.begin(), inside.end() - 1);  // the folders, not the file
    fs::path walked = root_;
    for (const std::string& part : parts) {
        walked /= part;
        if (create && ::mkdirat(dir.get(), part.c_str(), 0700) != 0 && errno != EEXIST)
            return system_error("create", walked);
        Fd next(::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!next) {
            if (errno == ELOOP || errno == ENOTDIR)
                return make_error(
                    "refused: {} in the model store is not a folder (a symlink or "
                    "a file); the store never follows links",
                    escape_text(walked.string()));
            return system_error("open folder", walked);
        }
        if (auto ok = check_store_folder(next.get(), walked); !ok) return ok.error();
        dir = std::move(next);
    }
    return dir;
}

std::vector<std::string> ModelStore::files_of(std::string_view owner, std::string_view repo) const {
    std::vector<std::string> names;
    const fs::path base = root_ / owner / repo;
    std::error_code ec;
    if (fs::symlink_status(base, ec).type() != fs::file_type::directory) return names;
    // No link is followed: neither the repo folder's entries nor folders below.
    fs::recursive_directory_iterator it(base, fs::directory_options::none, ec), end;
    for (size_t seen = 0; !ec && it != end && seen < kMaxListed; it.increment(ec), ++seen) {
        if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
        if (it->symlink_status(ec).type() != fs::file_type::regular) continue;
        const std::string rel = fs::relative(it->path(), base, ec).generic_string();
        if (is_gguf_name(rel) && check_file_name(rel)) names.push_back(rel);
    }
    std::sort(names.begin(), names.end());
    return names;
}

Expected<StoredFile> ModelStore::find_file(std::string_view owner, std::string_view repo,
                                           std::string_view file) const {
    auto folder = folder_of(owner, repo, file, false);
    if (!folder) return folder.error();
    const std::string leaf = fs::path(file).filename().string();
    struct stat st {};
    if (::fstatat(folder->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return system_error("stat", path_of(owner, repo, file));
    if (!S_ISREG(st.st_mode))
        return make_error("refused: {} is not a regular file (the store never follows links)",
                          escape_text(path_of(owner, repo, file).string()));
    return StoredFile{std::string(owner),
                      std::string(repo),
                      std::string(file),
                      path_of(owner, repo, file),
                      static_cast<uint64_t>(st.st_size),
                      read_digest_file(folder->get(), leaf)};
}

std::vector<StoredFile> ModelStore::list() const {
    std::vector<StoredFile> out;
    std::error_code ec;
    for (fs::directory_iterator owners(root_, ec), end; !ec && owners != end;
         owners.increment(ec)) {
        if (owners->symlink_status(ec).type() != fs::file_type::directory) continue;
        for (fs::directory_iterator repos(owners->path(), ec); !ec && repos != end;
             repos.increment(ec)) {
            if (repos->symlink_status(ec).type() != fs::file_type::directory) continue;
            const std::string owner = owners->path().filename().string();
            const std::string repo = repos->path().filename().string();
            for (const std::string& file : files_of(owner, repo))
                if (auto st = find_file(owner, repo, file)) out.push_back(std::move(*st));
            if (out.size() >= kMaxListed) return out;
        }
    }
    std::sort(out.begin(), out.end(), [](const StoredFile& a, const StoredFile& b) {
        return std::tie(a.owner, a.repo, a.file) < std::tie(b.owner, b.repo, b.file);
    });
    return out;
}

std::string read_digest_file(int folder, std::string_view leaf) {
    const std::string name = std::string(leaf) + std::string(kDigestSuffix);
    Fd fd(::openat(folder, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) return {};
    char text[64] = {};
    const ssize_t n = ::pread(fd.get(), text, sizeof text, 0);
    return n == 64 ? normalized_sha256(std::string_view(text, 64)) : std::string();
}

Expected<void> write_digest_file(int folder, std::string_view leaf, std::string_view sha256) {
    const std::string name = std::string(leaf) + std::string(kDigestSuffix);
    const std::string text = fmt::format("{}  {}\n", sha256, leaf);
    ::unlinkat(folder, name.c_str(), 0);
    Fd fd(
        ::openat(folder, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return make_error("cannot write {}: {}", escape_text(name), std::strerror(errno));
    return {};
}

}  // namespace ferrox::hub
