#include "tokenizer/pre_tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>

#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

// A word is a half-open range of code point indices. Each regex stage splits
// every word of the previous stage further; a match never crosses a word edge.
struct Span {
    size_t begin, end;
};
using Spans = std::vector<Span>;

// Reads code points and classes inside one word; outside it, "nothing" (the
// class of nothing is all false and is not even "other").
class Word {
  public:
    Word(const std::vector<char32_t>& cps, Span span) : cps_(cps), span_(span) {}
    bool inside(size_t pos) const { return pos >= span_.begin && pos < span_.end; }
    char32_t at(size_t pos) const { return inside(pos) ? cps_[pos] : 0xFFFFFFFF; }
    CodepointClass cls(size_t pos) const {
        return inside(pos) ? classify(cps_[pos]) : CodepointClass{};
    }
    // [^\s\p{L}\p{N}] (or [^\s\p{L}\p{M}\p{N}]) for a code point that exists.
    bool other(size_t pos, bool marks_are_letters = false) const {
        const auto c = cls(pos);
        return inside(pos) && !c.whitespace && !c.letter && !c.number &&
               !(marks_are_letters && c.mark);
    }
    bool letter(size_t pos) const { return cls(pos).letter; }
    bool letter_or_mark(size_t pos) const {
        const auto c = cls(pos);
        return c.letter || c.mark;
    }
    bool number(size_t pos) const { return cls(pos).number; }
    bool space(size_t pos) const { return cls(pos).whitespace; }
    bool line_break(size_t pos) const { return at(pos) == '\r' || at(pos) == '\n'; }
    // [^\r\n\p{L}\p{N}]: what may stand before a letter run.
    bool letter_prefix(size_t pos) const {
        return inside(pos) && !line_break(pos) && !letter(pos) && !number(pos);
    }

  private:
    const std::vector<char32_t>& cps_;
    Span span_;
};

// Collects the pieces of one word: each cut closes the piece since the last cut.
class Cutter {
  public:
    Cutter(Spans& out, size_t begin) : out_(out), last_(begin) {}
    size_t cut(size_t end) {
        const size_t length = end - last_;
        if (length > 0) out_.push_back({last_, end});
        last_ = end;
        return length;
    }

  private:
    Spans& out_;
    size_t last_;
};

char32_t ascii_lower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// 's 't 're 've 'm 'll 'd at pos: the match length, or 0.
size_t contraction_length(const Word& w, size_t pos, bool any_case) {
    if (w.at(pos) != '\'' || !w.inside(pos + 1)) return 0;
    const auto fold = [&](char32_t c) { return any_case ? ascii_lower(c) : c; };
    const char32_t a = fold(w.at(pos + 1));
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (!w.inside(pos + 2)) return 0;
    const char32_t b = fold(w.at(pos + 2));
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// \s+(?!\S) then \s+ : a whitespace run gives its last space to the word after it.
// Returns the end of the match, or `pos` when there is no whitespace here.
size_t whitespace_run_end(const Word& w, size_t pos) {
    size_t n = 0;
    while (w.space(pos + n)) ++n;
    if (n > 1 && w.inside(pos + n)) return pos + n - 1;
    return pos + n;
}

// \s*[\r\n]+ : whitespace up to and including the last line break of the run,
// or `pos` when the run holds no line break.
size_t whitespace_to_last_break(const Word& w, size_t pos) {
    size_t end = pos;
    for (size_t p = pos; w.space(p); ++p)
        if (w.line_break(p)) end = p + 1;
    return end;
}

void split_gpt2_word(const std::vector<char32_t>& cps, Span span, Spans& out) {
    const Word w(cps, span);
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        if (const size_t n = contraction_length(w, pos, false)) {
            pos += cutter.cut(pos + n);
            continue;
        }
        // " ?X+" for X in letters, numbers, other: the optional space joins the run.
        const size_t run = w.at(pos) == ' ' ? pos + 1 : pos;
        using Test = bool (Word::*)(size_t) const;
        bool matched = false;
        for (Test test : {static_cast<Test>(&Word::letter), static_cast<Test>(&Word::number)}) {
            if ((w.*test)(run)) {
                pos = run;
                while ((w.*test)(pos)) ++pos;
                cutter.cut(pos);
                matched = true;
                break;
            }
        }
        if (!matched && w.other(run)) {
            pos = run;
            while (w.other(pos)) ++pos;
            cutter.cut(pos);
            matched = true;
        }
        if (matched) continue;
        const size_t end = whitespace_run_end(w, pos);
        pos = end > pos ? end : pos + 1;
        cutter.cut(pos);
    }
}

