#include "tokenizer/pre_tokenizer.h"

#include <cstddef>
#include <functional>

#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

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
    // [^\s\p{L}\p{N}] for a code point that exists.
    bool other(size_t pos) const {
        const auto c = cls(pos);
        return inside(pos) && !c.whitespace && !c.letter && !c.number;
    }
    bool letter(size_t pos) const { return cls(pos).letter; }
    bool number(size_t pos) const { return cls(pos).number; }
    bool space(size_t pos) const { return cls(pos).whitespace; }

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
        for (Test test : {static_cast<Test>(&Word::letter), static_cast<Test>(&Word::number),
                          static_cast<Test>(&Word::other)}) {
            if ((w.*test)(run)) {
                pos = run;
                while ((w.*test)(pos)) ++pos;
                cutter.cut(pos);
                matched = true;
                break;
            }
        }
        if (matched) continue;
        const size_t end = whitespace_run_end(w, pos);
        pos = end > pos ? end : pos + 1;
        cutter.cut(pos);
    }
}

void split_llama3_word(const std::vector<char32_t>& cps, Span span, size_t max_digits, Spans& out) {
    const Word w(cps, span);
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        const char32_t c = w.at(pos);
        if (const size_t n = contraction_length(w, pos, true)) {
            pos += cutter.cut(pos + n);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (c != '\r' && c != '\n' && !w.number(pos) && (w.letter(pos) || w.letter(pos + 1))) {
            ++pos;
            while (w.letter(pos)) ++pos;
            cutter.cut(pos);
            continue;
        }
        // \p{N}{1,max_digits}, repeated
        if (w.number(pos)) {
            size_t group_start = pos;
            while (w.number(pos)) {
                if (++pos - group_start >= max_digits) {
                    cutter.cut(pos);
                    group_start = pos;
                }
            }
            cutter.cut(pos);
            continue;
        }
        // " ?[^\s\p{L}\p{N}]+[\r\n]*"
        const size_t run = c == ' ' ? pos + 1 : pos;
        if (w.other(run)) {
            pos = run;
            while (w.other(pos)) ++pos;
            while (w.at(pos) == '\r' || w.at(pos) == '\n') ++pos;
            cutter.cut(pos);
            continue;
        }
        // \s*[\r\n]+ : whitespace up to and including the last line break of the run
        size_t n = 0, after_last_break = 0;
        while (w.space(pos + n)) {
            if (w.at(pos + n) == '\r' || w.at(pos + n) == '\n') after_last_break = pos + n + 1;
            ++n;
        }
        if (after_last_break > 0) {
            pos = after_last_break;
            cutter.cut(pos);
            continue;
        }
        const size_t end = whitespace_run_end(w, pos);
        pos = end > pos ? end : pos + 1;
        cutter.cut(pos);
    }
}

// A single-class regex such as "\p{N}" or "[\p{P}...]+": matches become words,
// and so do the gaps between them.
void split_class(const std::vector<char32_t>& cps, Span span, bool one_per_match,
                 const std::function<bool(char32_t)>& in_class, Spans& out) {
    Cutter cutter(out, span.begin);
    size_t pos = span.begin;
    while (pos < span.end) {
        if (!in_class(cps[pos])) {
            ++pos;
            continue;
        }
        cutter.cut(pos);
        ++pos;
        if (!one_per_match)
            while (pos < span.end && in_class(cps[pos])) ++pos;
        cutter.cut(pos);
    }
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

bool is_standard_punctuation(char32_t c) {
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
        default:
            return classify(c).punctuation;
    }
}

}  // namespace

Expected<PreTokenizerInfo> pre_tokenizer_named(std::string_view name) {
    if (name == "llama3" || name == "llama-v3" || name == "llama-bpe")
        return PreTokenizerInfo{PreTokenizer::llama3, true, true};
    if (name == "qwen2" || name == "deepseek-r1-qwen")
        return PreTokenizerInfo{PreTokenizer::qwen2, false, false};
    if (name == "smollm") return PreTokenizerInfo{PreTokenizer::smollm, false, false};
    if (name == "gpt2" || name == "gpt-2" || name == "phi-2")
        return PreTokenizerInfo{PreTokenizer::gpt2, false, false};
    if (name == "default" || name.empty())
        return PreTokenizerInfo{PreTokenizer::standard, false, false};
    return make_error(
        "unknown tokenizer.ggml.pre '{}' (known: llama3, llama-v3, llama-bpe, qwen2, "
        "deepseek-r1-qwen, smollm, gpt2, gpt-2, phi-2, default)",
        name);
}

std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text) {
    const std::vector<char32_t> cps = decode_utf8_lossy(text);
    Spans words;
    if (!cps.empty()) words.push_back({0, cps.size()});

    const Stage gpt2 = [](const auto& c, Span s, Spans& o) { split_gpt2_word(c, s, o); };
    switch (kind) {
        case PreTokenizer::gpt2:
            words = apply(cps, words, gpt2);
            break;
        case PreTokenizer::llama3:
        case PreTokenizer::qwen2: {
            const size_t max_digits = kind == PreTokenizer::llama3 ? 3 : 1;
            words = apply(cps, words, [max_digits](const auto& c, Span s, Spans& o) {
                split_llama3_word(c, s, max_digits, o);
            });
            break;
        }
        case PreTokenizer::smollm:
            words = apply(cps, words, [](const auto& c, Span s, Spans& o) {
                split_class(c, s, true, is_number, o);
            });
            words = apply(cps, words, gpt2);
            break;
        case PreTokenizer::standard:
            words = apply(cps, words, [](const auto& c, Span s, Spans& o) {
                split_class(c, s, false, is_standard_punctuation, o);
            });
            words = apply(cps, words, gpt2);
            words = apply(cps, words, [](const auto& c, Span s, Spans& o) {
                split_class(c, s, false, is_number, o);
            });
            words = apply(cps, words,
                          [](const auto& c, Span s, Spans& o) { split_digit_triples(c, s, o); });
            break;
    }

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
