#include "tokenizer/unicode.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace ferrox::tokenizer_detail {
namespace {

struct FlagRun {
    uint32_t first;
    uint8_t flags;
};

constexpr FlagRun kFlagRuns[] = {
#include "tokenizer/unicode_tables.inc"
};

struct NfdRange {
    char32_t first, last, base;
};

#include "tokenizer/unicode_case_tables.inc"

constexpr uint8_t kLetter = 1, kNumber = 2, kPunctuation = 4, kWhitespace = 8, kMark = 16,
                  kSymbol = 32, kControl = 64;

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

size_t utf8_sequence_length(uint8_t lead) {
    // By the high nibble alone, as the reference splits SentencePiece input:
    // F8..FF also claim 4 bytes, which decides how invalid input falls back to bytes.
    if (lead < 0xC0) return 1;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return 4;
}

size_t utf8_valid_prefix(std::string_view text) {
    if (text.empty()) return 0;
    const auto lead = static_cast<uint8_t>(text[0]);
    const size_t length = utf8_sequence_length(lead);
    if (!((lead < 0x80 || lead >= 0xC0) && lead < 0xF8) || length > text.size()) return 0;
    for (size_t i = 1; i < length; ++i)
        if (!is_continuation(static_cast<uint8_t>(text[i]))) return 0;
    return length;
}

std::vector<char32_t> decode_utf8_lossy(std::string_view text) {
    std::vector<char32_t> out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        const auto lead = static_cast<uint8_t>(text[pos]);
        const size_t length = utf8_sequence_length(lead);
        const bool lead_ok = (lead < 0x80 || lead >= 0xC0) && lead < 0xF8;
        bool ok = lead_ok && pos + length <= text.size();
        for (size_t i = 1; ok && i < length; ++i)
            ok = is_continuation(static_cast<uint8_t>(text[pos + i]));
        if (!ok) {
            out.push_back(kReplacementCharacter);
            ++pos;
            continue;
        }
        // Structure only, like the reference: overlong forms and surrogates pass.
        char32_t cp = length == 1 ? lead : lead & (0x7Fu >> length);
        for (size_t i = 1; i < length; ++i)
            cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3Fu);
        if (cp > 0x10FFFF) {  // the reference aborts here; we decode it as malformed
            out.push_back(kReplacementCharacter);
            ++pos;
            continue;
        }
        out.push_back(cp);
        pos += length;
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    const auto byte = [&](uint32_t v) {
        out.push_back(static_cast<char>(static_cast<uint8_t>(v)));
    };
    if (cp < 0x80) {
        byte(cp);
    } else if (cp < 0x800) {
        byte(0xC0 | (cp >> 6));
        byte(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        byte(0xE0 | (cp >> 12));
        byte(0x80 | ((cp >> 6) & 0x3F));
        byte(0x80 | (cp & 0x3F));
    } else {
        byte(0xF0 | ((cp >> 18) & 0x07));
        byte(0x80 | ((cp >> 12) & 0x3F));
        byte(0x80 | ((cp >> 6) & 0x3F));
        byte(0x80 | (cp & 0x3F));
    }
}

CodepointClass classify(char32_t cp) {
    if (cp > 0x10FFFF) return {};
    const auto next =
        std::upper_bound(std::begin(kFlagRuns), std::end(kFlagRuns), static_cast<uint32_t>(cp),
                         [](uint32_t value, const FlagRun& run) { return value < run.first; });
    const uint8_t flags = std::prev(next)->flags;
    return {(flags & kLetter) != 0,     (flags & kNumber) != 0, (flags & kPunctuation) != 0,
            (flags & kWhitespace) != 0, (flags & kMark) != 0,   (flags & kSymbol) != 0,
            (flags & kControl) != 0};
}

char32_t to_lower(char32_t cp) {
    const auto it = std::lower_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                                     [](const std::pair<char32_t, char32_t>& entry,
                                        char32_t value) { return entry.first < value; });
    return it != std::end(kLowercase) && it->first == cp ? it->second : cp;
}

char32_t nfd_first(char32_t cp) {
    const auto next =
        std::upper_bound(std::begin(kNfdFirst), std::end(kNfdFirst), cp,
                         [](char32_t value, const NfdRange& range) { return value < range.first; });
    if (next == std::begin(kNfdFirst)) return cp;
    const NfdRange& range = *std::prev(next);
    return cp <= range.last ? range.base : cp;
}

}  // namespace ferrox::tokenizer_detail
