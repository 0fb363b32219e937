// GBNF text for json_schema.cpp: literals, classes, the shared JSON rules and
// decimal integer ranges.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "json_schema_parts.h"

namespace ferrox::grammar::schema {
namespace {

// A code point inside a GBNF class: letters and digits as themselves, the
// rest escaped, so no class syntax (] - ^ \) is ever read as a member.
std::string class_char(uint32_t cp) {
    const bool alnum =
        (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    if (alnum) return std::string(1, static_cast<char>(cp));
    if (cp < 0x80) return fmt::format("\\x{:02X}", cp);
    if (cp < 0x10000) return fmt::format("\\u{:04X}", cp);
    return fmt::format("\\U{:08X}", cp);
}

// Decimal strings of equal length, lo <= hi: every number between them.
std::string same_length(std::string_view lo, std::string_view hi) {
    if (lo.empty()) return "";
    const bool lo_zeros = lo.find_first_not_of('0') == std::string_view::npos;
    const bool hi_nines = hi.find_first_not_of('9') == std::string_view::npos;
    if (lo_zeros && hi_nines) return fmt::format("[0-9]{{{}}}", lo.size());
    const std::string rest_lo(lo.substr(1)), rest_hi(hi.substr(1));
    if (lo[0] == hi[0]) {
        return fmt::format("\"{}\" {}", lo[0], same_length(rest_lo, rest_hi));
    }
    const std::string nines(rest_lo.size(), '9'), zeros(rest_lo.size(), '0');
    std::string out = "(";
    out += fmt::format("\"{}\" {}", lo[0], same_length(rest_lo, nines));
    if (lo[0] + 1 <= hi[0] - 1) {
        out +=
            fmt::format(" | [{}-{}]", static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1));
        if (!rest_lo.empty()) out += fmt::format(" [0-9]{{{}}}", rest_lo.size());
    }
    out += fmt::format(" | \"{}\" {})", hi[0], same_length(zeros, rest_hi));
    return out;
}

int64_t power_of_ten(size_t digits) {
    int64_t p = 1;
    for (size_t i = 0; i < digits; ++i) p *= 10;
    return p;
}

// 0 <= lo <= hi: each length of number in turn.
std::string magnitudes(int64_t lo, int64_t hi) {
    const size_t lo_digits = std::to_string(lo).size(), hi_digits = std::to_string(hi).size();
    std::string out = "(";
    for (size_t d = lo_digits; d <= hi_digits; ++d) {
        const int64_t first = d == 1 ? 0 : power_of_ten(d - 1);
        const int64_t last = power_of_ten(d) - 1;
        const int64_t a = std::max(lo, first), b = std::min(hi, last);
        if (d > lo_digits) out += " | ";
        out += same_length(std::to_string(a), std::to_string(b));
    }
    return out + ")";
}

}  // namespace

std::string json_plain_class() {
    return gbnf_class(scalars_outside({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
}

std::string shared_rules(uint32_t max_indent) {
    std::string out;
    out += fmt::format("{} ::= (\" \" | \"\\n\" [ \\t]{{0,{}}})?\n", kWs, max_indent);
    // One character of a JSON string as JSON spells it; a \u escape never
    // names a surrogate, so one grammar character is one decoded character
    // (minLength and maxLength count decoded characters). Raw characters are
    // Unicode scalars only: a surrogate (ED A0 80) or a lead byte F5..FF
    // decodes past U+10FFFF and would reach the client as U+FFFD each byte.
    out += fmt::format(
        "{} ::= {} | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
        "([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{{3}} | [dD] [0-7] [0-9a-fA-F]{{2}}))\n",
        kJsonChar, json_plain_class());
    out += fmt::format("{} ::= \"\\\"\" {}* \"\\\"\"\n", kJsonString, kJsonChar);
    // Bounded digits: a runaway number cannot fill max_tokens, and every value
    // parses to a finite double.
    out += fmt::format("{} ::= \"-\"? (\"0\" | [1-9] [0-9]{{0,17}})\n", kJsonInteger);
    out += fmt::format("{} ::= {} (\".\" [0-9]{{1,15}})? ([eE] [-+]? [0-9]{{1,2}})?\n", kJsonNumber,
                       kJsonInteger);
    out += fmt::format(
        "{} ::= \"{{\" {} ({} {} \":\" {} {} {} (\",\" {} {} {} \":\" {} {} {})*)? \"}}\"\n",
        kJsonObject, kWs, kJsonString, kWs, kWs, kJsonValue, kWs, kWs, kJsonString, kWs, kWs,
        kJsonValue, kWs);
    out += fmt::format("json-array ::= \"[\" {} ({} {} (\",\" {} {} {})*)? \"]\"\n", kWs,
                       kJsonValue, kWs, kWs, kJsonValue, kWs);
    out += fmt::format("{} ::= {} | json-array | {} | {} | \"true\" | \"false\" | \"null\"\n",
                       kJsonValue, kJsonObject, kJsonString, kJsonNumber);
    return out;
}

std::vector<std::pair<uint32_t, uint32_t>> scalars_outside(
    std::vector<std::pair<uint32_t, uint32_t>> ranges) {
    ranges.emplace_back(0xD800, 0xDFFF);
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : ranges) {
        if (lo > next) out.emplace_back(next, lo - 1);
        next = std::max(next, hi + 1);
    }
    if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
    return out;
}

std::string gbnf_literal(std::string_view bytes) {
    std::string out = "\"";
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (b < 0x20 || b == 0x7F) {
            out += fmt::format("\\x{:02X}", b);
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string gbnf_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, bool negated) {
    std::string out = negated ? "[^" : "[";
    for (const auto& [lo, hi] : ranges) {
        out += class_char(lo);
        if (hi != lo) out += "-" + class_char(hi);
    }
    return out + "]";
}

std::string integer_range(int64_t lo, int64_t hi) {
    if (lo >= 0) return magnitudes(lo, hi);
    if (hi < 0) return "\"-\" " + magnitudes(-hi, -lo);
    return "(\"-\" " + magnitudes(1, -lo) + " | " + magnitudes(0, hi) + ")";
}

std::vector<uint32_t> code_points(std::string_view s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
        for (int k = 1; k < n && i + static_cast<size_t>(k) < s.size(); ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3Fu);
        out.push_back(cp);
        i += static_cast<size_t>(n);
    }
    return out;
}

}  // namespace ferrox::grammar::schema
