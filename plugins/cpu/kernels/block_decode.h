// Decoders from one block of a weight format to floats: the CPU plugin's own
// (not the core's reference, which the tests hold them against).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferrox::cpu {

// Writes `elements` floats (one block) from `block`.
using BlockDecoder = void (*)(const std::byte* block, float* out);

void decode_f32(const std::byte* block, float* out);   // 1 element
void decode_f16(const std::byte* block, float* out);   // 1 element
void decode_q8_0(const std::byte* block, float* out);  // 32 elements
void decode_q4_0(const std::byte* block, float* out);  // 32 elements
void decode_q4_k(const std::byte* block, float* out);  // 256 elements
void decode_q5_k(const std::byte* block, float* out);  // 256 elements
void decode_q6_k(const std::byte* block, float* out);  // 256 elements

}  // namespace ferrox::cpu
