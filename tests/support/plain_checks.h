// For the test programs that are not Catch2 executables (they print one
// line per check and exit 1 on any failure, 77 to skip): the check counter
// and the relative error both sides of a logits comparison use.
#pragma once

#include <cstdio>
#include <span>
#include <string>

namespace ferrox::test {

inline int failures = 0;

inline void check(bool ok, const std::string& what) {
    std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
}

// Squared error over the reference's squared norm (plain squared error
// when the reference is all zero).
inline double nmse(std::span<const float> got, std::span<const float> want) {
    double e = 0, r = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double d = double(got[i]) - double(want[i]);
        e += d * d;
        r += double(want[i]) * double(want[i]);
    }
    return r > 0 ? e / r : e;
}

}  // namespace ferrox::test
