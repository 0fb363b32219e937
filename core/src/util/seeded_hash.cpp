#include "ferrox/seeded_hash.h"

#include <sys/random.h>

#include <bit>
#include <chrono>
#include <cstring>

namespace ferrox {
namespace {

struct SipState {
    uint64_t v0, v1, v2, v3;

    void round() {
        v0 += v1;
        v1 = std::rotl(v1, 13);
        v1 ^= v0;
        v0 = std::rotl(v0, 32);
        v2 += v3;
        v3 = std::rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = std::rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = std::rotl(v1, 17);
        v1 ^= v2;
        v2 = std::rotl(v2, 32);
    }
    void absorb(uint64_t m) {
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }
};

uint64_t load_le64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

SipKey draw_key() {
    SipKey key{};
    size_t got = 0;
    auto* out = reinterpret_cast<unsigned char*>(key.data());
    while (got < sizeof key) {
        const ssize_t n = ::getrandom(out + got, sizeof key - got, 0);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    if (got < sizeof key) {
        // No entropy source (a seccomp sandbox): the clock and an address
        // still differ per run, which is all aiming requires us to deny.
        key[0] ^= static_cast<uint64_t>(
            std::chrono::high_resolution_clock::now().time_since_epoch().count());
        key[1] ^= reinterpret_cast<uintptr_t>(&key) * 0x9e3779b97f4a7c15ull;
    }
    return key;
}

}  // namespace

uint64_t siphash24(const SipKey& key, std::string_view bytes) noexcept {
    SipState s{key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull,
               key[0] ^ 0x6c7967656e657261ull, key[1] ^ 0x7465646279746573ull};
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t whole = bytes.size() / 8 * 8;
    for (size_t i = 0; i < whole; i += 8) s.absorb(load_le64(p + i));
    uint64_t last = static_cast<uint64_t>(bytes.size() & 0xff) << 56;
    for (size_t i = whole; i < bytes.size(); ++i) last |= uint64_t{p[i]} << (8 * (i - whole));
    s.absorb(last);
    s.v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

const SipKey& process_hash_key() noexcept {
    static const SipKey key = draw_key();
    return key;
}

}  // namespace ferrox
