#include "ferrox/escape.h"

#include <fmt/format.h>

#include <cstdint>

namespace ferrox {
namespace {

// Length of the valid UTF-8 sequence starting at `s[i]`, 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_length(std::string_view s, size_t i, uint32_t& code_point) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (b0 < 0x80) return code_point = b0, 1;
    if ((b0 & 0xE0) == 0xC0)
        n = 2, cp = b0 & 0x1Fu, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0)
        n = 3, cp = b0 & 0x0Fu, min = 0x800;
    else if ((b0 & 0xF8) == 0xF0)
        n = 4, cp = b0 & 0x07u, min = 0x10000;
    else
        return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    code_point = cp;
    return n;
}

void append_hex(std::string& out, unsigned char b) { out += fmt::format("\\x{:02x}", b); }

}  // namespace

std::string escape_text(std::string_view s, EscapeFor where) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        const size_t n = utf8_length(s, i, cp);
        if (n == 0) {
            append_hex(out, static_cast<unsigned char>(s[i]));
            ++i;
            continue;
        }
        const bool control = cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F);
        if (where == EscapeFor::Json || (!control && !(cp == '\\' && where == EscapeFor::Line))) {
            out.append(s.substr(i, n));
        } else if (where == EscapeFor::Text && (cp == '\n' || cp == '\t')) {
            out += static_cast<char>(cp);
        } else {
            switch (cp) {
                case '\\':
                    out += "\\\\";
                    break;
                case '\n':
                    out += "\\n";
                    break;
                case '\t':
                    out += "\\t";
                    break;
                case '\r':
                    out += "\\r";
                    break;
                case 0x1B:
                    out += "\\e";
                    break;
                default:
                    // C1 controls and DEL as \u, which is also a JSON escape: a
                    // JSON document stays valid JSON after escaping (print_json).
                    out += cp < 0x7F ? fmt::format("\\x{:02x}", cp) : fmt::format("\\u{:04x}", cp);
            }
        }
        i += n;
    }
    return out;
}

}  // namespace ferrox