// How the letter alternative of a llama3-style rule reads.
enum class Letters {
    plain,       // [^\r\n\p{L}\p{N}]?\p{L}+
    with_marks,  // [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+
    // Tekken / o200k: [^\r\n\p{L}\p{N}]?U*L+ | [^\r\n\p{L}\p{N}]?U+L*, where
    // llama.cpp reads U as "a letter but not a-z" and L as "a letter but not
    // A-Z" (its regex sees every non-ASCII letter as one class, so such a
    // letter is both: only ASCII case cuts a run).
    cased,
    cased_with_marks,  // the same with \p{M} counted as a letter
};

// The llama3 family of rules: contractions, letters, digits, symbols, breaks, spaces.
struct ModernRule {
    bool contractions = true;  // (?i:'s|'t|'re|'ve|'m|'ll|'d) first
    Letters letters = Letters::plain;
    bool contraction_after_letters = false;  // o200k: (?i:'s|...)? ends a letter run
    size_t max_digits = 3;                   // \p{N}{1,max}; kUnbounded: \p{N}+
    bool symbols_exclude_marks = false;      // [^\s\p{L}\p{M}\p{N}]+
    bool breaks_after_symbols = true;        // [\r\n]* after a symbol run
    bool slashes_after_symbols = false;      // [\r\n/]* instead
    bool han_runs = false;  // Kimi-K2: [\p{Han}]+ first, letter runs stop at Han (is_han)
};

// llama.cpp's unicode_cpt_is_han: the CJK ideograph blocks by range (assigned
// or not), Extensions A..F and the compatibility ideographs.
bool is_han(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2EBEF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool cased_upper(const Word& w, size_t p, bool marks) {  // (?=[\p{L}])[^a-z]
    const char32_t c = w.at(p);
    return (w.letter(p) || (marks && w.cls(p).mark)) && !(c >= 'a' && c <= 'z');
}
bool cased_lower(const Word& w, size_t p, bool marks) {  // (?=[\p{L}])[^A-Z]
    const char32_t c = w.at(p);
    return (w.letter(p) || (marks && w.cls(p).mark)) && !(c >= 'A' && c <= 'Z');
}

// U*L+ from `s` (greedy U*, backing off until L+ can start): the end, or 0.
size_t upper_star_lower_plus(const Word& w, size_t s, bool marks) {
    size_t k = s;
    while (cased_upper(w, k, marks)) ++k;
    for (size_t start = k + 1; start-- > s;) {
        if (!cased_lower(w, start, marks)) continue;
        size_t end = start;
        while (cased_lower(w, end, marks)) ++end;
        return end;
    }
    return 0;
}

// U+L* from `s`: the end, or 0.
size_t upper_plus_lower_star(const Word& w, size_t s, bool marks) {
    if (!cased_upper(w, s, marks)) return 0;
    size_t end = s;
    while (cased_upper(w, end, marks)) ++end;
    while (cased_lower(w, end, marks)) ++end;
    return end;
}

// The end of the letter alternative at `pos`, or `pos` when it does not match.
size_t letter_run_end(const Word& w, size_t pos, const ModernRule& rule) {
    switch (rule.letters) {
        case Letters::plain:
        case Letters::with_marks: {
            const auto in_run = [&](size_t p) {
                if (rule.han_runs && is_han(w.at(p))) return false;
                return rule.letters == Letters::plain ? w.letter(p) : w.letter_or_mark(p);
            };
            // [^\r\n\p{L}\p{N}]? is only worth taking when a run follows it.
            if (w.line_break(pos) || w.number(pos) || !(in_run(pos) || in_run(pos + 1))) return pos;
            size_t end = pos + 1;
            while (in_run(end)) ++end;
            if (rule.contraction_after_letters) end += contraction_length(w, end, true);
            return end;
        }
        case Letters::cased:
        case Letters::cased_with_marks: {
            const bool marks = rule.letters == Letters::cased_with_marks;
            // Alternatives in order, each with the optional prefix taken, then not.
            size_t end = 0;
            for (const auto alternative : {upper_star_lower_plus, upper_plus_lower_star}) {
                if (w.letter_prefix(pos)) end = alternative(w, pos + 1, marks);
                if (end == 0) end = alternative(w, pos, marks);
                if (end != 0) break;
            }
            if (end == 0) return pos;
            if (rule.contraction_after_letters) end += contraction_length(w, end, true);
            return end;
        }
    }
    return pos;
}

void split_modern_word(const std::vector<char32_t>& cps, Span span, const ModernRule& rule,
                       Spans& out) {
    const Word w(cps, span);
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        if (rule.han_runs && is_han(w.at(pos))) {
            while (is_han(w.at(pos))) ++pos;
            cutter.cut(pos);
            continue;
        }
        if (rule.contractions) {
            if (const size_t n = contraction_length(w, pos, true)) {
                pos += cutter.cut(pos + n);
                continue;
            }
        }
        if (const size_t end = letter_run_end(w, pos, rule); end > pos) {
            pos = end;
            cutter.cut(pos);
            continue;
        }
        // \p{N}{1,max_digits}, repeated
        if (w.number(pos)) {
            size_t group_start = pos;
            while (w.number(pos)) {
                if (++pos - group_start >= rule.max_digits) {
                    cutter.cut(pos);
                    group_start = pos;
                }
            }
            cutter.cut(pos);
            continue;
        }
        // " ?[^\s\p{L}\p{N}]+[\r\n]*" (or the rule's variant)
        const size_t run = w.at(pos) == ' ' ? pos + 1 : pos;
        if (w.other(run, rule.symbols_exclude_marks)) {
            pos = run;
            while (w.other(pos, rule.symbols_exclude_marks)) ++pos;
            if (rule.breaks_after_symbols)
                while (w.line_break(pos) || (rule.slashes_after_symbols && w.at(pos) == '/')) ++pos;
            cutter.cut(pos);
            continue;
        }
        if (const size_t end = whitespace_to_last_break(w, pos); end > pos) {
            pos = end;
            cutter.cut(pos);
            continue;
        }
        const size_t end = whitespace_run_end(w, pos);
        pos = end > pos ? end : pos + 1;
        cutter.cut(pos);
    }
}

