// The parsed template: expressions and statements, each with its source line
// so a render error can name where it happened.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace ferrox::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgs {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
    enum class Kind {
        Literal,   // value
        Name,      // name
        ListLit,   // items
        TupleLit,  // items
        DictLit,   // items: key, value, key, value, ...
        GetAttr,   // items[0] . name
        GetItem,   // items[0] [ items[1] ]
        Slice,     // items[0] [ items[1] : items[2] : items[3] ] (null = omitted)
        Call,      // items[0] ( args )
        Filter,    // items[0] | name ( args ); items[0] null inside {% filter %}
        Test,      // items[0] is [not] name ( args )
        Not,       // not items[0]
        Neg,       // - items[0]
        Pos,       // + items[0]
        Binary,    // items[0] op items[1]
        Cond,      // items[1] if items[0] else items[2] (items[2] may be null)
    };
    Expr(Kind k, int at_line) : kind(k), line(at_line) {}
    Kind kind;
    int line;
    Value value;
    std::string name;  // Name, GetAttr, Filter, Test; Binary: the operator
    std::vector<ExprPtr> items;
    CallArgs args;
    bool negated = false;  // Test: `is not`
    // 1 + the deepest child (items and args): the parser refuses a tree deeper
    // than kMaxExprDepth, so evaluating and destroying it cannot exhaust the stack.
    int depth = 1;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // null: required
};

struct Stmt {
    enum class Kind {
        Text,         // text
        Output,       // {{ expr }}
        If,           // conditions[i] -> bodies[i]; else_body
        For,          // targets in expr [if cond]: body; else_body
        Set,          // targets = expr, or target.attr = expr (attr non-empty)
        SetBlock,     // {% set target %}body{% endset %}, filtered by expr (a Filter chain) if any
        Macro,        // name(params): body
        CallBlock,    // {% call(params) expr %}body{% endcall %}
        FilterBlock,  // {% filter f %}body{% endfilter %}
        Break,
        Continue,
        Generation,  // {% generation %}body{% endgeneration %} (transformers' tag): renders body
    };
    Stmt(Kind k, int at_line) : kind(k), line(at_line) {}
    Kind kind;
    int line;
    std::string text;
    ExprPtr expr, cond;
    std::vector<ExprPtr> conditions;
    std::vector<Body> bodies;
    Body body, else_body;
    std::vector<std::string> targets;
    std::string attr;
    std::string name;
    std::vector<MacroParam> params;
    bool recursive = false;
};

struct Program {
    Body body;
};

}  // namespace ferrox::tmpl
