#include "ferrox/gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "ferrox/escape.h"
#include "ferrox/gguf/truncation_guard.h"

namespace ferrox::gguf {
namespace {

// Owned copies get the alignment GGUF tensor data has in a real mapping.
constexpr std::size_t kOwnedAlignment = 64;

uint64_t next_mapping_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

// Closes the descriptor on every path; the mapping stays valid after close.
class FileDescriptor {
  public:
    explicit FileDescriptor(int fd) : fd_(fd) {}
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

  private:
    int fd_;
};

}  // namespace

void MappedFile::AlignedDelete::operator()(std::byte* p) const {
    ::operator delete[](p, std::align_val_t{kOwnedAlignment});
}

Expected<MappedFile> MappedFile::open(const std::filesystem::path& path) {
    return open_as(path, path, 0);
}

Expected<MappedFile> MappedFile::open_resolved(const std::filesystem::path& real,
                                               const std::filesystem::path& name) {
    return open_as(real, name, O_NOFOLLOW);
}

Expected<MappedFile> MappedFile::open_as(const std::filesystem::path& target,
                                         const std::filesystem::path& path, int extra_flags) {
    // open() stops at a NUL: "a.gguf\0x" would open a.gguf under another name.
    if (target.native().find('\0') != std::string::npos)
        return make_error("{}: the path holds a NUL byte", escape_text(target.native()));
    // O_NONBLOCK: a FIFO named as a model must not hang the open (refused below).
    FileDescriptor fd(::open(target.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags));
    if (fd.get() < 0) return make_error("{}: cannot open: {}", path.string(), std::strerror(errno));
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0)
        return make_error("{}: cannot stat: {}", path.string(), std::strerror(errno));
    if (!S_ISREG(info.st_mode)) return make_error("{}: not a regular file", path.string());

    MappedFile file;
    file.path_ = path;
    file.mapping_id_ = next_mapping_id();
    file.size_ = static_cast<std::size_t>(info.st_size);
    if (file.size_ == 0) return file;  // mmap refuses length 0; the parser reports it

    void* address = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (address == MAP_FAILED)
        return make_error("{}: cannot mmap {} bytes: {}", path.string(), file.size_,
                          std::strerror(errno));
    file.data_ = static_cast<const std::byte*>(address);
    file.mmapped_ = true;
    register_mapping(address, file.size_, path.c_str());  // named if it is truncated later
    return file;
}

MappedFile MappedFile::copy_of(std::span<const std::byte> bytes, std::filesystem::path label) {
    MappedFile file;
    file.path_ = std::move(label);
    file.mapping_id_ = next_mapping_id();
    file.size_ = bytes.size();
    if (!bytes.empty()) {
        // Exactly bytes.size(), so a sanitizer catches any read one past the end.
        file.owned_.reset(static_cast<std::byte*>(
            ::operator new[](bytes.size(), std::align_val_t{kOwnedAlignment})));
        std::memcpy(file.owned_.get(), bytes.data(), bytes.size());
        file.data_ = file.owned_.get();
    }
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mmapped_(std::exchange(other.mmapped_, false)),
      owned_(std::move(other.owned_)),
      path_(std::move(other.path_)),
      mapping_id_(std::exchange(other.mapping_id_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mmapped_ = std::exchange(other.mmapped_, false);
        owned_ = std::move(other.owned_);
        path_ = std::move(other.path_);
        mapping_id_ = std::exchange(other.mapping_id_, 0);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
    if (mmapped_) {
        unregister_mapping(data_);
        ::munmap(const_cast<std::byte*>(data_), size_);
    }
    owned_.reset();
    data_ = nullptr;
    size_ = 0;
    mmapped_ = false;
}

void MappedFile::release_pages(uint64_t offset, uint64_t length) const {
    if (!mmapped_ || offset >= size_) return;
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t begin = (offset + page - 1) / page * page;  // the mapping starts on a page
    const uint64_t end = (offset + std::min<uint64_t>(length, size_ - offset)) / page * page;
    // Advice only: when it fails the pages simply stay.
    if (begin < end) ::madvise(const_cast<std::byte*>(data_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace ferrox::gguf