bool ascii_letter(char32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool ascii_punctuation_or_symbol(char32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

// DeepSeek-V3's third regex:
//   [!-/:-@[-`{-~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ |
//    ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// What none of these matches (controls, format characters, digits) stays
// between the matches as one word, as a regex split leaves it.
void split_deepseek_v3_word(const std::vector<char32_t>& cps, Span span, Spans& out) {
    const Word w(cps, span);
    const auto symbol = [&](size_t p) {
        const auto c = w.cls(p);
        return c.punctuation || c.symbol;
    };
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        size_t end = pos;
        if (ascii_punctuation_or_symbol(w.at(pos)) && ascii_letter(w.at(pos + 1))) {
            end = pos + 1;
            while (ascii_letter(w.at(end))) ++end;
        } else if (w.letter_or_mark(pos) || (!w.line_break(pos) && !w.letter(pos) && !symbol(pos) &&
                                             w.letter_or_mark(pos + 1))) {
            end = pos + 1;
            while (w.letter_or_mark(end)) ++end;
        } else if (const size_t run = w.at(pos) == ' ' ? pos + 1 : pos; symbol(run)) {
            end = run;
            while (symbol(end)) ++end;
            while (w.line_break(end)) ++end;
        } else if (const size_t breaks = whitespace_to_last_break(w, pos); breaks > pos) {
            end = breaks;
        } else {
            end = whitespace_run_end(w, pos);
        }
        if (end == pos) {  // no match: the character joins the gap
            ++pos;
            continue;
        }
        cutter.cut(pos);
        pos = end;
        cutter.cut(pos);
    }
    cutter.cut(span.end);
}

// A single-class regex: "X" (one_per_match), "X+" or "X{1,n}" (max_run); the
// matches become words, and so do the gaps between them.
void split_class(const std::vector<char32_t>& cps, Span span, size_t max_run,
                 const std::function<bool(char32_t)>& in_class, Spans& out) {
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        if (!in_class(cps[pos])) {
            ++pos;
            continue;
        }
        cutter.cut(pos);
        const size_t start = pos;
        while (pos < span.end && pos - start < max_run && in_class(cps[pos])) ++pos;
        cutter.cut(pos);
    }
    cutter.cut(span.end);
}

