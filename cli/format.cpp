#include "format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ferrox/escape.h"

namespace ferrox::cli {

std::string ascii_lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string human_bytes(uint64_t bytes) {
    constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(units)) {
        value /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string render_table(const std::vector<std::vector<std::string>>& raw) {
    // Cells quote paths, plugin reasons and tensor roles: escaped, then measured.
    std::vector<std::vector<std::string>> rows;
    for (const auto& row : raw) {
        auto& out = rows.emplace_back();
        for (const auto& cell : row) out.push_back(escape_text(cell, EscapeFor::Line));
    }
    std::vector<size_t> widths;
    for (const auto& row : rows) {
        if (widths.size() < row.size()) widths.resize(row.size(), 0);
        for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

}  // namespace ferrox::cli
