// What this x86 CPU can run: CPUID bits AND the register state the OS enabled
// (XCR0). A CPU with AVX-512 under a kernel or VM that does not save ZMM state
// raises SIGILL on the first AVX-512 instruction (llama.cpp#28328).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"

namespace ferrox {

struct FERROX_API CpuFeatures {
    bool sse42 = false;
    bool avx = false;  // CPUID and OS-enabled YMM state
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;  // CPUID and OS-enabled ZMM/opmask state
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512vnni = false;
    bool avx512bf16 = false;
    bool avxvnni = false;

    // Feature names as plugins write them in isa_required: "avx2", "fma", ...
    bool has(std::string_view feature) const;
    // The comma-separated requirement list's entries this CPU lacks
    // (an unknown name counts as lacking).
    std::vector<std::string> missing(std::string_view required_csv) const;
    std::string summary() const;  // "avx2 fma f16c ..."
};

FERROX_API const CpuFeatures& cpu_features();

}  // namespace ferrox
