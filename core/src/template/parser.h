// Tokens -> the statement tree, with jinja2's grammar and operator precedence.
#pragma once

#include <string_view>

#include "template/ast.h"
#include "template/lexer.h"

namespace ferrox::tmpl {

// Throws TemplateError (line, construct) on a syntax error or an unknown tag.
// Nesting deeper than kMaxParseDepth is refused rather than overflowing the stack.
Program parse(std::string_view source, const LexOptions& options = {});

inline constexpr int kMaxParseDepth = 200;
// How deep one expression's tree may be, counting the chains the parser builds
// in a loop (`a + a + ...`, `x|f|f...`, `a.b.c...`) as well as brackets.
inline constexpr int kMaxExprDepth = 256;

}  // namespace ferrox::tmpl
