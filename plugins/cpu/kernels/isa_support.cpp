// Baseline-compiled helpers the ISA files call: f16 conversion for the
// portable path and the core's reference decoder for the codebook i-quants.
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "kernels/isa_kernels.h"

namespace ferrox::cpu {

float round_to_f16(float value) { return quant::fp16_to_fp32(quant::fp32_to_fp16(value)); }

float f16_bits_to_float(uint16_t bits) { return quant::fp16_to_fp32(bits); }

void reference_decode(ferrox_kind kind, const std::byte* src, uint64_t blocks, float* out) {
    const KindTraits* t = kind_traits(static_cast<uint32_t>(kind));
    quant::dequantize_row(kind, src, out, blocks * t->block_elements);
}

}  // namespace ferrox::cpu
