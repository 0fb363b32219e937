#include "template/lexer.h"

#include <cctype>
#include <cstring>

#include "template/value.h"

namespace ferrox::tmpl {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python's unicode-escape decoding of a string literal's body, which jinja2
// applies: \n, \t, \\, \', \", \xNN, \uNNNN, \UNNNNNNNN, octal; any other
// backslash stays as written.
void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80)
        out += static_cast<char>(cp);
    else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

std::string decode_string(std::string_view body) {
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
        char c = body[i];
        if (c != '\\' || i + 1 == body.size()) {
            out += c;
            continue;
        }
        const char e = body[++i];
        auto hex = [&](size_t n) -> bool {
            uint32_t cp = 0;
            for (size_t k = 1; k <= n; ++k) {
                if (i + k >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + k])))
                    return false;
                const char h = body[i + k];
                cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                         ? h - '0'
                                                         : (std::tolower(h) - 'a' + 10));
            }
            if (cp > 0x10ffff) return false;
            append_utf8(out, cp);
            i += n;
            return true;
        };
        switch (e) {
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case '\\':
                out += '\\';
                break;
            case '\'':
                out += '\'';
                break;
            case '"':
                out += '"';
                break;
            case 'a':
                out += '\a';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'v':
                out += '\v';
                break;
            case '\n':
                break;  // line continuation
            case 'x':
                if (!hex(2)) throw ValueError("truncated \\xXX escape");
                break;
            case 'u':
                if (!hex(4)) throw ValueError("truncated \\uXXXX escape");
                break;
            case 'U':
                if (!hex(8)) throw ValueError("truncated \\UXXXXXXXX escape");
                break;
            default:
                if (e >= '0' && e <= '7') {
                    uint32_t cp = 0;
                    size_t n = 0;
                    while (n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7')
                        cp = cp * 8 + static_cast<uint32_t>(body[i++] - '0'), ++n;
                    --i;
                    append_utf8(out, cp);
                } else {
                    out += '\\';
                    out += e;
                }
        }
    }
    return out;
}

class Lexer {
  public:
    Lexer(std::string_view src, const LexOptions& o) : src_(src), opt_(o) {}

    std::vector<Token> run() {
        Lead lead = Lead::Keep;
        while (pos_ <= src_.size()) {
            size_t start = find_tag(pos_);
            // Leading strip from the previous tag's end.
            size_t text_begin = pos_;
            if (lead == Lead::All) {
                while (text_begin < start && is_space(src_[text_begin])) ++text_begin;
            } else if (lead == Lead::Newline && text_begin < start && src_[text_begin] == '\n') {
                ++text_begin;
            }
            advance_lines(pos_, text_begin);
            std::string_view text = src_.substr(text_begin, start - text_begin);
            if (start == src_.size()) {
                push_text(text);
                break;
            }
            const char kind = src_[start + 1];
            const char mod = start + 2 < src_.size() ? src_[start + 2] : '\0';
            if (mod == '-') {
                while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
            } else if (mod != '+' && (kind == '%' || kind == '#') && opt_.lstrip_blocks) {
                const size_t nl = text.rfind('\n');
                const size_t tail = nl == std::string_view::npos ? 0 : nl + 1;
                const bool line_start =
                    nl != std::string_view::npos || text_begin == 0 || src_[text_begin - 1] == '\n';
                bool only_blank = true;
                for (size_t i = tail; i < text.size(); ++i)
                    if (text[i] != ' ' && text[i] != '\t') only_blank = false;
                if (line_start && only_blank) text = text.substr(0, tail);
            }
            push_text(text);
            advance_lines(text_begin, start);
            size_t p = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
            if (kind == '#') {
                const size_t end = src_.find("#}", p);
                if (end == std::string_view::npos)
                    throw TemplateError(line_, "comment", "unclosed comment: no '#}'");
                const bool strip = end > p && src_[end - 1] == '-';
                advance_lines(start, end + 2);
                pos_ = end + 2;
                lead = strip ? Lead::All : (opt_.trim_blocks ? Lead::Newline : Lead::Keep);
                continue;
            }
            const bool block = kind == '%';
            if (block && lex_raw(start, p, lead)) continue;
            tokens_.push_back(
                {block ? Token::Kind::BlockBegin : Token::Kind::VarBegin, {}, 0, 0, line_});
            advance_lines(start, p);
            pos_ = p;
            lead = lex_expression(block);
        }
        tokens_.push_back({Token::Kind::End, {}, 0, 0, line_});
        return std::move(tokens_);
    }

  private:
    enum class Lead { Keep, All, Newline };

    size_t find_tag(size_t from) const {
        for (size_t i = from; i + 1 < src_.size(); ++i)
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
                return i;
        return src_.size();
    }

    void advance_lines(size_t from, size_t to) {
        for (size_t i = from; i < to && i < src_.size(); ++i)
            if (src_[i] == '\n') ++line_;
    }

    void push_text(std::string_view text) {
        if (!text.empty()) tokens_.push_back({Token::Kind::Text, std::string(text), 0, 0, line_});
    }

