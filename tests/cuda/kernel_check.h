// Shared by the CUDA kernel tests and ferrox_cuda_bench: random GGUF weights
// with realistic scales for every kind the capability table lists, the scalar
// reference product, and the NMSE / NaN / poison comparison.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferrox/backend_abi.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"

namespace ferrox::test {

// Real weights have small, positive-or-negative f16 scales; random bytes in a
// scale field would mostly decode as huge values, Inf or NaN.
inline constexpr float kMaxScale = 0.02f;

// Every output element is checked against this bit pattern, a NaN no
// arithmetic produces (hardware NaNs are 0x7fffffff), to prove it was written.
inline constexpr uint32_t kPoisonBits = 0x7fa0beefu;

// NMSE bound. The device decodes each weight exactly as the reference does
// (same float operations, but nvcc may fuse one multiply-add: <= 1 ulp) and
// sums 32-wide granules in a warp tree instead of element order, so relative
// error grows like sqrt(cols) * 2^-24: ~1e-12 NMSE at 4096 columns. 1e-5 is
// the project bound for floats; we hold every kind to it.
inline constexpr double kMaxNmse = 1e-5;

struct Matrix {
    ferrox_kind kind;
    uint64_t rows;
    uint64_t cols;
    uint64_t row_bytes;
    std::vector<uint8_t> bytes;
};

inline void put_f16(uint8_t* at, float value) {
    const uint16_t bits = ferrox::quant::fp32_to_fp16(value);
    std::memcpy(at, &bits, sizeof(bits));
}

inline const ferrox::KindTraits& traits_of(ferrox_kind kind) {
    const ferrox::KindTraits* traits = ferrox::kind_traits(static_cast<uint32_t>(kind));
    if (traits == nullptr) throw std::logic_error("unknown kind");
    return *traits;
}

// Where a quantized block keeps its f16 scale d and (if any) its f16
// min/dmin, and whether d takes either sign (the one-scale formats, whose
// quantizers divide by the signed extreme value, and the signed-sub-scale
// K-quants). The one place the tests look up a scale's byte offset.
struct ScaleFields {
    uint32_t d;
    int min;  // -1: none
    bool signed_d;
};

inline ScaleFields scale_fields(ferrox_kind kind) {
    switch (kind) {
        case FERROX_KIND_Q8_0:
        case FERROX_KIND_Q4_0:
        case FERROX_KIND_Q5_0:
        case FERROX_KIND_IQ4_NL:
        case FERROX_KIND_IQ4_XS:
            return {0, -1, true};
        case FERROX_KIND_Q4_1:
        case FERROX_KIND_Q5_1:
            return {0, 2, true};
        case FERROX_KIND_Q2_K:
            return {80, 82, false};
        case FERROX_KIND_Q3_K:
            return {108, -1, true};
        case FERROX_KIND_Q4_K:
        case FERROX_KIND_Q5_K:
            return {0, 2, false};
        case FERROX_KIND_Q6_K:
            return {208, -1, true};
        case FERROX_KIND_MXFP4:
            // Its scale is an E8M0 exponent byte (random_matrix has its own case).
            throw std::logic_error("MXFP4 has no f16 scale field");
        default:
            throw std::logic_error(std::string("no scale layout for kind ") +
                                   std::string(ferrox::kind_name(kind)) +
                                   ": add it to scale_fields()");
    }
}

// Random codes everywhere, small realistic f16 scales of both signs where the
// format has them: finite weights near kMaxScale, so dot products compare by
// NMSE. Covers the float kinds, MXFP4 and every kind scale_fields() knows.
inline Matrix random_matrix(ferrox_kind kind, uint64_t rows, uint64_t cols, std::mt19937& rng) {
    const ferrox::KindTraits& traits = traits_of(kind);
    Matrix m{kind, rows, cols, *ferrox::row_bytes(kind, cols), {}};
    m.bytes.resize(rows * m.row_bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::uniform_real_distribution<float> scale(kMaxScale / 20, kMaxScale);
    const uint64_t count = rows * cols;
    switch (kind) {
        case FERROX_KIND_F32:
            for (uint64_t i = 0; i < count; ++i) {
                const float v = unit(rng);
                std::memcpy(&m.bytes[4 * i], &v, 4);
            }
            return m;
        case FERROX_KIND_F16:
        case FERROX_KIND_BF16:
            for (uint64_t i = 0; i < count; ++i) {
                const float v = unit(rng);
                const uint16_t bits = kind == FERROX_KIND_F16 ? ferrox::quant::fp32_to_fp16(v)
                                                              : ferrox::quant::fp32_to_bf16(v);
                std::memcpy(&m.bytes[2 * i], &bits, 2);
            }
            return m;
        case FERROX_KIND_MXFP4: {
            // Random codes; the E8M0 exponent byte e (scale 2^(e - 127)) in
            // 120..124, scales 2^-7..2^-3: weights up to 6 * 2^-3, as small as
            // the other kinds'. A random byte would mostly give huge or Inf weights.
            for (auto& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
            std::uniform_int_distribution<int> exponent(120, 124);
            for (uint64_t b = 0; b < m.bytes.size() / traits.block_bytes; ++b)
                m.bytes[b * traits.block_bytes] = static_cast<uint8_t>(exponent(rng));
            return m;
        }
        default:
            break;
    }
    const ScaleFields fields = scale_fields(kind);  // throws for a kind it does not know
    for (auto& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
    const uint64_t blocks = m.bytes.size() / traits.block_bytes;
    // K-quant d multiplies a sub-scale of up to 63: keep weights ~kMaxScale.
    const float divisor = traits.block_elements == 256 ? 16.0f : 1.0f;
    for (uint64_t b = 0; b < blocks; ++b) {
        uint8_t* block = &m.bytes[b * traits.block_bytes];
        const float sign = fields.signed_d && (byte(rng) & 1) ? -1.0f : 1.0f;
        put_f16(block + fields.d, sign * scale(rng) / divisor);
        if (fields.min >= 0) {
            const float min_sign = byte(rng) & 1 ? -1.0f : 1.0f;
            put_f16(block + fields.min, min_sign * scale(rng) / divisor);
        }
    }
    return m;
}

inline std::vector<float> random_activations(uint64_t count, std::mt19937& rng) {
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::vector<float> x(count);
    for (float& v : x) v = unit(rng);
    return x;
}

// Y[p][r] from the scalar reference, for n positions.
inline std::vector<float> reference(const Matrix& m, const std::vector<float>& x, uint64_t n) {
    std::vector<float> y(n * m.rows);
    for (uint64_t p = 0; p < n; ++p)
        for (uint64_t r = 0; r < m.rows; ++r)
            y[p * m.rows + r] =
                ferrox::quant::dot_row(m.kind, &m.bytes[r * m.row_bytes], &x[p * m.cols], m.cols);
    return y;
}

struct Agreement {
    double nmse = 0;
    uint64_t unwritten = 0;     // still holding the poison
    uint64_t nan_mismatch = 0;  // NaN on one side only
};

inline Agreement compare(const std::vector<float>& got, const std::vector<float>& want) {
    Agreement a;
    double error = 0;
    double signal = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::bit_cast<uint32_t>(got[i]) == kPoisonBits) {
            ++a.unwritten;
        } else if (std::isnan(got[i]) || std::isnan(want[i])) {
            if (std::isnan(got[i]) != std::isnan(want[i])) ++a.nan_mismatch;  // NaN==NaN agrees
        } else {
            const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
            error += d * d;
            signal += static_cast<double>(want[i]) * static_cast<double>(want[i]);
        }
    }
    a.nmse = signal > 0 ? error / signal : error;
    return a;
}

}  // namespace ferrox::test
