#include "config/scalar_parse.h"

#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <utility>

namespace ferrox::config_detail {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

std::string_view trim_spaces(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::variant<std::int64_t, NumberProblem> parse_integer(std::string_view text) {
    std::string_view digits = text;
    if (!digits.empty() && digits.front() == '+') {
        digits.remove_prefix(1);
        if (!digits.empty() && digits.front() == '-') return NumberProblem::NotANumber;
    }
    std::int64_t value = 0;
    const char* const end = digits.data() + digits.size();
    const std::from_chars_result parsed = std::from_chars(digits.data(), end, value);
    if (parsed.ptr != end) return NumberProblem::NotANumber;
    if (parsed.ec == std::errc::result_out_of_range) return NumberProblem::TooLarge;
    if (parsed.ec != std::errc()) return NumberProblem::NotANumber;
    return value;
}

std::variant<bool, std::monostate> parse_bool(std::string_view text) {
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    return std::monostate{};
}

ByteSizeResult parse_byte_size(std::string_view text) {
    ByteSizeResult result;
    text = trim_spaces(text);
    bool negative = false;
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
        negative = text.front() == '-';
        text.remove_prefix(1);
    }
    std::size_t digit_count = 0;
    while (digit_count < text.size() && is_digit(text[digit_count])) ++digit_count;
    if (digit_count == 0) return result;
    const std::string_view number = text.substr(0, digit_count);
    const std::string_view unit = trim_spaces(text.substr(digit_count));

    static constexpr std::array<std::pair<std::string_view, unsigned>, 5> kIecUnits{
        {{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}}};
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kDecimalUnits{
        {{"KB", "KiB"}, {"MB", "MiB"}, {"GB", "GiB"}, {"TB", "TiB"}}};

    unsigned shift = 0;
    bool unit_known = unit.empty();
    for (const auto& [name, unit_shift] : kIecUnits) {
        if (equals_ignoring_case(unit, name)) {
            shift = unit_shift;
            unit_known = true;
        }
    }
    if (!unit_known) {
        for (const auto& [decimal, iec] : kDecimalUnits) {
            if (equals_ignoring_case(unit, decimal)) {
                result.suggestion = std::string(number) + std::string(iec);
            }
        }
        return result;
    }

    std::uint64_t value = 0;
    // The digit scan above bounded `number`, so only overflow can go wrong here.
    const std::from_chars_result parsed =
        std::from_chars(number.data(), number.data() + number.size(), value);
    if (parsed.ec == std::errc::result_out_of_range ||
        (shift > 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift))) {
        result.overflow = true;
        return result;
    }
    if (negative && value != 0) {
        result.negative = true;
        return result;
    }
    result.bytes = value << shift;
    result.ok = true;
    return result;
}

}  // namespace ferrox::config_detail
