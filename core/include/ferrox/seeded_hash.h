// A hash for tables keyed by strings a file controls (vocabulary texts, BPE
// merges): SipHash-2-4 under a key drawn from the OS once per process. With
// std::hash (unkeyed, and MurmurHash-style hashes have seed-independent
// multicollisions) a crafted file can put every key in one bucket and make
// loading it quadratic; without the key, nobody can aim.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ferrox/api.h"

namespace ferrox {

using SipKey = std::array<uint64_t, 2>;

// SipHash-2-4 of `bytes` under `key` (Aumasson and Bernstein, 2012).
FERROX_API uint64_t siphash24(const SipKey& key, std::string_view bytes) noexcept;

// This process's key: from getrandom(2), fixed after the first call.
FERROX_API const SipKey& process_hash_key() noexcept;

// For std::unordered_map<std::string, T, SeededHash, std::equal_to<>>.
struct SeededHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
        return static_cast<size_t>(siphash24(process_hash_key(), s));
    }
};

}  // namespace ferrox
