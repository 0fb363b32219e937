#include "ferrox/cpu_features.h"

#include <array>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ferrox {
namespace {

#if defined(__x86_64__) || defined(__i386__)
struct Regs {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
    Regs r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
}

uint64_t read_xcr0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(uint32_t value, int index) { return (value >> index) & 1u; }

CpuFeatures detect() {
    CpuFeatures f;
    const uint32_t max_leaf = cpuid(0, 0).eax;
    if (max_leaf < 1) return f;
    const Regs l1 = cpuid(1, 0);
    f.sse42 = bit(l1.ecx, 20);
    const bool osxsave = bit(l1.ecx, 27);
    const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    // XMM|YMM state (bits 1,2); opmask|ZMM_Hi256|Hi16_ZMM (bits 5,6,7).
    const bool os_ymm = (xcr0 & 0x6) == 0x6;
    const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
    f.avx = bit(l1.ecx, 28) && os_ymm;
    f.fma = bit(l1.ecx, 12) && os_ymm;
    f.f16c = bit(l1.ecx, 29) && os_ymm;
    if (max_leaf >= 7) {
        const Regs l7 = cpuid(7, 0);
        f.avx2 = bit(l7.ebx, 5) && os_ymm;
        f.avx512f = bit(l7.ebx, 16) && os_zmm;
        f.avx512bw = bit(l7.ebx, 30) && os_zmm;
        f.avx512vl = bit(l7.ebx, 31) && os_zmm;
        f.avx512vnni = bit(l7.ecx, 11) && os_zmm;
        const Regs l7s1 = cpuid(7, 1);
        f.avx512bf16 = bit(l7s1.eax, 5) && os_zmm;
        f.avxvnni = bit(l7s1.eax, 4) && os_ymm;
    }
    return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

std::array<std::pair<std::string_view, bool CpuFeatures::*>, 11> feature_table() {
    return {{{"sse4.2", &CpuFeatures::sse42},
             {"avx", &CpuFeatures::avx},
             {"avx2", &CpuFeatures::avx2},
             {"fma", &CpuFeatures::fma},
             {"f16c", &CpuFeatures::f16c},
             {"avx512f", &CpuFeatures::avx512f},
             {"avx512bw", &CpuFeatures::avx512bw},
             {"avx512vl", &CpuFeatures::avx512vl},
             {"avx512vnni", &CpuFeatures::avx512vnni},
             {"avx512bf16", &CpuFeatures::avx512bf16},
             {"avxvnni", &CpuFeatures::avxvnni}}};
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

}  // namespace

bool CpuFeatures::has(std::string_view feature) const {
    for (const auto& [name, member] : feature_table())
        if (name == feature) return this->*member;
    return false;
}

std::vector<std::string> CpuFeatures::missing(std::string_view required_csv) const {
    std::vector<std::string> lacking;
    while (!required_csv.empty()) {
        const size_t comma = required_csv.find(',');
        const std::string_view item = trim(required_csv.substr(0, comma));
        if (!item.empty() && !has(item)) lacking.emplace_back(item);
        if (comma == std::string_view::npos) break;
        required_csv.remove_prefix(comma + 1);
    }
    return lacking;
}

std::string CpuFeatures::summary() const {
    std::string out;
    for (const auto& [name, member] : feature_table()) {
        if (!(this->*member)) continue;
        if (!out.empty()) out += ' ';
        out += name;
    }
    return out.empty() ? std::string("baseline") : out;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

}  // namespace ferrox
