// The row-level entry points: look the kind up, check n, run the kind's block
// codec over every block. The codec tables are the one place that maps a kind
// to its code; the kind table (quant_kind.h) gives the block shapes.
#include "ferrox/quant/reference.h"

#include <cmath>
#include <limits>
#include <vector>

#include "block_codec.h"
#include "ferrox/quant_kind.h"

namespace ferrox::quant {
namespace {

using detail::DequantizeBlock;
using detail::QuantizeBlock;

DequantizeBlock dequantizer_for(ferrox_kind kind) {
    switch (kind) {
        case FERROX_KIND_F32:
            return detail::dequantize_f32;
        case FERROX_KIND_F16:
            return detail::dequantize_f16;
        case FERROX_KIND_BF16:
            return detail::dequantize_bf16;
        case FERROX_KIND_Q4_0:
            return detail::dequantize_q4_0;
        case FERROX_KIND_Q4_1:
            return detail::dequantize_q4_1;
        case FERROX_KIND_Q5_0:
            return detail::dequantize_q5_0;
        case FERROX_KIND_Q5_1:
            return detail::dequantize_q5_1;
        case FERROX_KIND_Q8_0:
            return detail::dequantize_q8_0;
        case FERROX_KIND_Q8_1:
            return detail::dequantize_q8_1;
        case FERROX_KIND_Q2_K:
            return detail::dequantize_q2_k;
        case FERROX_KIND_Q3_K:
            return detail::dequantize_q3_k;
        case FERROX_KIND_Q4_K:
            return detail::dequantize_q4_k;
        case FERROX_KIND_Q5_K:
            return detail::dequantize_q5_k;
        case FERROX_KIND_Q6_K:
            return detail::dequantize_q6_k;
        case FERROX_KIND_Q8_K:
            return detail::dequantize_q8_k;
        case FERROX_KIND_IQ2_XXS:
            return detail::dequantize_iq2_xxs;
        case FERROX_KIND_IQ2_XS:
            return detail::dequantize_iq2_xs;
        case FERROX_KIND_IQ3_XXS:
            return detail::dequantize_iq3_xxs;
        case FERROX_KIND_IQ1_S:
            return detail::dequantize_iq1_s;
        case FERROX_KIND_IQ4_NL:
            return detail::dequantize_iq4_nl;
        case FERROX_KIND_IQ3_S:
            return detail::dequantize_iq3_s;
        case FERROX_KIND_IQ2_S:
            return detail::dequantize_iq2_s;
        case FERROX_KIND_IQ4_XS:
            return detail::dequantize_iq4_xs;
        case FERROX_KIND_IQ1_M:
            return detail::dequantize_iq1_m;
        case FERROX_KIND_MXFP4:
            return detail::dequantize_mxfp4;
        case FERROX_KIND_TQ1_0:
            return detail::dequantize_tq1_0;
        case FERROX_KIND_TQ2_0:
            return detail::dequantize_tq2_0;
        case FERROX_KIND_NVFP4:
            return detail::dequantize_nvfp4;
        case FERROX_KIND_Q1_0:
            return detail::dequantize_q1_0;
        default:
            return nullptr;
    }
}

QuantizeBlock quantizer_for(ferrox_kind kind) {
    switch (kind) {
        case FERROX_KIND_F32:
            return detail::quantize_f32;
        case FERROX_KIND_F16:
            return detail::quantize_f16;
        case FERROX_KIND_BF16:
            return detail::quantize_bf16;
        case FERROX_KIND_Q4_0:
            return detail::quantize_q4_0;
        case FERROX_KIND_Q8_0:
            return detail::quantize_q8_0;
        case FERROX_KIND_Q4_K:
            return detail::quantize_q4_k;
        case FERROX_KIND_Q5_K:
            return detail::quantize_q5_k;
        case FERROX_KIND_Q6_K:
            return detail::quantize_q6_k;
        case FERROX_KIND_Q8_K:
            return detail::quantize_q8_k;
        default:
            return nullptr;
    }
}

// The kind's traits when n is a whole number of its blocks, else nullptr.
const KindTraits* traits_for_row(ferrox_kind kind, uint64_t n) {
    const KindTraits* traits = kind_traits(static_cast<uint32_t>(kind));
    if (!traits || n % traits->block_elements != 0) return nullptr;
    return traits;
}

}  // namespace

bool dequantize_row(ferrox_kind kind, const void* src, float* dst, uint64_t n) {
    const KindTraits* traits = traits_for_row(kind, n);
    const DequantizeBlock dequantize = dequantizer_for(kind);
    if (!traits || !dequantize) return false;
    const auto* block = static_cast<const uint8_t*>(src);
    for (uint64_t done = 0; done < n; done += traits->block_elements) {
        dequantize(block, dst + done);
        block += traits->block_bytes;
    }
    return true;
}

bool quantize_row(ferrox_kind kind, const float* src, void* dst, uint64_t n) {
    const KindTraits* traits = traits_for_row(kind, n);
    const QuantizeBlock quantize = quantizer_for(kind);
    if (!traits || !quantize) return false;
    auto* block = static_cast<uint8_t*>(dst);
    for (uint64_t done = 0; done < n; done += traits->block_elements) {
        quantize(src + done, block);
        block += traits->block_bytes;
    }
    return true;
}

float dot_row(ferrox_kind kind, const void* row, const float* x, uint64_t n) {
    const KindTraits* traits = traits_for_row(kind, n);
    const DequantizeBlock dequantize = dequantizer_for(kind);
    if (!traits || !dequantize) return std::numeric_limits<float>::quiet_NaN();
    std::vector<float> weights(traits->block_elements);
    const auto* block = static_cast<const uint8_t*>(row);
    double sum = 0.0;
    for (uint64_t done = 0; done < n; done += traits->block_elements) {
        dequantize(block, weights.data());
        block += traits->block_bytes;
        for (uint32_t i = 0; i < traits->block_elements; ++i)
            sum += static_cast<double>(weights[i] * x[done + i]);
    }
    return static_cast<float>(sum);
}

}  // namespace ferrox::quant
