#include "input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ferrox::cli {
namespace {

std::string_view kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

}  // namespace

Expected<std::string> read_text_file(const std::string& path, std::string_view flag,
                                     uint64_t limit) {
    // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return make_error("{} {}: cannot open: {}", flag, path, std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return make_error("{} {}: cannot stat: {}", flag, path, std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        return make_error("{} {}: is {}; give a regular text file", flag, path,
                          kind_of(st.st_mode));
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size == 0) return make_error("{} {}: the file is empty", flag, path);
    if (size > limit)
        return make_error(
            "{} {}: {} bytes is more than the {} bytes ({} MiB) a prompt file may "
            "hold",
            flag, path, size, limit, limit >> 20);
    std::string text(size, '\0');
    size_t got = 0;
    while (got < size) {
        const ssize_t n = ::read(fd, text.data() + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return make_error("{} {}: read failed: {}", flag, path, std::strerror(errno));
        if (n == 0) break;  // shrank while we read: take what is there
        got += static_cast<size_t>(n);
    }
    text.resize(got);
    return text;
}

}  // namespace ferrox::cli
