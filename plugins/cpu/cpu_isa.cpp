#include "cpu_isa.h"

#include <cpuid.h>

#include <cstdint>

namespace ferrox::cpu {
namespace {

struct CpuidRegs {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
    CpuidRegs r;
    if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
    return r;
}

// XGETBV(0) by its opcode bytes, so this file needs no -mxsave.
uint64_t read_xcr0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t{hi} << 32) | lo;
}

bool bit(unsigned reg, unsigned n) { return ((reg >> n) & 1u) != 0; }

struct Features {
    bool avx2_fma_f16c = false;
    bool avx512_vnni = false;
};

Features probe() {
    Features f;
    const CpuidRegs l1 = cpuid(1, 0);
    const bool osxsave = bit(l1.ecx, 27);
    if (!osxsave) return f;  // the OS does not expose XCR0: no AVX state at all
    const uint64_t xcr0 = read_xcr0();
    const bool ymm_state = (xcr0 & 0x6) == 0x6;    // SSE + AVX registers saved
    const bool zmm_state = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
    const bool avx = bit(l1.ecx, 28), fma = bit(l1.ecx, 12), f16c = bit(l1.ecx, 29);
    const CpuidRegs l7 = cpuid(7, 0);
    const bool avx2 = bit(l7.ebx, 5);
    f.avx2_fma_f16c = ymm_state && avx && avx2 && fma && f16c;
    const bool avx512f = bit(l7.ebx, 16), avx512bw = bit(l7.ebx, 30), avx512vl = bit(l7.ebx, 31);
    const bool vnni = bit(l7.ecx, 11);
    f.avx512_vnni = f.avx2_fma_f16c && zmm_state && avx512f && avx512bw && avx512vl && vnni;
    return f;
}

const Features& features() {
    static const Features f = probe();
    return f;
}

}  // namespace

Isa detect_isa() {
    if (features().avx512_vnni) return Isa::Avx512Vnni;
    if (features().avx2_fma_f16c) return Isa::Avx2;
    return Isa::Portable;
}

bool isa_supported(Isa isa) {
    switch (isa) {
        case Isa::Portable:
            return true;
        case Isa::Avx2:
            return features().avx2_fma_f16c;
        case Isa::Avx512Vnni:
            return features().avx512_vnni;
    }
    return false;
}

std::string_view isa_name(Isa isa) {
    switch (isa) {
        case Isa::Portable:
            return "portable";
        case Isa::Avx2:
            return "avx2";
        case Isa::Avx512Vnni:
            return "avx512vnni";
    }
    return "?";
}

std::optional<Isa> parse_isa(std::string_view text) {
    if (text == "auto") return detect_isa();
    if (text == "portable") return Isa::Portable;
    if (text == "avx2") return Isa::Avx2;
    if (text == "avx512" || text == "avx512vnni") return Isa::Avx512Vnni;
    return std::nullopt;
}

}  // namespace ferrox::cpu
