// CLI11 validators for numeric flags whose values feed arithmetic: a range
// check that also refuses NaN and infinities (CLI::Range lets NaN through,
// since every comparison with it is false).
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace ferrox::cli {

// Accepts finite x with lo <= x <= hi (lo < x when `open_low`).
inline CLI::Validator finite_in(double lo, double hi, bool open_low = false) {
    const std::string what = fmt::format("{}{}, {}]", open_low ? "(" : "[", lo, hi);
    return CLI::Validator(
        [=](std::string& text) -> std::string {
            double x = 0;
            try {
                size_t used = 0;
                x = std::stod(text, &used);
                if (used != text.size()) return "'" + text + "' is not a number";
            } catch (const std::exception&) {
                return "'" + text + "' is not a number";
            }
            if (!std::isfinite(x) || x < lo || x > hi || (open_low && x == lo))
                return fmt::format("{} is outside {}", text, what);
            return {};
        },
        "FLOAT in " + what);
}

// Decimal digits only: refuses "-1", which the unsigned conversion would wrap
// to 2^64 - 1 without a word.
inline CLI::Validator unsigned_digits() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
                return "'" + text + "' is not a non-negative whole number";
            return {};
        },
        "UINT");
}

}  // namespace ferrox::cli
