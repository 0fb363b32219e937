#include "bench_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ferrox::cli {

namespace {
constexpr uint64_t kHugePage = uint64_t{2} << 20;
}

Expected<std::shared_ptr<HugePageBuffer>> HugePageBuffer::allocate(uint64_t bytes) {
    const uint64_t size = (std::max<uint64_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
    // One huge page more, to align the start.
    const uint64_t mapping_size = size + kHugePage;
    void* mapping =
        ::mmap(nullptr, mapping_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
        return make_error("bench: cannot map {} bytes of memory: {}", mapping_size,
                          std::strerror(errno));
    std::shared_ptr<HugePageBuffer> buffer(new HugePageBuffer());
    buffer->mapping_ = mapping;
    buffer->mapping_size_ = mapping_size;
    const auto address = reinterpret_cast<uintptr_t>(mapping);
    const uintptr_t aligned = (address + kHugePage - 1) / kHugePage * kHugePage;
    buffer->data_ = reinterpret_cast<std::byte*>(aligned);
    buffer->size_ = size;
    buffer->advised_ = ::madvise(buffer->data_, size, MADV_HUGEPAGE) == 0;
    return buffer;
}

HugePageBuffer::~HugePageBuffer() {
    if (mapping_) ::munmap(mapping_, mapping_size_);
}

}  // namespace ferrox::cli