// "\s?X+": a run of X with the whitespace character before it, if any.
void split_spaced_class(const std::vector<char32_t>& cps, Span span,
                        const std::function<bool(const CodepointClass&)>& in_class, Spans& out) {
    const Word w(cps, span);
    const auto x = [&](size_t p) { return w.inside(p) && in_class(w.cls(p)); };
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        const size_t run = w.space(pos) && x(pos + 1) ? pos + 1 : pos;
        if (!x(run)) {
            ++pos;
            continue;
        }
        cutter.cut(pos);
        pos = run;
        while (x(pos)) ++pos;
        cutter.cut(pos);
    }
    cutter.cut(span.end);
}

// "[^\n]+|[\n]+": runs of line feeds and runs of everything else.
void split_lines(const std::vector<char32_t>& cps, Span span, Spans& out) {
    Cutter cutter(out, span.begin);
    for (size_t pos = span.begin + 1; pos < span.end; ++pos)
        if ((cps[pos] == '\n') != (cps[pos - 1] == '\n')) cutter.cut(pos);
    cutter.cut(span.end);
}

// "[0-9][0-9][0-9]": leftmost, non-overlapping triples of ASCII digits.
void split_digit_triples(const std::vector<char32_t>& cps, Span span, Spans& out) {
    Cutter cutter(out, span.begin);
    const auto digit = [&](size_t p) { return p < span.end && cps[p] >= '0' && cps[p] <= '9'; };
    size_t pos = span.begin;
    while (pos < span.end) {
        if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
            cutter.cut(pos);
            pos += 3;
            cutter.cut(pos);
        } else {
            ++pos;
        }
    }
    cutter.cut(span.end);
}

using Stage = std::function<void(const std::vector<char32_t>&, Span, Spans&)>;

Spans apply(const std::vector<char32_t>& cps, const Spans& words, const Stage& stage) {
    Spans out;
    out.reserve(words.size() * 2);
    for (const Span& s : words) stage(cps, s, out);
    return out;
}

bool is_number(char32_t c) { return classify(c).number; }

// [\p{P}$+<=>^~|] (and ` for Falcon)
bool is_standard_punctuation(char32_t c, bool backtick) {
    switch (c) {
        case '$':
        case '+':
        case '<':
        case '=':
        case '>':
        case '^':
        case '~':
        case '|':
            return true;
        case '`':
            return backtick;
        default:
            return classify(c).punctuation;
    }
}

