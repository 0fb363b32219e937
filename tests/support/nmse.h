// The one normalised mean squared error of the tests (Catch2 executables and
// plain test programs alike): how far `got` is from the reference `want`.
#pragma once

#include <cmath>
#include <span>

namespace ferrox::test {

// sum (got - want)^2 / sum want^2 (the plain squared error when the
// reference is all zero). NaN on both sides counts as agreement; NaN on one
// side is a failure (inf).
inline double nmse(std::span<const float> got, std::span<const float> want) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i]) && std::isnan(got[i])) continue;
        if (std::isnan(got[i]) || std::isnan(want[i])) return INFINITY;
        const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
        err += d * d;
        ref += static_cast<double>(want[i]) * static_cast<double>(want[i]);
    }
    return ref == 0 ? err : err / ref;
}

}  // namespace ferrox::test
