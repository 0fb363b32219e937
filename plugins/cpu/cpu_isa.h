// Which SIMD path this process may run: CPUID says what the core can do,
// XCR0 says which register state the OS saves. Both must agree, or the first
// AVX instruction raises SIGILL (an old kernel, a VM that hides AVX state).
// The plugin re-detects here rather than linking the core.
#pragma once

#include <optional>
#include <string_view>

namespace ferrox::cpu {

enum class Isa {
    Portable,   // baseline x86-64 (SSE2), plain C++
    Avx2,       // AVX2 + FMA + F16C
    Avx512Vnni  // AVX-512 F/BW/VL + VNNI (+ F16C for the float kinds)
};

// The best path this CPU and OS can run.
Isa detect_isa();
// Whether `isa` can run here (Portable always can).
bool isa_supported(Isa isa);

std::string_view isa_name(Isa isa);  // "portable", "avx2", "avx512vnni"
// "portable" | "avx2" | "avx512" | "auto" (nullopt: not one of them). "auto"
// answers detect_isa().
std::optional<Isa> parse_isa(std::string_view text);

}  // namespace ferrox::cpu
