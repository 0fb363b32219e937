// IEEE half (f16) and bfloat16 <-> float32 conversions, exact to the bit.
// fp32_to_fp16 rounds to nearest even exactly as numpy's astype(float16)
// (NaN keeps its top payload bits and stays NaN); fp32_to_bf16 rounds as the
// gguf package's BF16 quantizer (round to nearest even, NaN forced quiet).
#pragma once

#include <bit>
#include <cstdint>

namespace ferrox::quant {

constexpr float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f)  // Inf or NaN: the payload moves up unchanged
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent != 0)
        return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal half: normalise, since every one of them is a normal float32.
    uint32_t float_exponent = 127 - 14;
    while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --float_exponent;
    }
    return std::bit_cast<float>(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

// `value >> shift`, rounded to nearest, ties to even (shift >= 1).
constexpr uint32_t shift_right_round_even(uint32_t value, uint32_t shift) {
    const uint32_t kept = value >> shift;
    const uint32_t rest = value & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

constexpr uint16_t fp32_to_fp16(float f) {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    const uint32_t exponent = (bits >> 23) & 0xffu;
    const uint32_t mantissa = bits & 0x7fffffu;
    if (exponent == 0xff) {
        if (mantissa == 0) return static_cast<uint16_t>(sign | 0x7c00u);
        // numpy keeps the top 10 payload bits; a payload that would vanish
        // becomes 1 so the result is still a NaN (not quieted).
        uint32_t nan = 0x7c00u | (mantissa >> 13);
        if (nan == 0x7c00u) nan += 1;
        return static_cast<uint16_t>(sign | nan);
    }
    const int unbiased = static_cast<int>(exponent) - 127;
    if (unbiased > 15) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
    if (unbiased < -25) return sign;  // below half the smallest subnormal (incl. f32 subnormals)
    if (unbiased < -14) {
        // Half subnormal: units of 2^-24; the carry out of 0x3ff lands on the
        // smallest normal's encoding, which is right.
        const uint32_t significand = mantissa | 0x800000u;
        const auto shift = static_cast<uint32_t>(-unbiased - 1);
        return static_cast<uint16_t>(sign | shift_right_round_even(significand, shift));
    }
    // Normal: a carry out of the mantissa bumps the exponent, up to Inf.
    const uint32_t unrounded = (static_cast<uint32_t>(unbiased + 15) << 23) | mantissa;
    return static_cast<uint16_t>(sign | shift_right_round_even(unrounded, 13));
}

constexpr float bf16_to_fp32(uint16_t h) {
    return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

constexpr uint16_t fp32_to_bf16(float f) {
    uint32_t bits = std::bit_cast<uint32_t>(f);
    // A NaN is made quiet first, so rounding can never turn it into Inf.
    if ((bits & 0x7fffffffu) > 0x7f800000u) bits = (bits & 0xffff0000u) | 0x00400000u;
    const uint64_t rounded = static_cast<uint64_t>(bits) + 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace ferrox::quant