// [一-龥぀-ゟ゠-ヿ]: CJK ideographs U+4E00..U+9FA5, hiragana, katakana.
bool is_cjk_or_kana(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

// [一-龥ࠀ-一가-퟿]: U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF.
bool is_deepseek_coder_cjk(char32_t c) {
    return (c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
}

Stage modern(ModernRule rule) {
    return [rule](const auto& c, Span s, Spans& o) { split_modern_word(c, s, rule, o); };
}

ModernRule qwen2_rule() {
    ModernRule r;
    r.max_digits = 1;
    return r;
}

std::vector<Stage> stages_of(PreTokenizer kind) {
    const Stage gpt2 = [](const auto& c, Span s, Spans& o) { split_gpt2_word(c, s, o); };
    const auto runs_of = [](size_t max_run, bool (*in_class)(char32_t)) -> Stage {
        return [=](const auto& c, Span s, Spans& o) { split_class(c, s, max_run, in_class, o); };
    };
    const Stage triples = [](const auto& c, Span s, Spans& o) { split_digit_triples(c, s, o); };
    switch (kind) {
        case PreTokenizer::gpt2:
            return {gpt2};
        case PreTokenizer::llama3:
            return {modern({})};
        case PreTokenizer::qwen2:
            return {modern(qwen2_rule())};
        case PreTokenizer::qwen35: {
            ModernRule r = qwen2_rule();
            r.letters = Letters::with_marks;
            r.symbols_exclude_marks = true;
            return {modern(r)};
        }
        case PreTokenizer::ufakzeka: {
            ModernRule r = qwen2_rule();
            r.contractions = false;
            return {modern(r)};
        }
        case PreTokenizer::seed_coder: {
            ModernRule r = qwen2_rule();
            r.breaks_after_symbols = false;
            return {modern(r)};
        }
        case PreTokenizer::tekken:
        case PreTokenizer::gpt4o:
        case PreTokenizer::granite_multi: {
            ModernRule r;
            r.contractions = false;
            r.letters =
                kind == PreTokenizer::granite_multi ? Letters::cased_with_marks : Letters::cased;
            r.contraction_after_letters = kind != PreTokenizer::tekken;
            r.max_digits = kind == PreTokenizer::tekken ? 1 : 3;
            r.slashes_after_symbols = true;
            return {modern(r)};
        }
        case PreTokenizer::kimi_k2: {
            // One pass, as llama.cpp's handler, not a Han stage before llama3's
            // rule: "a  中" keeps its last space apart (\s+(?!\S)), where a Han
            // stage would end the word at the run and keep "  " whole.
            ModernRule r;
            r.contractions = false;
            r.contraction_after_letters = true;
            r.han_runs = true;
            return {modern(r)};
        }
        case PreTokenizer::minicpm5: {
            ModernRule r;
            r.max_digits = kUnbounded;
            return {runs_of(3, is_number), modern(r)};
        }
        case PreTokenizer::laguna:
            return {[](const auto& c, Span s, Spans& o) { split_lines(c, s, o); },
                    modern(qwen2_rule())};
        case PreTokenizer::lines:
            return {[](const auto& c, Span s, Spans& o) { split_lines(c, s, o); }};
        case PreTokenizer::starcoder:
            return {runs_of(1, is_number), gpt2};
        case PreTokenizer::falcon:
            return {
                runs_of(kUnbounded, [](char32_t c) { return is_standard_punctuation(c, true); }),
                gpt2, triples};
        case PreTokenizer::deepseek_v3:
            return {runs_of(3, is_number), runs_of(kUnbounded, is_cjk_or_kana),
                    [](const auto& c, Span s, Spans& o) { split_deepseek_v3_word(c, s, o); }};
        case PreTokenizer::deepseek_coder: {
            const auto spaced = [](bool (*in_class)(const CodepointClass&)) -> Stage {
                return
                    [=](const auto& c, Span s, Spans& o) { split_spaced_class(c, s, in_class, o); };
            };
            return {runs_of(1, [](char32_t c) { return c == '\r' || c == '\n'; }),
                    spaced([](const CodepointClass& c) { return c.letter; }),
                    spaced([](const CodepointClass& c) { return c.punctuation; }),
                    runs_of(kUnbounded, is_deepseek_coder_cjk), runs_of(1, is_number)};
        }
        case PreTokenizer::standard:
            return {
                runs_of(kUnbounded, [](char32_t c) { return is_standard_punctuation(c, false); }),
                gpt2, runs_of(kUnbounded, is_number), triples};
    }
    return {};
}

// Text from a file, safe to print: controls and non-ASCII bytes as \xNN.
std::string escaped(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const char ch : text) {
        const auto byte = static_cast<unsigned char>(ch);
        if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
            out.push_back(ch);
        } else {
            out += "\\x";
            out.push_back(kHex[byte >> 4]);
            out.push_back(kHex[byte & 15]);
        }
    }
    return out;
}

using P = PreTokenizer;
constexpr PreTokenizerInfo plain(P kind) { return {.kind = kind}; }
constexpr PreTokenizerInfo whole_words(P kind) { return {.kind = kind, .ignore_merges = true}; }
constexpr PreTokenizerInfo whole_words_bos(P kind) {
    return {.kind = kind, .ignore_merges = true, .add_bos = true};
}
// SentencePiece-style BPE over whole lines (llama.cpp's GEMMA4 and SARVAM_MOE).
constexpr PreTokenizerInfo sp_lines() {
    return {.kind = P::lines, .spelling = Spelling::sentencepiece};
}
constexpr PreTokenizerInfo gemma4_lines() {
    return {.kind = P::lines,
            .spelling = Spelling::sentencepiece,
            .newline_runs_whole = true,
            .bos_always = true};
}
constexpr std::optional<PreTokenizerInfo> kRefused;

