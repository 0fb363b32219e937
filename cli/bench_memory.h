// Memory for ferrox bench's weight copies and read-bandwidth probe, held the
// way a model's weights are: on a current kernel a GGUF file mapped from ext4
// is mapped with 2 MiB pages (FilePmdMapped in /proc/PID/smaps: 4.4 of a 4.5
// GB model, with no madvise), while heap memory under the usual THP setting
// ("madvise") gets 4 KiB pages. On one 2-core host the page size moved the
// probe from 14.4 to 17.3 GB/s and the Q4_K/Q6_K MATVECs by 3-7%, so both
// sides of the bench's ratio come from memory advised for huge pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ferrox/expected.h"

namespace ferrox::cli {

class HugePageBuffer {
  public:
    // At least `bytes`, 2 MiB aligned, advised MADV_HUGEPAGE before any page
    // is touched; a kernel that refuses the advice still gives the memory.
    static Expected<std::shared_ptr<HugePageBuffer>> allocate(uint64_t bytes);
    ~HugePageBuffer();
    HugePageBuffer(const HugePageBuffer&) = delete;
    HugePageBuffer& operator=(const HugePageBuffer&) = delete;

    std::span<std::byte> bytes() const { return {data_, size_}; }
    bool huge_pages_advised() const { return advised_; }

  private:
    HugePageBuffer() = default;
    void* mapping_ = nullptr;
    uint64_t mapping_size_ = 0;
    std::byte* data_ = nullptr;
    uint64_t size_ = 0;
    bool advised_ = false;
};

}  // namespace ferrox::cli
