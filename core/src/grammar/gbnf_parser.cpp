// A recursive-descent reader of GBNF. It builds rules as lists of
// alternatives (vectors of symbols) first, then checks and flattens them
// into a Grammar. Every error names line:column; every size is checked
// against GrammarLimits before it grows.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "ferrox/grammar/gbnf.h"

namespace ferrox::grammar {

bool CharSet::contains(uint32_t cp) const { return intersects(cp, cp); }

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
    if (!negated) {
        for (const auto& [a, b] : ranges)
            if (a <= hi && lo <= b) return true;
        return false;
    }
    // Some code point of [lo, hi] lies outside every range: walk the sorted,
    // disjoint ranges that cover lo onwards.
    uint32_t next = lo;
    for (const auto& [a, b] : ranges) {
        if (b < next) continue;
        if (a > next) return true;
        if (b >= hi) return false;
        next = b + 1;
    }
    return next <= hi;
}

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Sequence = std::vector<Symbol>;

struct RuleDraft {
    std::string name;
    std::vector<Sequence> alternatives;
    bool defined = false;
    size_t line = 0, column = 0;  // first definition, else first use
};

class Parser {
  public:
    Parser(std::string_view src, const GrammarLimits& limits) : src_(src), limits_(limits) {}

    Expected<std::shared_ptr<const Grammar>> run() {
        if (src_.size() > limits_.max_source_bytes)
            return make_error("grammar: {} bytes, more than the limit max_source_bytes ({})",
                              src_.size(), limits_.max_source_bytes);
        skip_space(true);
        while (!at_end() && !failed()) {
            parse_rule();
            skip_space(true);
        }
        if (failed()) return Error(*error_);
        return finish();
    }

  private:
    std::string_view src_;
    const GrammarLimits& limits_;
    size_t pos_ = 0;
    std::optional<std::string> error_;
    std::vector<RuleDraft> rules_;
    std::map<std::string, uint32_t, std::less<>> ids_;
    std::vector<CharSet> charsets_;
    size_t n_symbols_ = 0;
    uint32_t depth_ = 0;

    bool at_end() const { return pos_ >= src_.size(); }
    char peek(size_t ahead = 0) const {
        return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
    }
    bool failed() const { return error_.has_value(); }

