// Tables keyed by file-controlled strings: a crafted set of keys that all land
// in one bucket of std::hash must spread under SeededHash. Counts, not clocks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferrox/seeded_hash.h"

using namespace ferrox;

TEST_CASE("siphash24 matches the reference vectors of its paper") {
    SipKey key{};
    unsigned char k[16];
    for (int i = 0; i < 16; ++i) k[i] = static_cast<unsigned char>(i);
    std::memcpy(key.data(), k, 16);  // little-endian k0 = 0x0706050403020100
    std::string message;
    CHECK(siphash24(key, message) == 0x726fdb47dd0e0e31ull);
    for (int i = 0; i < 15; ++i) message.push_back(static_cast<char>(i));
    CHECK(siphash24(key, message) == 0xa129ca6149be45e5ull);
}

namespace {

// `n` distinct keys whose std::hash falls into the same bucket of a table of
// `buckets` buckets: what an attacker precomputes offline, since std::hash
// is the same in every process.
std::vector<std::string> colliding_keys(size_t n, size_t buckets) {
    std::vector<std::string> keys;
    const size_t target = std::hash<std::string>{}("token0") % buckets;
    for (uint64_t i = 0; keys.size() < n; ++i) {
        std::string k = "token" + std::to_string(i);
        if (std::hash<std::string>{}(k) % buckets == target) keys.push_back(std::move(k));
    }
    return keys;
}

template <class Map>
size_t largest_bucket(const std::vector<std::string>& keys) {
    Map map;
    map.reserve(keys.size());
    const size_t buckets = map.bucket_count();
    for (size_t i = 0; i < keys.size(); ++i) map.emplace(keys[i], static_cast<int>(i));
    REQUIRE(map.bucket_count() == buckets);  // no rehash: the crafted layout holds
    size_t largest = 0;
    for (size_t b = 0; b < map.bucket_count(); ++b) largest = std::max(largest, map.bucket_size(b));
    return largest;
}

}  // namespace

TEST_CASE("keys crafted to collide under std::hash spread under SeededHash") {
    constexpr size_t n = 1500;
    std::unordered_map<std::string, int> probe;
    probe.reserve(n);
    const auto keys = colliding_keys(n, probe.bucket_count());

    // The attack works on an unkeyed table: every key in one chain, so each
    // lookup walks ~n entries and building it costs ~n^2/2 comparisons.
    CHECK(largest_bucket<std::unordered_map<std::string, int>>(keys) == n);
    // The keyed table: a fair spread (expected longest chain ~ ln n / ln ln n).
    CHECK(largest_bucket<std::unordered_map<std::string, int, SeededHash, std::equal_to<>>>(keys) <=
          12);
}

TEST_CASE("the open-addressing layout the vocabulary uses probes briefly for crafted keys") {
    // Vocab::find: slot = hash & (2^k - 1), linear probing, table >= 2n.
    constexpr size_t n = 2000, slots = 4096;
    std::vector<std::string> keys;
    const size_t target = std::hash<std::string_view>{}("t0") & (slots - 1);
    for (uint64_t i = 0; keys.size() < n; ++i) {
        std::string k = "t" + std::to_string(i);
        if ((std::hash<std::string_view>{}(k) & (slots - 1)) == target) keys.push_back(k);
    }
    auto total_probes = [&](auto hash) {
        std::vector<int> table(slots, -1);
        uint64_t probes = 0;
        for (size_t id = 0; id < keys.size(); ++id) {
            size_t i = hash(keys[id]) & (slots - 1);
            while (table[i] != -1) i = (i + 1) & (slots - 1), ++probes;
            table[i] = static_cast<int>(id);
        }
        return probes;
    };
    CHECK(total_probes(std::hash<std::string_view>{}) >= n * (n - 1) / 2);  // quadratic
    CHECK(total_probes(SeededHash{}) <= 4 * n);                             // linear
}