    // `{% raw %}...{% endraw %}`: the body is text, tags and all.
    bool lex_raw(size_t start, size_t p, Lead& lead) {
        size_t q = p;
        while (q < src_.size() && is_space(src_[q])) ++q;
        if (src_.compare(q, 3, "raw") != 0) return false;
        q += 3;
        while (q < src_.size() && is_space(src_[q])) ++q;
        const bool strip_open = src_.compare(q, 3, "-%}") == 0;
        if (!strip_open && src_.compare(q, 2, "%}") != 0) return false;
        size_t body = q + (strip_open ? 3 : 2);
        for (size_t i = body;; ++i) {
            i = src_.find("{%", i);
            if (i == std::string_view::npos)
                throw TemplateError(line_, "raw", "unclosed raw block: no '{% endraw %}'");
            size_t r = i + 2;
            const bool strip_before = r < src_.size() && src_[r] == '-';
            if (strip_before || (r < src_.size() && src_[r] == '+')) ++r;
            while (r < src_.size() && is_space(src_[r])) ++r;
            if (src_.compare(r, 6, "endraw") != 0) continue;
            r += 6;
            while (r < src_.size() && is_space(src_[r])) ++r;
            const bool strip_close = src_.compare(r, 3, "-%}") == 0;
            if (!strip_close && src_.compare(r, 2, "%}") != 0) continue;
            std::string_view text = src_.substr(body, i - body);
            if (strip_open)
                while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
            else if (opt_.trim_blocks && !text.empty() && text.front() == '\n')
                text.remove_prefix(1);
            if (strip_before)
                while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
            push_text(text);
            const size_t end = r + (strip_close ? 3 : 2);
            advance_lines(start, end);
            pos_ = end;
            lead = strip_close ? Lead::All : (opt_.trim_blocks ? Lead::Newline : Lead::Keep);
            return true;
        }
    }

    // Tokens up to `}}` / `%}`; returns how the following text is to be stripped.
    Lead lex_expression(bool block) {
        const char* close = block ? "%}" : "}}";
        while (true) {
            while (pos_ < src_.size() && is_space(src_[pos_])) {
                if (src_[pos_] == '\n') ++line_;
                ++pos_;
            }
            if (pos_ >= src_.size())
                throw TemplateError(line_, block ? "block tag" : "expression",
                                    std::string("unclosed tag: no '") + close + "'");
            if (src_[pos_] == '-' && src_.compare(pos_ + 1, 2, close) == 0) {
                tokens_.push_back(
                    {block ? Token::Kind::BlockEnd : Token::Kind::VarEnd, {}, 0, 0, line_});
                pos_ += 3;
                return Lead::All;
            }
            if (block && src_[pos_] == '+' && src_.compare(pos_ + 1, 2, close) == 0) {
                tokens_.push_back({Token::Kind::BlockEnd, {}, 0, 0, line_});
                pos_ += 3;
                return Lead::Keep;
            }
            if (src_.compare(pos_, 2, close) == 0) {
                tokens_.push_back(
                    {block ? Token::Kind::BlockEnd : Token::Kind::VarEnd, {}, 0, 0, line_});
                pos_ += 2;
                return block && opt_.trim_blocks ? Lead::Newline : Lead::Keep;
            }
            lex_one();
        }
    }

    void lex_one() {
        const char c = src_[pos_];
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            size_t e = pos_;
            while (e < src_.size() &&
                   (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
                ++e;
            tokens_.push_back(
                {Token::Kind::Name, std::string(src_.substr(pos_, e - pos_)), 0, 0, line_});
            pos_ = e;
            return;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) {
            size_t e = pos_;
            auto digits = [&] {
                while (e < src_.size() &&
                       (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
                    ++e;
            };
            digits();
            bool is_float = false;
            if (e + 1 < src_.size() && src_[e] == '.' &&
                std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
                ++e, digits(), is_float = true;
            }
            if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
                size_t f = e + 1;
                if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
                if (f < src_.size() && std::isdigit(static_cast<unsigned char>(src_[f]))) {
                    e = f;
                    digits();
                    is_float = true;
                }
            }
            std::string text;
            for (size_t i = pos_; i < e; ++i)
                if (src_[i] != '_') text += src_[i];
            Token t{is_float ? Token::Kind::Float : Token::Kind::Int, text, 0, 0, line_};
            try {
                if (is_float)
                    t.float_value = std::stod(text);
                else
                    t.int_value = std::stoll(text);
            } catch (const std::exception&) {
                throw TemplateError(line_, "number", "number literal out of range: " + text);
            }
            tokens_.push_back(std::move(t));
            pos_ = e;
            return;
        }
        if (c == '\'' || c == '"') {
            size_t e = pos_ + 1;
            const int start_line = line_;
            while (e < src_.size() && src_[e] != c) {
                if (src_[e] == '\\') ++e;
                if (e < src_.size() && src_[e] == '\n') ++line_;
                ++e;
            }
            if (e >= src_.size())
                throw TemplateError(start_line, "string", "unterminated string literal");
            try {
                tokens_.push_back({Token::Kind::String,
                                   decode_string(src_.substr(pos_ + 1, e - pos_ - 1)), 0, 0,
                                   start_line});
            } catch (const ValueError& err) {
                throw TemplateError(start_line, "string", err.what());
            }
            pos_ = e + 1;
            return;
        }
        static const char* const two[] = {"//", "**", "==", "!=", "<=", ">="};
        for (const char* op : two)
            if (src_.compare(pos_, 2, op) == 0) {
                tokens_.push_back({Token::Kind::Op, op, 0, 0, line_});
                pos_ += 2;
                return;
            }
        if (std::strchr("+-*/%~<>=()[]{},.:|", c) != nullptr) {
            tokens_.push_back({Token::Kind::Op, std::string(1, c), 0, 0, line_});
            ++pos_;
            return;
        }
        throw TemplateError(line_, "expression",
                            "unexpected character '" + std::string(1, c) + "'");
    }

    std::string_view src_;
    LexOptions opt_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) {
    return Lexer(source, options).run();
}

}  // namespace ferrox::tmpl
