// MappedFile: the read-only bytes of one GGUF file, mmap'd once and shared.
// Tensors borrow spans of it zero-copy and hold it by shared_ptr, so the
// mapping outlives the File that parsed it for as long as any weight needs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox::gguf {

class FERROX_API MappedFile {
  public:
    // open + fstat + mmap(PROT_READ, MAP_PRIVATE). An empty file maps to no bytes.
    // Regular files only; a path holding a NUL byte is refused.
    static Expected<MappedFile> open(const std::filesystem::path& path);
    // The same for a path already resolved and checked (`real`, a split model's
    // later shard): a symlink there now is refused (O_NOFOLLOW), and the file is
    // named `name` (the shard's own name) in messages and path().
    static Expected<MappedFile> open_resolved(const std::filesystem::path& real,
                                              const std::filesystem::path& name);

    // An owned, 64-byte-aligned copy of `bytes` that behaves like a mapping:
    // for in-memory files, tests and the fuzzer. `label` stands in for the path
    // in error messages.
    static MappedFile copy_of(std::span<const std::byte> bytes, std::filesystem::path label);

    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::filesystem::path& path() const { return path_; }
    bool is_file_mapping() const { return mmapped_; }

    // Lets this process's memory drop the whole pages inside [offset,
    // offset + length): the bytes do not change (a read faults them back in
    // from the page cache), but pages no one reads again stop counting
    // against the process. Nothing for an owned copy.
    void release_pages(uint64_t offset, uint64_t length) const;

    // Process-unique and never reused (0 only for a moved-from object). Caches
    // key on this, never on bytes().data(): unmapping one file and mapping
    // another can hand back the same address (the seeds' MapId ABA).
    uint64_t mapping_id() const { return mapping_id_; }

  private:
    // Opens `target` with open(2)'s `extra_flags`, naming it `path`.
    static Expected<MappedFile> open_as(const std::filesystem::path& target,
                                        const std::filesystem::path& path, int extra_flags);

    struct AlignedDelete {
        void operator()(std::byte* p) const;
    };

    MappedFile() = default;
    void release() noexcept;

    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    bool mmapped_ = false;
    std::unique_ptr<std::byte[], AlignedDelete> owned_;
    std::filesystem::path path_;
    uint64_t mapping_id_ = 0;
};

}  // namespace ferrox::gguf