    std::pair<size_t, size_t> line_col(size_t at) const {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < src_.size(); ++i) {
            if (src_[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        return {line, col};
    }

    template <class... Args>
    void fail_at(size_t at, fmt::format_string<Args...> format, Args&&... args) {
        if (failed()) return;
        const auto [line, col] = line_col(at);
        error_ = fmt::format("grammar:{}:{}: {}", line, col,
                             fmt::format(format, std::forward<Args>(args)...));
    }
    template <class... Args>
    void fail(fmt::format_string<Args...> format, Args&&... args) {
        fail_at(pos_, format, std::forward<Args>(args)...);
    }

    static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-';
    }

    // Blanks and comments; newlines too when `newline_ok` (between rules,
    // inside parentheses, after '|').
    void skip_space(bool newline_ok) {
        while (!at_end()) {
            const char c = peek();
            if (c == '#') {
                while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
            } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::string_view parse_name() {
        const size_t start = pos_;
        while (is_name_char(peek())) ++pos_;
        if (pos_ == start) fail("expected a rule name");
        return src_.substr(start, pos_ - start);
    }

    uint32_t rule_id(std::string_view name, size_t at) {
        if (auto it = ids_.find(name); it != ids_.end()) return it->second;
        if (rules_.size() >= limits_.max_rules) {
            fail_at(at, "more than the limit max_rules ({}) rules", limits_.max_rules);
            return 0;
        }
        const auto id = static_cast<uint32_t>(rules_.size());
        const auto [line, col] = line_col(at);
        rules_.push_back({std::string(name), {}, false, line, col});
        ids_.emplace(std::string(name), id);
        return id;
    }

    // A rule the parser makes for a group or a repetition.
    uint32_t synthesize(uint32_t parent, std::vector<Sequence> alternatives, size_t at) {
        std::string name;
        for (uint32_t n = 1;; ++n) {
            name = fmt::format("{}-{}", rules_[parent].name, n);
            if (!ids_.count(name)) break;
        }
        const uint32_t id = rule_id(name, at);
        if (failed()) return 0;
        rules_[id].alternatives = std::move(alternatives);
        rules_[id].defined = true;
        return id;
    }

    bool count_symbols(size_t n) {
        if (n > limits_.max_symbols - std::min(n_symbols_, limits_.max_symbols)) {
            fail("the grammar expands past the limit max_symbols ({}) symbols",
                 limits_.max_symbols);
            return false;
        }
        n_symbols_ += n;
        return true;
    }

    // One code point of UTF-8 source; refuses malformed UTF-8.
    std::optional<uint32_t> parse_utf8() {
        const auto b0 = static_cast<unsigned char>(peek());
        int len = b0 < 0x80           ? 1
                  : (b0 >> 5) == 0x6  ? 2
                  : (b0 >> 4) == 0xE  ? 3
                  : (b0 >> 3) == 0x1E ? 4
                                      : 0;
        if (len == 0 || pos_ + static_cast<size_t>(len) > src_.size()) {
            fail("malformed UTF-8");
            return std::nullopt;
        }
        uint32_t cp = len == 1 ? b0 : b0 & (0x7Fu >> len);
        for (int i = 1; i < len; ++i) {
            const auto b = static_cast<unsigned char>(peek(static_cast<size_t>(i)));
            if ((b & 0xC0) != 0x80) {
                fail("malformed UTF-8");
                return std::nullopt;
            }
            cp = (cp << 6) | (b & 0x3F);
        }
        if (cp > kMaxCodePoint) {
            fail("malformed UTF-8");
            return std::nullopt;
        }
        pos_ += static_cast<size_t>(len);
        return cp;
    }

    std::optional<uint32_t> parse_hex(size_t digits) {
        uint32_t value = 0;
        for (size_t i = 0; i < digits; ++i) {
            const char c = peek();
            uint32_t d;
            if (c >= '0' && c <= '9') {
                d = static_cast<uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                d = static_cast<uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                d = static_cast<uint32_t>(c - 'A' + 10);
            } else {
                fail("expected {} hex digits", digits);
                return std::nullopt;
            }
            value = value * 16 + d;
            ++pos_;
        }
        if (value > kMaxCodePoint) {
            fail("code point U+{:X} is past U+10FFFF", value);
            return std::nullopt;
        }
        return value;
    }

    // One character of a literal or a class, escapes included.
    std::optional<uint32_t> parse_char() {
        if (at_end()) {
            fail("unexpected end of the grammar");
            return std::nullopt;
        }
        if (peek() != '\\') return parse_utf8();
        const size_t at = pos_;
        const char escaped = peek(1);
        if (pos_ + 1 >= src_.size()) {
            fail("unexpected end of the grammar after '\\'");
            return std::nullopt;
        }
        pos_ += 2;
        switch (escaped) {
            case 'x':
                return parse_hex(2);
            case 'u':
                return parse_hex(4);
            case 'U':
                return parse_hex(8);
            case 't':
                return '\t';
            case 'r':
                return '\r';
            case 'n':
                return '\n';
            case '\\':
            case '"':
            case '[':
            case ']':
            case '-':
                return static_cast<uint32_t>(static_cast<unsigned char>(escaped));
            default:
                fail_at(at, "unknown escape '\\{}'", escaped);
                return std::nullopt;
        }
    }

    uint32_t add_charset(CharSet set) {
        std::sort(set.ranges.begin(), set.ranges.end());
        std::vector<std::pair<uint32_t, uint32_t>> merged;
        for (const auto& r : set.ranges) {
            if (!merged.empty() && r.first <= merged.back().second + 1)
                merged.back().second = std::max(merged.back().second, r.second);
            else
                merged.push_back(r);
        }
        set.ranges = std::move(merged);
        charsets_.push_back(std::move(set));
        return static_cast<uint32_t>(charsets_.size() - 1);
    }

    Symbol chars(uint32_t lo, uint32_t hi, bool negated = false) {
        CharSet set;
        set.ranges.emplace_back(lo, hi);
        set.negated = negated;
        return {Symbol::Kind::Chars, add_charset(std::move(set))};
    }

    // `[...]` after the '['.
    std::optional<Symbol> parse_class() {
        CharSet set;
        if (peek() == '^') {
            set.negated = true;
            ++pos_;
        }
        while (peek() != ']') {
            if (at_end()) {
                fail("unterminated character class");
                return std::nullopt;
            }
            const auto lo = parse_char();
            if (!lo) return std::nullopt;
            uint32_t hi = *lo;
            if (peek() == '-' && peek(1) != ']') {
                ++pos_;
                const size_t at = pos_;
                const auto end = parse_char();
                if (!end) return std::nullopt;
                if (*end < *lo) {
                    fail_at(at, "range end U+{:X} is below its start U+{:X}", *end, *lo);
                    return std::nullopt;
                }
                hi = *end;
            }
            set.ranges.emplace_back(*lo, hi);
        }
        ++pos_;
        return Symbol{Symbol::Kind::Chars, add_charset(std::move(set))};
    }

    std::optional<uint32_t> parse_count() {
        const size_t start = pos_;
        uint64_t value = 0;
        while (peek() >= '0' && peek() <= '9') {
            value = value * 10 + static_cast<uint64_t>(peek() - '0');
            if (value > limits_.max_repetition) {
                fail_at(start, "repetition count past the limit max_repetition ({})",
                        limits_.max_repetition);
                return std::nullopt;
            }
            ++pos_;
        }
        if (pos_ == start) {
            fail("expected a repetition count");
            return std::nullopt;
        }
        return static_cast<uint32_t>(value);
    }

    // `item` repeated min..max times (max empty: unbounded), as llama.cpp
    // expands it: min copies, then a right-recursive rule or nested optionals.
    std::optional<Sequence> repeat(uint32_t rule, const Sequence& item, uint32_t min, uint32_t max,
                                   bool bounded, size_t at) {
        const size_t copies = static_cast<size_t>(bounded ? max : min + 1);
        // Each copy is the item and at most one reference and an End.
        if (!count_symbols(copies * (item.size() + 2))) return std::nullopt;
        Sequence out;
        for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
        if (!bounded) {
            const uint32_t tail = synthesize(rule, {}, at);
            if (failed()) return std::nullopt;
            Sequence again = item;
            again.push_back({Symbol::Kind::Rule, tail});
            rules_[tail].alternatives = {again, {}};
            out.push_back({Symbol::Kind::Rule, tail});
            return out;
        }
        // (item (item (...)?)?)? with max - min levels.
        std::optional<uint32_t> inner;
        for (uint32_t i = min; i < max; ++i) {
            Sequence body = item;
            if (inner) body.push_back({Symbol::Kind::Rule, *inner});
            inner = synthesize(rule, {body, {}}, at);
            if (failed()) return std::nullopt;
        }
        if (inner) out.push_back({Symbol::Kind::Rule, *inner});
        return out;
    }

    // Repetition operators after an item; each applies to what came before.
    bool parse_repetitions(uint32_t rule, Sequence& item, bool nested) {
        for (;;) {
            const size_t at = pos_;
            const char c = peek();
            uint32_t min = 0, max = 0;
            bool bounded = false;
            if (c == '*') {
                ++pos_;
            } else if (c == '+') {
                ++pos_;
                min = 1;
            } else if (c == '?') {
                ++pos_;
                max = 1;
                bounded = true;
            } else if (c == '{') {
                ++pos_;
                skip_space(nested);
                auto m = parse_count();
                if (!m) return false;
                min = max = *m;
                bounded = true;
                skip_space(nested);
                if (peek() == ',') {
                    ++pos_;
                    skip_space(nested);
                    bounded = false;
                    if (peek() != '}') {
                        auto n = parse_count();
                        if (!n) return false;
                        if (*n < min) {
                            fail("repetition {{{},{}}}: the most is below the least", min, *n);
                            return false;
                        }
                        max = *n;
                        bounded = true;
                        skip_space(nested);
                    }
                }
                if (peek() != '}') {
                    fail("expected '}}'");
                    return false;
                }
                ++pos_;
            } else {
                return true;
            }
            auto expanded = repeat(rule, item, min, max, bounded, at);
            if (!expanded) return false;
            // Repeating again repeats the whole (as llama.cpp): make it one rule.
            const uint32_t whole = synthesize(rule, {std::move(*expanded)}, at);
            if (failed()) return false;
            item = {{Symbol::Kind::Rule, whole}};
            skip_space(nested);
        }
    }

    // Items until '|', ')', a newline (outside parentheses) or the end.
    std::optional<Sequence> parse_sequence(uint32_t rule, bool nested) {
        Sequence seq;
        for (;;) {
            const char c = peek();
            const size_t at = pos_;
            Sequence item;
            if (c == '"') {
                ++pos_;
                while (peek() != '"') {
                    if (at_end()) {
                        fail_at(at, "unterminated literal");
                        return std::nullopt;
                    }
                    const auto cp = parse_char();
                    if (!cp) return std::nullopt;
                    item.push_back(chars(*cp, *cp));
                }
                ++pos_;
                // "" matches nothing: an empty item (repeating it is left recursion).
            } else if (c == '[') {
                ++pos_;
                auto s = parse_class();
                if (!s) return std::nullopt;
                item.push_back(*s);
            } else if (c == '.') {
                ++pos_;
                CharSet any;  // the complement of nothing
                any.negated = true;
                item.push_back({Symbol::Kind::Chars, add_charset(std::move(any))});
            } else if (is_name_char(c)) {
                const auto name = parse_name();
                const uint32_t id = rule_id(name, at);
                if (failed()) return std::nullopt;
                item.push_back({Symbol::Kind::Rule, id});
            } else if (c == '(') {
                if (++depth_ > limits_.max_nesting) {
                    fail("parentheses nested deeper than the limit max_nesting ({})",
                         limits_.max_nesting);
                    return std::nullopt;
                }
                ++pos_;
                skip_space(true);
                auto alts = parse_alternatives(rule, true);
                if (!alts) return std::nullopt;
                if (peek() != ')') {
                    fail("expected ')' to close the '(' at {}:{}", line_col(at).first,
                         line_col(at).second);
                    return std::nullopt;
                }
                ++pos_;
                --depth_;
                const uint32_t group = synthesize(rule, std::move(*alts), at);
                if (failed()) return std::nullopt;
                item.push_back({Symbol::Kind::Rule, group});
            } else if (c == '<' || (c == '!' && peek(1) == '<')) {
                fail("token references (<...>, !<...>) are not supported");
                return std::nullopt;
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                fail("'{}' with nothing before it to repeat", c);
                return std::nullopt;
            } else {
                return seq;
            }
            skip_space(nested);
            if (!parse_repetitions(rule, item, nested)) return std::nullopt;
            if (!count_symbols(item.size())) return std::nullopt;
            seq.insert(seq.end(), item.begin(), item.end());
        }
    }

    std::optional<std::vector<Sequence>> parse_alternatives(uint32_t rule, bool nested) {
        std::vector<Sequence> alts;
        for (;;) {
            auto seq = parse_sequence(rule, nested);
            if (!seq) return std::nullopt;
            alts.push_back(std::move(*seq));
            if (!count_symbols(1)) return std::nullopt;  // its End
            if (peek() != '|') return alts;
            ++pos_;
            skip_space(true);
        }
    }

    void parse_rule() {
        const size_t at = pos_;
        const auto name = parse_name();
        if (failed()) return;
        skip_space(false);
        if (src_.substr(pos_, 3) != "::=") {
            fail("expected '::=' after the rule name '{}'", name);
            return;
        }
        pos_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name, at);
        if (failed()) return;
        if (rules_[id].defined) {
            fail_at(at, "rule '{}' is defined twice (first at {}:{})", name, rules_[id].line,
                    rules_[id].column);
            return;
        }
        rules_[id].defined = true;
        std::tie(rules_[id].line, rules_[id].column) = line_col(at);
        auto alts = parse_alternatives(id, false);
        if (!alts) return;
        rules_[id].alternatives = std::move(*alts);
        if (!at_end() && peek() != '\n' && peek() != '\r')
            fail("unexpected '{}': expected a newline or the end of the rule", peek());
    }

    // Which rules can match the empty string (a fixpoint; at most rules passes).
    std::vector<bool> nullable() const {
        std::vector<bool> empty(rules_.size(), false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < rules_.size(); ++r) {
                if (empty[r]) continue;
                for (const Sequence& alt : rules_[r].alternatives) {
                    const bool all = std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) {
                        return s.kind == Symbol::Kind::Rule && empty[s.index];
                    });
                    if (all) {
                        empty[r] = changed = true;
                        break;
                    }
                }
            }
        }
        return empty;
    }

    // A rule that can reach itself without consuming a character would make
    // the matcher expand forever: refuse it, naming the rule.
    std::optional<std::string> left_recursion() const {
        const auto empty = nullable();
        const size_t n = rules_.size();
        std::vector<std::vector<uint32_t>> firsts(n);
        for (size_t r = 0; r < n; ++r)
            for (const Sequence& alt : rules_[r].alternatives)
                for (const Symbol& s : alt) {
                    if (s.kind != Symbol::Kind::Rule) break;
                    firsts[r].push_back(s.index);
                    if (!empty[s.index]) break;
                }
        // Iterative DFS with colours: 0 new, 1 on the path, 2 done.
        std::vector<uint8_t> colour(n, 0);
        for (size_t start = 0; start < n; ++start) {
            if (colour[start]) continue;
            std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
            colour[start] = 1;
            while (!path.empty()) {
                auto& [r, next] = path.back();
                if (next == firsts[r].size()) {
                    colour[r] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t to = firsts[r][next++];
                if (colour[to] == 1) return rules_[to].name;
                if (colour[to] == 0) {
                    colour[to] = 1;
                    path.emplace_back(to, 0);
                }
            }
        }
        return std::nullopt;
    }

    Expected<std::shared_ptr<const Grammar>> finish() {
        for (const RuleDraft& r : rules_)
            if (!r.defined)
                return make_error("grammar:{}:{}: rule '{}' is used but never defined", r.line,
                                  r.column, r.name);
        const auto root = ids_.find("root");
        if (root == ids_.end()) return make_error("grammar: no 'root' rule");
        if (auto rule = left_recursion()) {
            const RuleDraft& r = rules_[ids_.at(*rule)];
            return make_error(
                "grammar:{}:{}: rule '{}' is left-recursive (it can reach itself before "
                "matching a character)",
                r.line, r.column, r.name);
        }
        auto g = std::make_shared<Grammar>();
        g->root = root->second;
        g->limits = limits_;
        g->charsets = std::move(charsets_);
        g->alternatives.resize(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            g->rule_names.push_back(rules_[r].name);
            for (const Sequence& alt : rules_[r].alternatives) {
                g->alternatives[r].push_back(static_cast<uint32_t>(g->symbols.size()));
                g->symbols.insert(g->symbols.end(), alt.begin(), alt.end());
                g->symbols.push_back({Symbol::Kind::End, 0});
            }
        }
        return std::shared_ptr<const Grammar>(std::move(g));
    }
};

}  // namespace

Expected<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view source,
                                                    const GrammarLimits& limits) {
    return Parser(source, limits).run();
}

}  // namespace ferrox::grammar
