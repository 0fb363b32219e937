// Plain float kinds: one element per "block".
#include "block_codec.h"

namespace ferrox::quant::detail {

void dequantize_f32(const uint8_t* block, float* out) { out[0] = read_f32(block); }
void dequantize_f16(const uint8_t* block, float* out) { out[0] = read_f16(block); }
void dequantize_bf16(const uint8_t* block, float* out) { out[0] = bf16_to_fp32(read_u16(block)); }

void quantize_f32(const float* in, uint8_t* block) { write_f32(block, in[0]); }
void quantize_f16(const float* in, uint8_t* block) { write_f16(block, in[0]); }
void quantize_bf16(const float* in, uint8_t* block) { write_u16(block, fp32_to_bf16(in[0])); }

}  // namespace ferrox::quant::detail
