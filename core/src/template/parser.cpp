#include "template/parser.h"

#include <initializer_list>

namespace ferrox::tmpl {
namespace {

using TK = Token::Kind;

class Parser {
  public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    Program run() {
        Program p;
        std::string stop = parse_body(p.body, {});
        if (!stop.empty()) fail("'" + stop + "'", "unexpected '" + stop + "' outside its block");
        return p;
    }

  private:
    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
    bool at_op(const char* op) const { return cur().kind == TK::Op && cur().text == op; }
    bool at_name(const char* n) const { return cur().kind == TK::Name && cur().text == n; }
    [[noreturn]] void fail(const std::string& construct, const std::string& msg) const {
        throw TemplateError(cur().line, construct, msg);
    }
    std::string describe(const Token& t) const {
        switch (t.kind) {
            case TK::End:
                return "end of template";
            case TK::BlockEnd:
                return "'%}'";
            case TK::VarEnd:
                return "'}}'";
            case TK::Text:
                return "text";
            case TK::String:
                return "a string";
            case TK::Int:
            case TK::Float:
                return "a number";
            default:
                return "'" + t.text + "'";
        }
    }
    void expect_op(const char* op, const char* construct) {
        if (!at_op(op))
            fail(construct, std::string("expected '") + op + "', got " + describe(cur()));
        ++i_;
    }
    std::string expect_name(const char* construct) {
        if (cur().kind != TK::Name) fail(construct, "expected a name, got " + describe(cur()));
        return t_[i_++].text;
    }
    void expect_block_end(const std::string& construct) {
        if (cur().kind != TK::BlockEnd) fail(construct, "expected '%}', got " + describe(cur()));
        ++i_;
    }

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxParseDepth)
                p.fail("expression", "nesting deeper than " + std::to_string(kMaxParseDepth));
        }
        ~DepthGuard() { --p.depth_; }
    };

    // Statements until a block tag named in `stops` (consumed up to its name) or
    // the end; returns the stop's name, empty at the end.
    std::string parse_body(Body& body, std::initializer_list<const char*> stops) {
        DepthGuard guard(*this);
        while (true) {
            const Token& t = cur();
            if (t.kind == TK::End) return {};
            if (t.kind == TK::Text) {
                auto s = std::make_unique<Stmt>(Stmt::Kind::Text, t.line);
                s->text = t.text;
                body.push_back(std::move(s));
                ++i_;
                continue;
            }
            if (t.kind == TK::VarBegin) {
                ++i_;
                auto s = std::make_unique<Stmt>(Stmt::Kind::Output, t.line);
                s->expr = parse_tuple(true);
                if (cur().kind != TK::VarEnd)
                    fail("expression", "expected '}}', got " + describe(cur()));
                ++i_;
                body.push_back(std::move(s));
                continue;
            }
            if (t.kind != TK::BlockBegin) fail("template", "unexpected " + describe(t));
            ++i_;
            if (cur().kind != TK::Name)
                fail("block tag", "expected a tag name, got " + describe(cur()));
            const std::string name = cur().text;
            for (const char* stop : stops)
                if (name == stop) {
                    ++i_;
                    return name;
                }
            body.push_back(parse_statement());
        }
    }

    StmtPtr make(Stmt::Kind k, int line) { return std::make_unique<Stmt>(k, line); }

    void end_tag(const std::string& stop, const char* expected, const std::string& construct,
                 int line) {
        if (stop != expected)
            throw TemplateError(line, construct,
                                std::string("missing '{% ") + expected + " %}' (reached " +
                                    (stop.empty() ? "the end of the template" : "'" + stop + "'") +
                                    ")");
        expect_block_end(stop);
    }

    StmtPtr parse_statement() {
        const int line = cur().line;
        const std::string tag = t_[i_++].text;
        if (tag == "if") {
            auto s = make(Stmt::Kind::If, line);
            while (true) {
                s->conditions.push_back(parse_tuple(false));
                expect_block_end(tag);
                s->bodies.emplace_back();
                const std::string stop = parse_body(s->bodies.back(), {"elif", "else", "endif"});
                if (stop == "elif") continue;
                if (stop == "else") {
                    expect_block_end("else");
                    end_tag(parse_body(s->else_body, {"endif"}), "endif", "if", line);
                } else {
                    end_tag(stop, "endif", "if", line);
                }
                return s;
            }
        }
        if (tag == "for") {
            auto s = make(Stmt::Kind::For, line);
            s->targets.push_back(expect_name("for"));
            while (at_op(",")) {
                ++i_;
                s->targets.push_back(expect_name("for"));
            }
            if (!at_name("in")) fail("for", "expected 'in', got " + describe(cur()));
            ++i_;
            s->expr = parse_tuple(false);
            if (at_name("if")) {
                ++i_;
                s->cond = parse_expression(true);
            }
            if (at_name("recursive")) {
                ++i_;
                s->recursive = true;
            }
            expect_block_end("for");
            std::string stop = parse_body(s->body, {"else", "endfor"});
            if (stop == "else") {
                expect_block_end("else");
                stop = parse_body(s->else_body, {"endfor"});
            }
            end_tag(stop, "endfor", "for", line);
            return s;
        }
        if (tag == "set") {
            std::vector<std::string> targets{expect_name("set")};
            std::string attr;
            if (at_op(".")) {
                ++i_;
                attr = expect_name("set");
            } else {
                while (at_op(",")) {
                    ++i_;
                    targets.push_back(expect_name("set"));
                }
            }
            if (at_op("=")) {
                ++i_;
                auto s = make(Stmt::Kind::Set, line);
                s->targets = std::move(targets);
                s->attr = attr;
                s->expr = parse_tuple(true);
                expect_block_end("set");
                return s;
            }
            if (targets.size() != 1 || !attr.empty()) fail("set", "a block set takes one name");
            auto s = make(Stmt::Kind::SetBlock, line);
            s->targets = std::move(targets);
            if (at_op("|")) s->expr = parse_filters(nullptr);
            expect_block_end("set");
            end_tag(parse_body(s->body, {"endset"}), "endset", "set", line);
            return s;
        }
        if (tag == "macro") {
            auto s = make(Stmt::Kind::Macro, line);
            s->name = expect_name("macro");
            parse_params(s->params, "macro");
            expect_block_end("macro");
            end_tag(parse_body(s->body, {"endmacro"}), "endmacro", "macro", line);
            return s;
        }
        if (tag == "call") {
            auto s = make(Stmt::Kind::CallBlock, line);
            if (at_op("(")) parse_params(s->params, "call");
            s->expr = parse_expression(true);
            if (s->expr->kind != Expr::Kind::Call) fail("call", "expected a macro call");
            expect_block_end("call");
            end_tag(parse_body(s->body, {"endcall"}), "endcall", "call", line);
            return s;
        }
        if (tag == "filter") {
            auto s = make(Stmt::Kind::FilterBlock, line);
            s->expr = parse_filter_chain(nullptr);
            expect_block_end("filter");
            end_tag(parse_body(s->body, {"endfilter"}), "endfilter", "filter", line);
            return s;
        }
        if (tag == "break" || tag == "continue") {
            expect_block_end(tag);
            return make(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
        }
        if (tag == "generation") {
            auto s = make(Stmt::Kind::Generation, line);
            expect_block_end(tag);
            end_tag(parse_body(s->body, {"endgeneration"}), "endgeneration", "generation", line);
            return s;
        }
        throw TemplateError(line, "tag '" + tag + "'", "unknown or unsupported tag '" + tag + "'");
    }

    void parse_params(std::vector<MacroParam>& params, const char* construct) {
        expect_op("(", construct);
        while (!at_op(")")) {
            MacroParam p{expect_name(construct), nullptr};
            if (at_op("=")) {
                ++i_;
                p.default_value = parse_expression(true);
            }
            params.push_back(std::move(p));
            if (!at_op(",")) break;
            ++i_;
        }
        expect_op(")", construct);
    }

    ExprPtr node(Expr::Kind k, int line) { return std::make_unique<Expr>(k, line); }

    // `child` becomes part of `parent`'s tree: its depth counts, and a tree
    // deeper than kMaxExprDepth is refused while it is built.
    ExprPtr deepen(Expr& parent, ExprPtr child) {
        if (child && child->depth + 1 > parent.depth) {
            parent.depth = child->depth + 1;
            if (parent.depth > kMaxExprDepth)
                throw TemplateError(parent.line, "expression",
                                    "expression nested deeper than " +
                                        std::to_string(kMaxExprDepth) +
                                        " (operators, filters, attributes and brackets)");
        }
        return child;
    }
    void adopt(Expr& parent, ExprPtr child) {
        parent.items.push_back(deepen(parent, std::move(child)));
    }

    ExprPtr parse_tuple(bool with_cond) {
        const int line = cur().line;
        ExprPtr first = parse_expression(with_cond);
        if (!at_op(",")) return first;
        auto t = node(Expr::Kind::TupleLit, line);
        adopt(*t, std::move(first));
        while (at_op(",")) {
            ++i_;
            if (cur().kind == TK::BlockEnd || cur().kind == TK::VarEnd || at_op(")")) break;
            adopt(*t, parse_expression(with_cond));
        }
        return t;
    }

    ExprPtr parse_expression(bool with_cond) {
        DepthGuard guard(*this);
        if (!with_cond) return parse_or();
        ExprPtr e = parse_or();
        while (at_name("if")) {
            const int line = cur().line;
            ++i_;
            auto c = node(Expr::Kind::Cond, line);
            adopt(*c, parse_or());
            adopt(*c, std::move(e));
            if (at_name("else")) {
                ++i_;
                adopt(*c, parse_expression(true));
            } else {
                adopt(*c, nullptr);
            }
            e = std::move(c);
        }
        return e;
    }

    ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int line) {
        auto b = node(Expr::Kind::Binary, line);
        b->name = std::move(op);
        adopt(*b, std::move(l));
        adopt(*b, std::move(r));
        return b;
    }

    ExprPtr parse_or() {
        ExprPtr e = parse_and();
        while (at_name("or")) {
            const int line = cur().line;
            ++i_;
            e = binary("or", std::move(e), parse_and(), line);
        }
        return e;
    }

    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        while (at_name("and")) {
            const int line = cur().line;
            ++i_;
            e = binary("and", std::move(e), parse_not(), line);
        }
        return e;
    }

    ExprPtr parse_not() {
        DepthGuard guard(*this);
        if (at_name("not")) {
            auto n = node(Expr::Kind::Not, cur().line);
            ++i_;
            adopt(*n, parse_not());
            return n;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        ExprPtr e = parse_math1();
        while (true) {
            const int line = cur().line;
            std::string op;
            if (cur().kind == TK::Op &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                 cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
                op = cur().text;
                ++i_;
            } else if (at_name("in")) {
                op = "in";
                ++i_;
            } else if (at_name("not") && peek().kind == TK::Name && peek().text == "in") {
                op = "not in";
                i_ += 2;
            } else {
                return e;
            }
            e = binary(op, std::move(e), parse_math1(), line);
        }
    }

    ExprPtr parse_math1() {
        ExprPtr e = parse_concat();
        while (at_op("+") || at_op("-")) {
            const int line = cur().line;
            std::string op = t_[i_++].text;
            e = binary(op, std::move(e), parse_concat(), line);
        }
        return e;
    }

    ExprPtr parse_concat() {
        ExprPtr e = parse_math2();
        while (at_op("~")) {
            const int line = cur().line;
            ++i_;
            e = binary("~", std::move(e), parse_math2(), line);
        }
        return e;
    }

    ExprPtr parse_math2() {
        ExprPtr e = parse_pow();
        while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
            const int line = cur().line;
            std::string op = t_[i_++].text;
            e = binary(op, std::move(e), parse_pow(), line);
        }
        return e;
    }

    ExprPtr parse_pow() {
        ExprPtr e = parse_unary(true);
        while (at_op("**")) {
            const int line = cur().line;
            ++i_;
            e = binary("**", std::move(e), parse_unary(true), line);
        }
        return e;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        ExprPtr e;
        if (at_op("-") || at_op("+")) {
            e = node(at_op("-") ? Expr::Kind::Neg : Expr::Kind::Pos, cur().line);
            ++i_;
            adopt(*e, parse_unary(false));
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr parse_primary() {
        DepthGuard guard(*this);
        const Token& t = cur();
        const int line = t.line;
        switch (t.kind) {
            case TK::Name: {
                ++i_;
                if (t.text == "true" || t.text == "True") return literal(Value(true), line);
                if (t.text == "false" || t.text == "False") return literal(Value(false), line);
                if (t.text == "none" || t.text == "None") return literal(Value::none(), line);
                static const char* const reserved[] = {"and", "or", "not", "in",
                                                       "is",  "if", "else"};
                for (const char* r : reserved)
                    if (t.text == r) {
                        --i_;
                        fail("expression", "unexpected '" + t.text + "'");
                    }
                auto n = node(Expr::Kind::Name, line);
                n->name = t.text;
                return n;
            }
            case TK::String: {
                std::string s;
                while (cur().kind == TK::String) s += t_[i_++].text;
                return literal(Value(std::move(s)), line);
            }
            case TK::Int:
                ++i_;
                return literal(Value(t.int_value), line);
            case TK::Float:
                ++i_;
                return literal(Value(t.float_value), line);
            case TK::Op:
                if (t.text == "(") {
                    ++i_;
                    if (at_op(")")) {
                        ++i_;
                        return node(Expr::Kind::TupleLit, line);
                    }
                    ExprPtr e = parse_tuple(true);
                    expect_op(")", "expression");
                    return e;
                }
                if (t.text == "[") {
                    ++i_;
                    auto l = node(Expr::Kind::ListLit, line);
                    while (!at_op("]")) {
                        adopt(*l, parse_expression(true));
                        if (!at_op(",")) break;
                        ++i_;
                    }
                    expect_op("]", "list");
                    return l;
                }
                if (t.text == "{") {
                    ++i_;
                    auto d = node(Expr::Kind::DictLit, line);
                    while (!at_op("}")) {
                        adopt(*d, parse_expression(true));
                        expect_op(":", "dict");
                        adopt(*d, parse_expression(true));
                        if (!at_op(",")) break;
                        ++i_;
                    }
                    expect_op("}", "dict");
                    return d;
                }
                break;
            default:
                break;
        }
        fail("expression", "unexpected " + describe(t));
    }

    ExprPtr literal(Value v, int line) {
        auto n = node(Expr::Kind::Literal, line);
        n->value = std::move(v);
        return n;
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            const int line = cur().line;
            if (at_op(".")) {
                ++i_;
                if (cur().kind == TK::Int) {
                    auto g = node(Expr::Kind::GetItem, line);
                    adopt(*g, std::move(e));
                    adopt(*g, literal(Value(t_[i_++].int_value), line));
                    e = std::move(g);
                    continue;
                }
                auto g = node(Expr::Kind::GetAttr, line);
                g->name = expect_name("attribute");
                adopt(*g, std::move(e));
                e = std::move(g);
            } else if (at_op("[")) {
                ++i_;
                e = parse_subscript(std::move(e), line);
            } else if (at_op("(")) {
                e = parse_call(std::move(e), line);
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr obj, int line) {
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
            if (!at_op(":") && !at_op("]")) parts[k] = parse_expression(true);
            if (k < 2 && at_op(":")) {
                ++i_;
                slice = true;
                continue;
            }
            break;
        }
        expect_op("]", "subscript");
        auto g = node(slice ? Expr::Kind::Slice : Expr::Kind::GetItem, line);
        adopt(*g, std::move(obj));
        if (!slice) {
            if (!parts[0]) fail("subscript", "empty subscript");
            adopt(*g, std::move(parts[0]));
        } else {
            for (auto& p : parts) adopt(*g, std::move(p));
        }
        return g;
    }

    void parse_args(Expr& owner, const char* construct) {
        CallArgs& args = owner.args;
        expect_op("(", construct);
        while (!at_op(")")) {
            if (at_op("*") || at_op("**")) fail(construct, "*args and **kwargs are not supported");
            if (cur().kind == TK::Name && peek().kind == TK::Op && peek().text == "=") {
                std::string name = t_[i_].text;
                i_ += 2;
                args.keyword.emplace_back(std::move(name), deepen(owner, parse_expression(true)));
            } else {
                if (!args.keyword.empty()) fail(construct, "positional argument after keyword");
                args.positional.push_back(deepen(owner, parse_expression(true)));
            }
            if (!at_op(",")) break;
            ++i_;
        }
        expect_op(")", construct);
    }

    ExprPtr parse_call(ExprPtr callee, int line) {
        auto c = node(Expr::Kind::Call, line);
        adopt(*c, std::move(callee));
        parse_args(*c, "call");
        return c;
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        while (true) {
            if (at_op("|")) {
                e = parse_filters(std::move(e));
            } else if (at_name("is")) {
                e = parse_test(std::move(e));
            } else if (at_op("(")) {
                e = parse_call(std::move(e), cur().line);
            } else {
                return e;
            }
        }
    }

    // `| f(args) | g ...` applied to e (null: the body of a filter block).
    ExprPtr parse_filters(ExprPtr e) {
        while (at_op("|")) {
            ++i_;
            e = parse_one_filter(std::move(e));
        }
        return e;
    }

    ExprPtr parse_filter_chain(ExprPtr e) {
        e = parse_one_filter(std::move(e));
        return parse_filters(std::move(e));
    }

    ExprPtr parse_one_filter(ExprPtr e) {
        const int line = cur().line;
        auto f = node(Expr::Kind::Filter, line);
        f->name = expect_name("filter");
        while (at_op(".")) {
            ++i_;
            f->name += "." + expect_name("filter");
        }
        adopt(*f, std::move(e));
        if (at_op("(")) parse_args(*f, "filter");
        return f;
    }

    ExprPtr parse_test(ExprPtr e) {
        const int line = cur().line;
        ++i_;  // is
        auto t = node(Expr::Kind::Test, line);
        if (at_name("not")) {
            ++i_;
            t->negated = true;
        }
        t->name = expect_name("test");
        adopt(*t, std::move(e));
        if (at_op("(")) {
            parse_args(*t, "test");
        } else if ((cur().kind == TK::Name || cur().kind == TK::String || cur().kind == TK::Int ||
                    cur().kind == TK::Float || at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and") && !at_name("is")) {
            // `x is divisibleby 3`: one argument without parentheses.
            t->args.positional.push_back(deepen(*t, parse_postfix(parse_primary())));
        }
        return t;
    }

    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;
};

}  // namespace

Program parse(std::string_view source, const LexOptions& options) {
    return Parser(lex(source, options)).run();
}

}  // namespace ferrox::tmpl
