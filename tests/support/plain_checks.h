// For the test programs that are not Catch2 executables (they print one
// line per check and exit 1 on any failure, 77 to skip): the check counter
// (the relative error both sides of a logits comparison use is nmse.h's).
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "nmse.h"  // nmse(got, want), the one the Catch2 tests use

namespace ferrox::test {

inline int failures = 0;

inline void check(bool ok, const std::string& what) {
    std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
}

}  // namespace ferrox::test
