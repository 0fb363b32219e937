// Small text helpers shared by commands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferrox::cli {

std::string human_bytes(uint64_t bytes);  // "23.4 GiB"

// ASCII letters lowered, other bytes kept: how flag values are compared
// case-insensitively ("F16" and "f16" name one KV kind).
std::string ascii_lower(std::string s);

// Left-aligned columns, two spaces apart; the last column is not padded.
// Every cell is escaped (escape_text, one line).
std::string render_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace ferrox::cli
