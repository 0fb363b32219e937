// Split GGUF models: the first shard names how many there are (split.count);
// the others sit next to it as name-0000K-of-0000N.gguf. Every shard is
// mapped and checked against the first before any tensor of it is trusted.
#include <fmt/format.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>

#include "ferrox/gguf/file.h"

namespace ferrox::gguf {
namespace {

constexpr std::string_view kSplitNo = "split.no";
constexpr std::string_view kSplitCount = "split.count";
constexpr std::string_view kSplitTensors = "split.tensors.count";
constexpr uint32_t kMaxShards = 65535;  // split.count is a UINT16 in llama.cpp's files

// "-%05d-of-%05d.gguf", as llama.cpp's llama_split_path spells a shard's name.
std::string shard_suffix(uint32_t index, uint32_t count) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", index + 1, count);
    return buf;
}

Error in_shard(const std::filesystem::path& path, const std::string& what) {
    return make_error("{}: {}", path.string(), what);
}

// A shard is read only from the folder the first shard really lies in (after
// its own symlinks: a Hugging Face cache links every shard into one blobs
// folder), and only as a regular file: a shard name linked to /etc/shadow or a
// home folder would otherwise be read and its bytes quoted in errors or served.
Expected<std::filesystem::path> shard_in_first_folder(const std::filesystem::path& shard,
                                                      const std::filesystem::path& first) {
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::canonical(first, ec).parent_path();
    if (ec) return in_shard(first, fmt::format("cannot resolve: {}", ec.message()));
    const std::filesystem::path real = std::filesystem::canonical(shard, ec);
    if (ec) return in_shard(shard, fmt::format("cannot resolve: {}", ec.message()));
    if (real.parent_path() != folder)
        return in_shard(shard, fmt::format("resolves to {}, outside {} where the first shard lies; "
                                           "shards are read from that folder only",
                                           real.string(), folder.string()));
    return real;
}

Expected<File> open_one(const std::filesystem::path& real, const std::filesystem::path& path) {
    auto mapped = MappedFile::open_resolved(real, path);
    if (!mapped) return mapped.error();
    return File::parse(std::make_shared<const MappedFile>(std::move(*mapped)));
}

// A metadata string the first shard and a later one must agree on, when the
// later one carries it at all (gguf-split writes metadata to the first only).
Expected<void> same_string(const File& first, const File& shard, std::string_view key) {
    const Value* mine = shard.find(key);
    if (mine == nullptr) return {};
    auto theirs = first.get_string_or(key, "");
    if (!theirs) return theirs.error();
    const auto* text = std::get_if<std::string>(mine);
    if (text == nullptr || *text != *theirs)
        return in_shard(shard.path(),
                        fmt::format("shard of another model: {} is {}, the first shard's is \"{}\"",
                                    key, to_display_string(*mine), *theirs));
    return {};
}

}  // namespace

Expected<File> File::open_other_shards(File first) {
    const Value* count_value = first.find(kSplitCount);
    if (count_value == nullptr) return first;
    auto count = first.get_u32(kSplitCount);
    if (!count) return count.error();
    if (*count > kMaxShards)
        return in_shard(first.path(), fmt::format("split.count {} is over {}", *count, kMaxShards));
    auto index = first.get_u32_or(kSplitNo, 0);
    if (!index) return index.error();
    if (*count <= 1 && *index == 0) return first;  // a split of one: the file itself
    if (*index != 0) {
        const std::string name = first.path().filename().string();
        const std::string mine = shard_suffix(*index, *count);
        const std::string hint =
            name.size() > mine.size() && name.ends_with(mine)
                ? fmt::format("; open {}",
                              name.substr(0, name.size() - mine.size()) + shard_suffix(0, *count))
                : "";
        return in_shard(first.path(),
                        fmt::format("this is shard {} of {} (split.no {}); a split model is "
                                    "opened from its first shard{}",
                                    *index + 1, *count, *index, hint));
    }
    auto total = first.get_i64(kSplitTensors);
    if (!total) return total.error();
    if (*total < 0)
        return in_shard(first.path(), fmt::format("split.tensors.count {} is negative", *total));

    const std::string name = first.path().filename().string();
    const std::string suffix = shard_suffix(0, *count);
    if (name.size() <= suffix.size() || !name.ends_with(suffix))
        return in_shard(first.path(),
                        fmt::format("split.count is {}, but the name does not end in {}, so the "
                                    "other shards cannot be found",
                                    *count, suffix));
    const std::filesystem::path prefix =
        first.path().parent_path() / name.substr(0, name.size() - suffix.size());

    for (uint32_t k = 1; k < *count; ++k) {
        const std::filesystem::path path = prefix.string() + shard_suffix(k, *count);
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
            return in_shard(path, fmt::format("shard {} of {} is missing (opening {})", k + 1,
                                              *count, first.path().string()));
        auto real = shard_in_first_folder(path, first.path());
        if (!real) return real.error();
        auto shard = open_one(*real, path);
        if (!shard) return shard.error();
        auto shard_count = shard->get_u32(kSplitCount);
        if (!shard_count) return shard_count.error();
        if (*shard_count != *count)
            return in_shard(path, fmt::format("shard of another split: split.count is {}, the "
                                              "first shard's is {}",
                                              *shard_count, *count));
        auto shard_index = shard->get_u32(kSplitNo);
        if (!shard_index) return shard_index.error();
        if (*shard_index != k)
            return in_shard(path, fmt::format("split.no is {}, expected {} (shards out of order)",
                                              *shard_index, k));
        auto shard_total = shard->get_i64(kSplitTensors);
        if (!shard_total) return shard_total.error();
        if (*shard_total != *total)
            return in_shard(path, fmt::format("shard of another model: split.tensors.count is "
                                              "{}, the first shard's is {}",
                                              *shard_total, *total));
        for (const std::string_view key : {"general.architecture", "general.name"})
            if (auto same = same_string(first, *shard, key); !same) return same.error();

        for (Tensor& t : shard->tensors_) {
            if (const Tensor* before = first.find_tensor(t.name())) {
                const auto owner =
                    std::find_if(first.shards_.begin(), first.shards_.end(),
                                 [&](const Shard& s) { return s.mapping == before->mapping(); });
                return in_shard(
                    path, fmt::format("tensor '{}' is also in {}", t.name(), owner->path.string()));
            }
            first.tensor_index_.emplace(t.name(), first.tensors_.size());
            first.tensors_.push_back(std::move(t));
        }
        first.shards_.push_back(std::move(shard->shards_.front()));
    }
    if (first.tensors_.size() != static_cast<uint64_t>(*total))
        return in_shard(first.path(),
                        fmt::format("split.tensors.count is {}, but the {} shards hold {} tensors",
                                    *total, *count, first.tensors_.size()));
    return first;
}

void File::release_header_pages() const { mapping_->release_pages(0, data_offset_); }

uint64_t File::mapped_bytes() const {
    uint64_t bytes = 0;
    for (const Shard& s : shards_) bytes += s.mapping->bytes().size();
    return bytes;
}

}  // namespace ferrox::gguf