// llama.cpp 0.3.36's llama-vocab.cpp (llama_vocab::impl::load), name by name.
// Flags that only change decoding (clean_spaces) or embeddings (add_sep) do
// not show here; names whose split or normalisation ferrox lacks are refused.
constexpr PreTokenizerName kNames[] = {
    {"default", "DEFAULT", plain(P::standard)},
    {"minicpm5", "MINICPM5", whole_words(P::minicpm5)},
    {"llama3", "LLAMA3", whole_words_bos(P::llama3)},
    {"llama-v3", "LLAMA3", whole_words_bos(P::llama3)},
    {"llama-bpe", "LLAMA3", whole_words_bos(P::llama3)},
    {"falcon3", "LLAMA3", whole_words_bos(P::llama3)},
    {"falcon-h1", "LLAMA3", whole_words_bos(P::llama3)},
    {"pixtral", "LLAMA3", whole_words_bos(P::llama3)},
    {"midm-2.0", "LLAMA3", whole_words_bos(P::llama3)},
    {"lfm2", "LLAMA3", whole_words_bos(P::llama3)},
    {"jina-v5-nano", "LLAMA3", whole_words_bos(P::llama3)},
    {"deepseek-llm", "DEEPSEEK_LLM", kRefused},
    {"deepseek-coder", "DEEPSEEK_CODER", plain(P::deepseek_coder)},
    {"deepseek-v3", "DEEPSEEK3_LLM", plain(P::deepseek_v3)},
    {"spark2_5", "SPARK2_5", kRefused},
    {"youtu", "YOUTU", kRefused},
    {"falcon", "FALCON", plain(P::falcon)},
    {"mpt", "MPT", plain(P::gpt2)},
    {"starcoder", "STARCODER", plain(P::starcoder)},
    {"gpt-2", "GPT2", plain(P::gpt2)},
    {"phi-2", "GPT2", plain(P::gpt2)},
    {"jina-es", "GPT2", plain(P::gpt2)},
    {"jina-de", "GPT2", plain(P::gpt2)},
    {"gigachat", "GPT2", plain(P::gpt2)},
    {"jina-v2-es", "GPT2", plain(P::gpt2)},
    {"jina-v2-de", "GPT2", plain(P::gpt2)},
    {"a.x-4.0", "GPT2", plain(P::gpt2)},
    {"mellum", "GPT2", plain(P::gpt2)},
    {"modern-bert", "GPT2", plain(P::gpt2)},
    {"jais-2", "JAIS2", kRefused},
    {"gemma4", "GEMMA4", gemma4_lines()},
    {"granite-embed-multi-311m", "GEMMA4", gemma4_lines()},
    {"sarvam-moe", "SARVAM_MOE", sp_lines()},
    {"jina-v1-en", "GPT2", plain(P::gpt2)},
    {"jina-v2-code", "GPT2", plain(P::gpt2)},
    {"roberta-bpe", "GPT2", plain(P::gpt2)},
    {"whitespace", "WHITESPACE", kRefused},
    {"refact", "REFACT", plain(P::starcoder)},
    {"command-r", "COMMAND_R", plain(P::starcoder)},
    {"qwen2", "QWEN2", plain(P::qwen2)},
    {"deepseek-r1-qwen", "QWEN2", plain(P::qwen2)},
    {"kormo", "QWEN2", plain(P::qwen2)},
    {"f2llmv2", "QWEN2", plain(P::qwen2)},
    {"qwen35", "QWEN35", plain(P::qwen35)},
    {"stablelm2", "STABLELM2", plain(P::qwen2)},
    {"olmo", "OLMO", plain(P::gpt2)},
    {"dbrx", "DBRX", plain(P::llama3)},
    {"smaug-bpe", "SMAUG", plain(P::llama3)},
    {"poro-chat", "PORO", kRefused},
    // ChatGLM's BOS default is "none"; ferrox's gpt2 default is none already.
    {"chatglm-bpe", "CHATGLM4", plain(P::llama3)},
    {"glm4", "CHATGLM4", whole_words(P::llama3)},
    {"glm5", "CHATGLM4", whole_words(P::llama3)},
    {"viking", "VIKING", kRefused},
    {"jais", "JAIS", plain(P::gpt2)},
    {"tekken", "TEKKEN", whole_words_bos(P::tekken)},
    {"smollm", "SMOLLM", plain(P::starcoder)},
    {"codeshell", "CODESHELL", plain(P::starcoder)},
    {"bloom", "BLOOM", kRefused},
    {"gpt3-finnish", "GPT3_FINNISH", kRefused},
    {"exaone", "EXAONE", plain(P::starcoder)},
    {"exaone4", "GPT2", plain(P::gpt2)},
    {"exaone-moe", "EXAONE_MOE", kRefused},
    {"chameleon", "CHAMELEON", kRefused},
    {"minerva-7b", "MINERVA", plain(P::starcoder)},
    {"megrez", "QWEN2", plain(P::qwen2)},
    {"gpt-4o", "GPT4O", plain(P::gpt4o)},
    {"llama4", "GPT4O", plain(P::gpt4o)},
    {"kanana2", "GPT4O", plain(P::gpt4o)},
    {"talkie", "GPT4O", plain(P::gpt4o)},
    {"granite-embed-multi-97m", "GRANITE_EMB_MULTI", whole_words(P::granite_multi)},
    {"tiny_aya", "TINY_AYA", kRefused},
    {"cohere2moe", "TINY_AYA", kRefused},
    {"superbpe", "SUPERBPE", kRefused},
    {"trillion", "TRILLION", plain(P::gpt2)},
    {"granite-docling", "GRANITE_DOCLING", plain(P::gpt2)},
    // \s*[\r\n] ends where \s*[\r\n]+ does, so BailingMoE splits as Qwen2.
    {"bailingmoe", "BAILINGMOE", plain(P::qwen2)},
    {"bailingmoe2", "BAILINGMOE", plain(P::qwen2)},
    {"llada-moe", "BAILINGMOE", plain(P::qwen2)},
    {"seed-coder", "SEED_CODER", plain(P::seed_coder)},
    {"hunyuan", "HUNYUAN", plain(P::qwen2)},
    {"hunyuan-dense", "HUNYUAN_DENSE", plain(P::deepseek_v3)},
    {"hy_v4", "HY_V4", plain(P::deepseek_v3)},
    {"joyai-llm", "JOYAI_LLM", plain(P::deepseek_v3)},
    {"kimi-k2", "KIMI_K2", plain(P::kimi_k2)},
    {"ufakzeka", "UFAKZEKA", plain(P::ufakzeka)},
    {"grok-2", "GROK_2", plain(P::qwen2)},
    {"afmoe", "AFMOE", kRefused},
    {"laguna", "LAGUNA", plain(P::laguna)},
    {"minimax-m2", "MINIMAX_M2", plain(P::gpt4o)},
    {"solar-open", "SOLAR_OPEN", plain(P::qwen2)},
    {"mellum2", "MELLUM2", plain(P::starcoder)},
};

}  // namespace

