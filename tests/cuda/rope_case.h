// One RoPE test case, shared by the host check of the kernel's math
// (test_cuda_resident_math) and the GPU test: random heads, the core's angles
// for positions pos0, pos0 + step, ..., and the core's rotation as the
// expected result.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "ferrox/model/ops.h"

namespace ferrox::test {

struct RopeCase {
    std::vector<float> x, cos, sin, want;  // x, want: [n_pos][n_heads][head_dim]
};

inline RopeCase rope_case(uint32_t n_pos, uint32_t n_heads, uint32_t head_dim, bool neox,
                          uint32_t pos0, uint32_t step, std::mt19937& rng) {
    const uint32_t half = head_dim / 2;
    RopeCase c;
    c.cos.resize(size_t{n_pos} * half);
    c.sin.resize(size_t{n_pos} * half);
    for (uint32_t p = 0; p < n_pos; ++p)
        model::ops::rope_angles(pos0 + step * p, 10000.0f, 1.0f,
                                std::span(c.cos).subspan(size_t{p} * half, half),
                                std::span(c.sin).subspan(size_t{p} * half, half));
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    c.x.resize(size_t{n_pos} * n_heads * head_dim);
    for (float& v : c.x) v = value(rng);
    c.want = c.x;
    const auto style = neox ? model::RopeStyle::Neox : model::RopeStyle::Normal;
    for (uint32_t p = 0; p < n_pos; ++p)
        for (uint32_t h = 0; h < n_heads; ++h)
            model::ops::rope_rotate(
                std::span(c.want).subspan((size_t{p} * n_heads + h) * head_dim, head_dim),
                std::span(c.cos).subspan(size_t{p} * half, half),
                std::span(c.sin).subspan(size_t{p} * half, half), style);
    return c;
}

}  // namespace ferrox::test
