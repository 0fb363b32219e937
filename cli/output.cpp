#include "output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "ferrox/log.h"
#include "session.h"

namespace ferrox::cli {
namespace {

int first_stdout_errno = 0;  // errno of the first failed write or flush on stdout

// After a write of `std::cout` (which goes through stdout's buffer).
void note_stdout_errno() {
    if (!std::cout.good() && first_stdout_errno == 0) first_stdout_errno = errno;
}

bool flush_stdout() {
    // std::cout writes through stdout's buffer; its flush is the fflush that
    // fails, so errno is read right after it (a second fflush has nothing left).
    errno = 0;
    std::cout.flush();
    note_stdout_errno();
    if (std::fflush(stdout) != 0 && first_stdout_errno == 0) first_stdout_errno = errno;
    return std::cout.good() && !std::ferror(stdout);
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
    struct stat sa {
    }, sb{};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

}  // namespace

void make_encodable(nlohmann::json& doc) {
    if (doc.is_string()) {
        doc = escape_text(doc.get_ref<const std::string&>(), EscapeFor::Json);
    } else if (doc.is_array()) {
        for (auto& item : doc) make_encodable(item);
    } else if (doc.is_object()) {
        nlohmann::json fixed = nlohmann::json::object();
        for (auto& [key, value] : doc.items()) {
            make_encodable(value);
            fixed[escape_text(key, EscapeFor::Json)] = std::move(value);
        }
        doc = std::move(fixed);
    }
}

void print_json(nlohmann::json doc) {
    make_encodable(doc);
    errno = 0;
    // The encoder escapes C0 controls but passes DEL and C1 (a CSI is one
    // code point, U+009B) through; escape_text writes those as \u escapes,
    // which leaves the document valid JSON with the same meaning.
    std::cout << escape_text(doc.dump(2), EscapeFor::Text) << "\n";
    note_stdout_errno();
}

void ignore_sigpipe() { std::signal(SIGPIPE, SIG_IGN); }

bool stdout_ok() { return flush_stdout(); }

int finish_stdout(int code) {
    if (flush_stdout()) return code;
    if (first_stdout_errno == 0) {
        // The failing write was long ago and errno has moved on: one more byte
        // to the already broken output asks the descriptor for its reason.
        if (::write(STDOUT_FILENO, "\n", 1) < 0) first_stdout_errno = errno;
    }
    logger().error("cannot write to standard output: {}",
                   first_stdout_errno ? std::strerror(first_stdout_errno) : "write error");
    return code == kExitOk ? kExitFailure : code;
}

Expected<void> write_file_atomically(const std::filesystem::path& path,
                                     const std::filesystem::path& protect,
                                     const std::function<Expected<void>(const ByteSink&)>& write) {
    if (same_file(path, protect))
        return make_error("{} is the model file this command reads; refusing to overwrite it",
                          path.string());
    struct stat existing {};
    const bool exists = ::stat(path.c_str(), &existing) == 0;
    if (exists && S_ISDIR(existing.st_mode))
        return make_error("{} is a folder, not an output file", path.string());
    // A device or pipe (/dev/stdout, a FIFO) is written in place: renaming a
    // file over it would replace the device node itself.
    const bool in_place = exists && !S_ISREG(existing.st_mode);
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
    std::string temp = (dir / ("." + path.filename().string() + ".XXXXXX")).string();
    const int fd =
        in_place ? ::open(path.c_str(), O_WRONLY | O_CLOEXEC) : ::mkostemp(temp.data(), O_CLOEXEC);
    if (fd < 0)
        return in_place ? make_error("{}: cannot open for writing: {}", path.string(),
                                     std::strerror(errno))
                        : make_error("{}: cannot create a temporary file in {}: {}", path.string(),
                                     dir.string(), std::strerror(errno));
    int write_errno = 0;
    const ByteSink sink = [&](std::span<const std::byte> bytes) {
        const auto* p = reinterpret_cast<const char*>(bytes.data());
        size_t left = bytes.size();
        while (left > 0) {
            const ssize_t n = ::write(fd, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                write_errno = n < 0 ? errno : EIO;
                return false;
            }
            p += n;
            left -= static_cast<size_t>(n);
        }
        return true;
    };
    Expected<void> written = write(sink);
    if (written && write_errno == 0 && !in_place && ::fsync(fd) != 0) write_errno = errno;
    if (::close(fd) != 0 && written && write_errno == 0) write_errno = errno;
    if (written && write_errno == 0 && !in_place && ::rename(temp.c_str(), path.c_str()) != 0)
        write_errno = errno;
    if (!written || write_errno != 0) {
        if (!in_place) ::unlink(temp.c_str());
        if (!written) return written.error();
        return make_error("{}: cannot write: {}{}", path.string(), std::strerror(write_errno),
                          in_place ? "" : " (the file was left as it was)");
    }
    return {};
}

}  // namespace ferrox::cli
