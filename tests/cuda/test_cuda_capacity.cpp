// The CUDA plugin's VRAM capacity plan as pure arithmetic, on any host: when
// vram_budget or the free device memory refuses a weight or buffer, and the
// message that shows the numbers.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "capacity_plan.h"

using ferrox::cuda::DeviceMemory;
using ferrox::cuda::format_bytes;
using ferrox::cuda::PlacementRequest;
using ferrox::cuda::refuse_placement;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
// 8192 x 28672 Q4_K: 144 bytes per 256 weights.
constexpr uint64_t kQ4KWeightBytes = uint64_t{8192} * 28672 / 256 * 144;
constexpr std::string_view kQ4KWeight = "a 8192 x 28672 Q4_K weight";
const DeviceMemory kH200{139 * kGiB + 512 * kMiB, 140 * kGiB + 410 * kMiB};

uint64_t test_seed() {
    if (const char* text = std::getenv("FERROX_TEST_SEED")) return std::strtoull(text, nullptr, 10);
    return std::random_device{}();
}

}  // namespace

TEST_CASE("format_bytes writes binary units with one decimal") {
    CHECK(format_bytes(0) == "0 B");
    CHECK(format_bytes(1023) == "1023 B");
    CHECK(format_bytes(1536) == "1.5 KiB");
    CHECK(format_bytes(kQ4KWeightBytes) == "126.0 MiB");
    CHECK(format_bytes(80 * kGiB) == "80.0 GiB");
    // 1023.99 MiB would print as "1024.0 MiB": it moves up a unit instead.
    CHECK(format_bytes(kGiB - 10 * 1024) == "1.0 GiB");
    CHECK(format_bytes(std::numeric_limits<uint64_t>::max()) == "16384.0 PiB");  // the top unit
}

TEST_CASE("a weight over vram_budget is refused with used + size > budget and the free memory") {
    const PlacementRequest request{kQ4KWeight, kQ4KWeightBytes, 79 * kGiB + 950 * kMiB, 80 * kGiB};
    const auto refusal = refuse_placement(request, kH200);
    REQUIRE(refusal);
    CHECK(*refusal ==
          "cuda: cannot place a 8192 x 28672 Q4_K weight (126.0 MiB): 79.9 GiB used + 126.0 MiB "
          "> vram_budget 80.0 GiB (free 139.5 GiB of 140.4 GiB)");
}

TEST_CASE("a placement ending exactly at vram_budget fits and one byte more does not") {
    const uint64_t budget = 80 * kGiB;
    const uint64_t resident = budget - kQ4KWeightBytes;
    CHECK_FALSE(refuse_placement({kQ4KWeight, kQ4KWeightBytes, resident, budget}, kH200));
    CHECK(refuse_placement({kQ4KWeight, kQ4KWeightBytes + 1, resident, budget}, kH200));
    CHECK(refuse_placement({kQ4KWeight, kQ4KWeightBytes, resident + 1, budget}, kH200));
}

TEST_CASE("without vram_budget only the free device memory limits a placement") {
    const DeviceMemory nearly_full{1 * kGiB, 140 * kGiB + 410 * kMiB};
    CHECK_FALSE(refuse_placement({"a buffer", 1 * kGiB, 139 * kGiB, 0}, nearly_full));
    const auto refusal = refuse_placement({"a buffer", 2 * kGiB, 139 * kGiB, 0}, nearly_full);
    REQUIRE(refusal);
    CHECK(*refusal ==
          "cuda: cannot place a buffer (2.0 GiB): 2.0 GiB > free 1.0 GiB of 140.4 GiB (139.0 GiB "
          "used by this backend, no vram_budget)");
}

TEST_CASE("a placement within vram_budget is still refused when the device has no room") {
    const DeviceMemory nearly_full{100 * kMiB, 140 * kGiB + 410 * kMiB};
    const auto refusal = refuse_placement({kQ4KWeight, kQ4KWeightBytes, 0, 80 * kGiB}, nearly_full);
    REQUIRE(refusal);
    CHECK(*refusal ==
          "cuda: cannot place a 8192 x 28672 Q4_K weight (126.0 MiB): 126.0 MiB > free 100.0 MiB "
          "of 140.4 GiB (0 B used by this backend, vram_budget 80.0 GiB)");
}

TEST_CASE("sizes near 2^64 are refused without the sum wrapping around") {
    const uint64_t max = std::numeric_limits<uint64_t>::max();
    const DeviceMemory huge{max, max};
    CHECK(refuse_placement({"a buffer", 10, max - 5, max}, huge));
    CHECK(refuse_placement({"a buffer", max, 1, max - 1}, huge));
    CHECK_FALSE(refuse_placement({"a buffer", 5, max - 5, max}, huge));
}

TEST_CASE("refusal matches used + size > budget or size > free on random sizes") {
    const uint64_t seed = test_seed();
    INFO("FERROX_TEST_SEED=" << seed);
    std::mt19937_64 rng(seed);
    // Below 2^62, so the reference sums below cannot overflow.
    std::uniform_int_distribution<uint64_t> size(1, uint64_t{1} << 62);
    for (int i = 0; i < 10000; ++i) {
        const uint64_t bytes = size(rng) >> (rng() % 62);
        const uint64_t resident = size(rng) >> (rng() % 62);
        const uint64_t budget = i % 4 == 0 ? 0 : size(rng) >> (rng() % 62);
        const uint64_t free_bytes = size(rng) >> (rng() % 62);
        const bool over_budget = budget != 0 && resident + bytes > budget;
        const bool over_free = bytes > free_bytes;
        INFO("bytes " << bytes << " resident " << resident << " budget " << budget << " free "
                      << free_bytes);
        const auto refusal =
            refuse_placement({"a buffer", bytes, resident, budget}, {free_bytes, free_bytes});
        REQUIRE(refusal.has_value() == (over_budget || over_free));
        if (over_budget) REQUIRE(refusal->find("> vram_budget") != std::string::npos);
    }
}
