// The converter's strings (length, pattern, format) and numbers (bounded
// integers and decimals): json_schema_converter.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "json_schema_converter.h"

namespace ferrox::grammar::schema {

std::string Converter::format_rule(const std::string& format, const std::string& at) {
    if (auto it = formats_.find(format); it != formats_.end()) return it->second;
    static const char* kDate =
        "[1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | "
        "\"3\" [01]) | (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | "
        "\"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))";
    static const char* kTime =
        "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
        "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
    std::string body;
    if (format == "date") {
        body = kDate;
    } else if (format == "time") {
        body = kTime;
    } else if (format == "date-time") {
        body = format_rule("date", at) + " \"T\" " + format_rule("time", at);
    } else if (format == "uuid") {
        body =
            "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
            "\"-\" [0-9a-fA-F]{12}";
    } else {
        refuse(at,
               fmt::format("'{}' is not enforced (date, time, date-time and uuid are)", format));
    }
    return formats_[format] = rule("format-" + format, body);
}

std::string Converter::string(const ordered_json& s, const std::string& ptr) {
    const std::string quote = "\"\\\"\"";
    const bool has_length = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
        const std::string at = child(ptr, "format");
        if (!s.at("format").is_string()) refuse(at, "must be a string");
        if (has_length || s.contains("pattern"))
            refuse(at, "not enforced together with pattern, minLength or maxLength");
        return seq({quote, format_rule(s.at("format").get<std::string>(), at), quote});
    }
    if (s.contains("pattern")) {
        const std::string at = child(ptr, "pattern");
        const ordered_json& p = s.at("pattern");
        if (!p.is_string()) refuse(at, "must be a string");
        if (has_length) refuse(at, "not enforced together with minLength or maxLength");
        const std::string& text = p.get_ref<const std::string&>();
        if (text.size() > limits_.max_pattern_bytes)
            refuse(at, fmt::format("is {} bytes, past the limit max_pattern_bytes ({})",
                                   text.size(), limits_.max_pattern_bytes));
        std::string expr;
        try {
            expr = schema::pattern_to_gbnf(text, limits_.max_repetition);
        } catch (const Refusal& r) {
            refuse(at, r.message);
        }
        // Compiled alone first, so that its errors (a repetition of
        // something that can match nothing, too many symbols) name it.
        const std::string alone =
            "root ::= " + expr + "\n" + schema::shared_rules(limits_.max_indent);
        if (auto g = parse_gbnf(alone, json_schema_grammar_limits(limits_)); !g)
            refuse(at, "not enforced: " + g.error().message());
        return seq({quote, rule("pattern", expr), quote});
    }
    const uint32_t min = count(s, "minLength", ptr).value_or(0);
    const auto max = count(s, "maxLength", ptr);
    if (max && *max < min) refuse(child(ptr, "maxLength"), "is below minLength");
    if (!has_length) return schema::kJsonString;
    const std::string reps =
        max ? fmt::format("{{{},{}}}", min, *max) : fmt::format("{{{},}}", min);
    return seq({quote, std::string(schema::kJsonChar) + reps, quote});
}

// The integers the bounds admit, within +-magnitude.
Converter::IntBounds Converter::integer_bounds(const ordered_json& s, const std::string& ptr,
                                               int64_t magnitude) {
    long double lo = -static_cast<long double>(magnitude), hi = static_cast<long double>(magnitude);
    const auto bound = [&](const char* key) -> std::optional<long double> {
        if (!s.contains(key)) return std::nullopt;
        const ordered_json& v = s.at(key);
        if (!v.is_number()) refuse(child(ptr, key), "must be a number");
        const long double d =
            v.is_number_integer()
                ? (v.is_number_unsigned() ? static_cast<long double>(v.get<uint64_t>())
                                          : static_cast<long double>(v.get<int64_t>()))
                : static_cast<long double>(v.get<double>());
        if (!std::isfinite(d)) refuse(child(ptr, key), "must be finite");
        return d;
    };
    if (auto m = bound("minimum")) lo = std::max(lo, std::ceil(*m));
    if (auto m = bound("exclusiveMinimum")) lo = std::max(lo, std::floor(*m) + 1);
    if (auto m = bound("maximum")) hi = std::min(hi, std::floor(*m));
    if (auto m = bound("exclusiveMaximum")) hi = std::min(hi, std::ceil(*m) - 1);
    if (lo > hi)
        refuse(ptr, fmt::format("no integer of at most {} digits satisfies the bounds",
                                std::to_string(magnitude).size()));
    return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

bool Converter::has_bounds(const ordered_json& s) {
    return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
           s.contains("exclusiveMaximum");
}

std::string Converter::integer(const ordered_json& s, const std::string& ptr) {
    if (!has_bounds(s)) return schema::kJsonInteger;
    const IntBounds b = integer_bounds(s, ptr, schema::kIntegerMagnitude);
    return schema::integer_range(b.lo, b.hi);
}

// Bounded numbers: integers within the bounds, and k.ddd for the k whose
// whole unit interval lies within them (k.ddd rounds into [k, k+1]), so
// no digits after the point can cross a bound. No exponent.
std::string Converter::number(const ordered_json& s, const std::string& ptr) {
    if (!has_bounds(s)) return schema::kJsonNumber;
    const IntBounds b = integer_bounds(s, ptr, kNumberMagnitude);
    const std::string fraction = "\".\" [0-9]{1,15}";
    std::vector<std::string> alts{schema::integer_range(b.lo, b.hi)};
    const int64_t up_lo = std::max<int64_t>(0, b.lo), up_hi = b.hi - 1;
    if (up_lo <= up_hi) alts.push_back(schema::integer_range(up_lo, up_hi) + " " + fraction);
    const int64_t down_lo = std::max<int64_t>(0, -b.hi), down_hi = -b.lo - 1;
    if (down_lo <= down_hi)
        alts.push_back("\"-\" " + schema::integer_range(down_lo, down_hi) + " " + fraction);
    std::string body = "(";
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return body + ")";
}

}  // namespace ferrox::grammar::schema