std::span<const PreTokenizerName> pre_tokenizer_names() { return kNames; }

std::string_view scanner_name(PreTokenizer kind) {
    switch (kind) {
        case P::gpt2:
            return "gpt2";
        case P::llama3:
            return "llama3";
        case P::qwen2:
            return "qwen2";
        case P::qwen35:
            return "qwen35";
        case P::ufakzeka:
            return "ufakzeka";
        case P::seed_coder:
            return "seed-coder";
        case P::tekken:
            return "tekken";
        case P::gpt4o:
            return "gpt4o";
        case P::granite_multi:
            return "granite-multi";
        case P::minicpm5:
            return "minicpm5";
        case P::laguna:
            return "laguna";
        case P::starcoder:
            return "starcoder";
        case P::falcon:
            return "falcon";
        case P::deepseek_v3:
            return "deepseek-v3";
        case P::deepseek_coder:
            return "deepseek-coder";
        case P::kimi_k2:
            return "kimi-k2";
        case P::standard:
            return "default";
        case P::lines:
            return "lines";
    }
    return "?";
}

Expected<PreTokenizerInfo> pre_tokenizer_named(std::string_view name) {
    const std::string_view key = name.empty() ? std::string_view("default") : name;
    for (const PreTokenizerName& entry : kNames) {
        if (entry.name != key) continue;
        if (entry.info) return *entry.info;
        return make_error(
            "tokenizer.ggml.pre '{}' (llama.cpp's {} split) is not supported by ferrox "
            "(docs/tokenizers.md lists the supported names)",
            escaped(name), entry.llama_type);
    }
    return make_error(
        "unknown tokenizer.ggml.pre '{}' (neither ferrox nor llama.cpp knows it; "
        "docs/tokenizers.md lists the {} names)",
        escaped(name), std::size(kNames));
}

std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text) {
    const std::vector<char32_t> cps = decode_utf8_lossy(text);
    Spans words;
    if (!cps.empty()) words.push_back({0, cps.size()});
    for (const Stage& stage : stages_of(kind)) words = apply(cps, words, stage);

    std::vector<std::string> out;
    out.reserve(words.size());
    for (const Span& s : words) {
        std::string word;
        for (size_t i = s.begin; i < s.end; ++i) append_utf8(word, cps[i]);
        out.push_back(std::move(word));
    }
    return out;
}

}  // namespace ferrox::tokenizer_detail
