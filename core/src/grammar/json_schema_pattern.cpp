// `pattern` -> GBNF: the regex subset of docs/structured-output.md, parsed by
// recursive descent straight into a GBNF expression over a JSON string's
// encoded content. jsonschema validators run the pattern with their host's
// regex engine (Python's `re`, ECMA-262 in JavaScript), so every class means
// the intersection of the two: \d is [0-9], \w [A-Za-z0-9_], \s the six ASCII
// spaces, \D \W \S the printable ASCII outside them, and `.` any character but
// the four line terminators.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "json_schema_parts.h"

namespace ferrox::grammar::schema {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr uint32_t kMaxGroupDepth = 16;  // GBNF's max_nesting is 64; an alternation adds one

Ranges normalized(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (const auto& [lo, hi] : r) {
        if (!out.empty() && lo <= out.back().second + 1)
            out.back().second = std::max(out.back().second, hi);
        else
            out.emplace_back(lo, hi);
    }
    return out;
}

// The code points outside `r` (surrogates are never characters).
Ranges complement(const Ranges& r) { return scalars_outside(r); }

Ranges minus(const Ranges& a, const Ranges& b) {
    Ranges keep = complement(b), out;
    for (const auto& [alo, ahi] : normalized(a))
        for (const auto& [klo, khi] : keep) {
            const uint32_t lo = std::max(alo, klo), hi = std::min(ahi, khi);
            if (lo <= hi) out.emplace_back(lo, hi);
        }
    return out;
}

bool contains(const Ranges& r, uint32_t cp) {
    return std::any_of(r.begin(), r.end(),
                       [&](const auto& x) { return x.first <= cp && cp <= x.second; });
}

const Ranges kDigit{{'0', '9'}};
const Ranges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace{{0x09, 0x0D}, {0x20, 0x20}};
const Ranges kPrintable{{0x20, 0x7E}};
const Ranges kLineEnds{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

// Characters JSON must escape inside a string, and surrogates.
const Ranges kNotPlain{{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};

// One character as a JSON string spells it.
std::string encoded_char(uint32_t cp) {
    if (cp == '"') return gbnf_literal("\\\"");
    if (cp == '\\') return gbnf_literal("\\\\");
    if (cp < 0x20) {
        // JSON's short escapes where it has one, \u00XX always.
        std::string out = "(" + gbnf_literal(fmt::format("\\u{:04x}", cp));
        const std::string_view shorts = "btnvfr";  // 0x08..0x0D; \v (0x0B) has none in JSON
        if (cp >= 0x08 && cp <= 0x0D && cp != 0x0B)
            out += " | " + gbnf_literal(std::string("\\") + shorts[cp - 0x08]);
        return out + ")";
    }
    std::string utf8;
    if (cp < 0x80) {
        utf8 += static_cast<char>(cp);
    } else if (cp < 0x800) {
        utf8 += static_cast<char>(0xC0 | (cp >> 6));
        utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        utf8 += static_cast<char>(0xE0 | (cp >> 12));
        utf8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        utf8 += static_cast<char>(0xF0 | (cp >> 18));
        utf8 += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        utf8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return gbnf_literal(utf8);
}

// Any one character of `set`, as JSON spells it: one class for the plain
// ones, an escape for each that JSON must escape.
std::string encoded_set(const Ranges& set) {
    std::vector<std::string> alts;
    const Ranges plain = minus(set, kNotPlain);
    if (!plain.empty()) alts.push_back(gbnf_class(plain));
    if (contains(set, '"')) alts.push_back(encoded_char('"'));
    if (contains(set, '\\')) alts.push_back(encoded_char('\\'));
    for (uint32_t c = 0; c < 0x20; ++c)
        if (contains(set, c)) alts.push_back(encoded_char(c));
    if (alts.empty()) throw Refusal{"the class matches no character"};
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

class PatternParser {
  public:
    PatternParser(std::string_view pattern, uint32_t max_repetition)
        : cps_(code_points(pattern)), max_repetition_(max_repetition) {}

    std::string convert() {
        size_t end = cps_.size();
        const bool anchored_start = !cps_.empty() && cps_[0] == '^';
        bool anchored_end = false;
        if (end > (anchored_start ? 1u : 0u) && cps_[end - 1] == '$') {
            size_t backslashes = 0;
            while (end - 1 > backslashes && cps_[end - 2 - backslashes] == '\\') ++backslashes;
            anchored_end = backslashes % 2 == 0;
        }
        if (anchored_end) --end;
        end_ = end;
        pos_ = anchored_start ? 1 : 0;
        size_t alternatives = 0;
        std::string body = alternation(0, alternatives);
        if (pos_ < end_) fail("unmatched ')'");
        if (alternatives > 1 && (anchored_start || anchored_end))
            throw Refusal{
                "an anchor beside a top-level '|' is not enforced (group the alternatives: "
                "^(a|b)$)"};
        const std::string any = std::string(kJsonChar) + "*";
        return (anchored_start ? "" : any + " ") + body + (anchored_end ? "" : " " + any);
    }

  private:
    [[noreturn]] void fail(const std::string& why) const {
        throw Refusal{fmt::format("at offset {} (code point): {}", pos_, why)};
    }
    bool at_end() const { return pos_ >= end_; }
    uint32_t peek() const { return at_end() ? 0 : cps_[pos_]; }

    std::string alternation(uint32_t depth, size_t& n_alternatives) {
        std::vector<std::string> alts{sequence(depth)};
        while (!at_end() && peek() == '|') {
            ++pos_;
            alts.push_back(sequence(depth));
        }
        n_alternatives = alts.size();
        if (alts.size() == 1) return alts[0];
        std::string out = "(";
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out + ")";
    }

    std::string sequence(uint32_t depth) {
        std::string out;
        while (!at_end() && peek() != '|' && peek() != ')') {
            std::string item = atom(depth);
            item += quantifier();
            out += (out.empty() ? "" : " ") + item;
        }
        return out.empty() ? "\"\"" : out;
    }

    std::string atom(uint32_t depth) {
        const uint32_t c = cps_[pos_++];
        switch (c) {
            case '(': {
                if (depth + 1 > kMaxGroupDepth)
                    fail(fmt::format("groups nested deeper than {}", kMaxGroupDepth));
                if (peek() == '?') {
                    if (pos_ + 1 < end_ && cps_[pos_ + 1] == ':')
                        pos_ += 2;
                    else
                        fail("lookaround and named groups are not enforced");
                }
                size_t n = 0;
                std::string inner = alternation(depth + 1, n);
                if (peek() != ')') fail("'(' is never closed");
                ++pos_;
                return "(" + inner + ")";
            }
            case '[':
                return char_class();
            case '.':
                return encoded_set(complement(kLineEnds));
            case '\\':
                return escape(false, nullptr);
            case '^':
            case '$':
                --pos_;
                fail(fmt::format("'{}' is enforced only at the start ('^') or the end ('$')",
                                 static_cast<char>(c)));
            case '*':
            case '+':
            case '?':
            case '{':
                --pos_;
                fail("nothing to repeat");
            default:
                return encoded_char(c);
        }
    }

    uint32_t count() {
        if (at_end() || peek() < '0' || peek() > '9') fail("expected a repetition count");
        uint64_t n = 0;
        while (!at_end() && peek() >= '0' && peek() <= '9') {
            n = n * 10 + (cps_[pos_++] - '0');
            if (n > max_repetition_)
                fail(fmt::format("repetition count past the limit max_repetition ({})",
                                 max_repetition_));
        }
        return static_cast<uint32_t>(n);
    }

    std::string quantifier() {
        if (at_end()) return "";
        std::string q;
        const uint32_t c = peek();
        if (c == '?' || c == '*' || c == '+') {
            ++pos_;
            q = std::string(1, static_cast<char>(c));
        } else if (c == '{') {
            ++pos_;
            const uint32_t m = count();
            if (peek() == '}') {
                q = fmt::format("{{{}}}", m);
            } else {
                if (peek() != ',') fail("expected ',' or '}' in a repetition");
                ++pos_;
                if (peek() == '}') {
                    q = fmt::format("{{{},}}", m);
                } else {
                    const uint32_t n = count();
                    if (n < m) fail("repetition {m,n} with n below m");
                    q = fmt::format("{{{},{}}}", m, n);
                }
            }
            if (peek() != '}') fail("expected '}' to close a repetition");
            ++pos_;
        } else {
            return "";
        }
        if (peek() == '?') ++pos_;  // lazy: the same strings match
        if (!at_end() && (peek() == '?' || peek() == '*' || peek() == '+' || peek() == '{'))
            fail("nothing to repeat");
        return q;
    }

    static uint32_t hex_value(uint32_t c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return 16;
    }

    uint32_t hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const uint32_t h = at_end() ? 16 : hex_value(peek());
            if (h > 15) fail(fmt::format("expected {} hex digits", digits));
            v = v * 16 + h;
            ++pos_;
        }
        return v;
    }

    // After a backslash. In a class (`set` given), \d \w \s add their ranges
    // and the result is empty; outside, the GBNF expression.
    std::string escape(bool in_class, Ranges* set) {
        if (at_end()) fail("a pattern cannot end with '\\'");
        const uint32_t c = cps_[pos_++];
        const Ranges* named = nullptr;
        Ranges negated;
        switch (c) {
            case 'd':
                named = &kDigit;
                break;
            case 'w':
                named = &kWord;
                break;
            case 's':
                named = &kSpace;
                break;
            case 'D':
            case 'W':
            case 'S':
                if (in_class)
                    fail(
                        fmt::format("'\\{}' inside a class is not enforced", static_cast<char>(c)));
                negated = minus(kPrintable, c == 'D' ? kDigit : c == 'W' ? kWord : kSpace);
                return encoded_set(negated);
            default:
                break;
        }
        if (named) {
            if (in_class) {
                set->insert(set->end(), named->begin(), named->end());
                return "";
            }
            return encoded_set(*named);
        }
        uint32_t cp = 0;
        switch (c) {
            case 't':
                cp = '\t';
                break;
            case 'n':
                cp = '\n';
                break;
            case 'r':
                cp = '\r';
                break;
            case 'f':
                cp = '\f';
                break;
            case 'v':
                cp = '\v';
                break;
            case '0':
                if (!at_end() && peek() >= '0' && peek() <= '9')
                    fail("octal escapes are not enforced");
                cp = 0;
                break;
            case 'x':
                cp = hex(2);
                break;
            case 'u':
                if (peek() == '{') fail("'\\u{...}' is not enforced");
                cp = hex(4);
                if (cp >= 0xD800 && cp <= 0xDFFF) fail("a surrogate escape is not enforced");
                break;
            case 'b':
                if (!in_class) fail("word boundaries (\\b) are not enforced");
                cp = '\b';
                break;
            default:
                if (c < 0x80 &&
                    ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
                    fail(fmt::format("the escape '\\{}' is not enforced", static_cast<char>(c)));
                cp = c;  // escaped punctuation (and any non-ASCII) is itself
        }
        if (in_class) {
            set->emplace_back(cp, cp);
            return "";
        }
        return encoded_char(cp);
    }

    // One member of a class (a character or an escape); nullopt when it was
    // a named set (\d) already added to `set`.
    std::optional<uint32_t> class_member(Ranges& set) {
        if (at_end()) fail("'[' is never closed");
        const uint32_t c = cps_[pos_++];
        if (c != '\\') return c;
        const size_t before = set.size();
        const size_t at = pos_;
        escape(true, &set);
        if (set.size() - before == 1 && cps_[at] != 'd' && cps_[at] != 'w' && cps_[at] != 's') {
            const uint32_t cp = set.back().first;
            set.pop_back();
            return cp;
        }
        return std::nullopt;
    }

    std::string char_class() {
        Ranges set;
        bool negate = false;
        if (peek() == '^') {
            negate = true;
            ++pos_;
        }
        if (peek() == ']') fail("an empty class '[]' matches nothing");
        while (!at_end() && peek() != ']') {
            const auto lo = class_member(set);
            if (!lo) continue;
            if (peek() == '-' && pos_ + 1 < end_ && cps_[pos_ + 1] != ']') {
                ++pos_;
                const auto hi = class_member(set);
                if (!hi) fail("a range cannot end at a named class");
                if (*hi < *lo) fail("a range whose end is below its start");
                set.emplace_back(*lo, *hi);
            } else {
                set.emplace_back(*lo, *lo);
            }
        }
        if (at_end()) fail("'[' is never closed");
        ++pos_;
        return encoded_set(negate ? complement(set) : normalized(set));
    }

    std::vector<uint32_t> cps_;
    uint32_t max_repetition_;
    size_t pos_ = 0, end_ = 0;
};

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, uint32_t max_repetition) {
    return PatternParser(pattern, max_repetition).convert();
}

}  // namespace ferrox::grammar::schema
