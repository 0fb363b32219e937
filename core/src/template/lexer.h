// Template source -> tokens. Whitespace control is applied here, as jinja2's
// lexer does: `{%-`/`-%}` strip all whitespace on their side, trim_blocks drops
// the newline after a block or comment tag, lstrip_blocks drops the spaces and
// tabs before one that starts its line (`{%+` opts out).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferrox::tmpl {

struct Token {
    enum class Kind {
        Text,
        VarBegin,
        VarEnd,
        BlockBegin,
        BlockEnd,
        Name,
        String,
        Int,
        Float,
        Op,
        End
    };
    Kind kind;
    std::string text;  // Text: the data; Name/Op: the spelling; String: the decoded value
    int64_t int_value = 0;
    double float_value = 0;
    int line = 1;
};

struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// Throws TemplateError naming the line on an unclosed tag, comment or string.
std::vector<Token> lex(std::string_view source, const LexOptions& options);

}  // namespace ferrox::tmpl
