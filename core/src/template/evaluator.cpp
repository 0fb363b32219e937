#include "template/evaluator.h"

#include <cmath>
#include <memory>

#include "template/builtins.h"

namespace ferrox::tmpl {
namespace {

// One scope: a for-loop iteration, a macro call or the template itself.
// jinja2 scoping: `set` writes the innermost scope; reads walk outwards.
struct Frame {
    std::shared_ptr<Frame> parent;
    std::vector<std::pair<std::string, Value>> vars;

    const Value* find(const std::string& name) const {
        for (const Frame* f = this; f; f = f->parent.get())
            for (const auto& [k, v] : f->vars)
                if (k == name) return &v;
        return nullptr;
    }
    void set(const std::string& name, Value v) {
        for (auto& [k, old] : vars)
            if (k == name) {
                old = std::move(v);
                return;
            }
        vars.emplace_back(name, std::move(v));
    }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

std::string construct_of(const Expr& e) {
    switch (e.kind) {
        case Expr::Kind::Filter:
            return "filter '" + e.name + "'";
        case Expr::Kind::Test:
            return "test '" + e.name + "'";
        case Expr::Kind::Call:
            if (e.items[0]->kind == Expr::Kind::Name) return "call to '" + e.items[0]->name + "'";
            if (e.items[0]->kind == Expr::Kind::GetAttr)
                return "call to method '" + e.items[0]->name + "'";
            return "call";
        case Expr::Kind::Binary:
            return "operator '" + e.name + "'";
        case Expr::Kind::GetAttr:
            return "attribute '" + e.name + "'";
        case Expr::Kind::GetItem:
            return "subscript";
        case Expr::Kind::Slice:
            return "slice";
        case Expr::Kind::Name:
            return "variable '" + e.name + "'";
        default:
            return "expression";
    }
}

std::string construct_of(const Stmt& s) {
    switch (s.kind) {
        case Stmt::Kind::If:
            return "if";
        case Stmt::Kind::For:
            return "for";
        case Stmt::Kind::Set:
        case Stmt::Kind::SetBlock:
            return "set";
        case Stmt::Kind::Macro:
            return "macro";
        case Stmt::Kind::CallBlock:
            return "call";
        case Stmt::Kind::FilterBlock:
            return "filter";
        case Stmt::Kind::Output:
            return "output";
        default:
            return "statement";
    }
}

[[noreturn]] void undefined_error(const Value& v) {
    throw ValueError(v.undefined_name().empty() ? std::string("value is undefined")
                                                : v.undefined_name());
}

// Python ints are unbounded; ours stop at 64 bits and say so.
void overflow_check(bool overflow) {
    if (overflow) throw ValueError("integer overflow (beyond 64 bits)");
}

Value arithmetic_plain(const std::string& op, const Value& a, const Value& b, size_t max_output);

// Text and where client text lies in it, as rendering builds it.
struct Out {
    std::string text;
    ClientSpans client;
};

void add_span(ClientSpans& spans, size_t begin, size_t end) {
    if (begin == end) return;
    if (!spans.empty() && spans.back().end == begin)
        spans.back().end = end;
    else
        spans.push_back({begin, end});
}

// Appends `text` whose client spans are `spans` (relative to text).
void append_marked(Out& out, const std::string& text, const ClientSpans& spans) {
    const size_t base = out.text.size();
    for (const ClientSpan& sp : spans) add_span(out.client, base + sp.begin, base + sp.end);
    out.text += text;
}

Value to_value(Out&& out) {
    if (out.client.empty()) return Value(std::move(out.text));
    return Value::client_string(std::move(out.text), std::move(out.client));
}

// str(v) with its provenance: a string keeps its spans; anything else printed
// from client data is client text as a whole.
Value as_text(const Value& v) {
    if (v.is_string()) return v;
    std::string s = py_str(v);
    if (!v.from_client()) return Value(std::move(s));
    const size_t n = s.size();
    return Value::client_string(std::move(s), n ? ClientSpans{{0, n}} : ClientSpans{});
}

Value concat(const Value& a, const Value& b) {
    check_string_length(a.as_string().size() + b.as_string().size());
    if (!a.from_client() && !b.from_client()) return Value(a.as_string() + b.as_string());
    Out out;
    append_marked(out, a.as_string(), a.client_spans());
    append_marked(out, b.as_string(), b.client_spans());
    Value r = to_value(std::move(out));
    return r.from_client() ? r : r.marked_client();
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, size_t max_output) {
    Value r = arithmetic_plain(op, a, b, max_output);
    if (op == "+" && a.is_string() && b.is_string() && !a.is_markup() && !b.is_markup())
        return concat(a, b);
    // Numbers computed from client numbers, repetitions of client strings,
    // markup-escaped client text: client as a whole (lists keep their elements').
    if ((a.from_client() || b.from_client()) && !r.is_list()) return r.as_client();
    return r;
}

Value arithmetic_plain(const std::string& op, const Value& a, const Value& b, size_t max_output) {
    if (a.is_undefined()) undefined_error(a);
    if (b.is_undefined()) undefined_error(b);
    auto unsupported = [&]() -> Value {
        throw ValueError("unsupported operand type(s) for " + op + ": '" + a.type_name() +
                         "' and '" + b.type_name() + "'");
    };
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            if (a.as_string().size() + b.as_string().size() > max_output)
                throw ValueError("string longer than the output limit (max_output " +
                                 std::to_string(max_output) + " bytes)");
            if (!a.is_markup() && !b.is_markup()) return Value();  // concat() builds it
            if (a.is_markup() || b.is_markup())  // markupsafe escapes the plain side
                return Value::markup((a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                                     (b.is_markup() ? b.as_string() : html_escape(b.as_string())));
            return Value(a.as_string() + b.as_string());
        }
        if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator()) {
            List r = a.as_list();
            r.insert(r.end(), b.as_list().begin(), b.as_list().end());
            return Value(std::move(r), a.is_tuple());
        }
    }
    if (op == "*") {
        const Value* seq =
            a.is_string() || a.is_list() ? &a : (b.is_string() || b.is_list() ? &b : nullptr);
        const Value* count = seq == &a ? &b : &a;
        if (seq && (count->is_int() || count->is_bool())) {
            const int64_t n = std::max<int64_t>(0, count->as_int());
            const size_t unit = seq->is_string() ? seq->as_string().size() : seq->as_list().size();
            if (unit && static_cast<uint64_t>(n) > max_output / unit)
                throw ValueError("repetition longer than the output limit");
            if (seq->is_string()) {
                std::string r;
                for (int64_t i = 0; i < n; ++i) r += seq->as_string();
                return Value(std::move(r));
            }
            List r;
            for (int64_t i = 0; i < n; ++i)
                r.insert(r.end(), seq->as_list().begin(), seq->as_list().end());
            return Value(std::move(r));
        }
    }
    if (!a.is_number() || !b.is_number()) return unsupported();
    const bool ints = !a.is_float() && !b.is_float();
    if (op == "/") {
        if (b.as_float() == 0) throw ValueError("division by zero");
        return Value(a.as_float() / b.as_float());
    }
    if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        int64_t r = 0;
        if (op == "+") return overflow_check(__builtin_add_overflow(x, y, &r)), Value(r);
        if (op == "-") return overflow_check(__builtin_sub_overflow(x, y, &r)), Value(r);
        if (op == "*") return overflow_check(__builtin_mul_overflow(x, y, &r)), Value(r);
        if (op == "//" || op == "%") {
            if (y == 0) throw ValueError("integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) throw ValueError("integer overflow (beyond 64 bits)");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
            return Value(op == "//" ? q : m);
        }
        if (op == "**") {
            if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
            int64_t result = 1;
            for (int64_t i = 0; i < y; ++i) {
                if (__builtin_mul_overflow(result, x, &result))
                    throw ValueError("integer overflow (beyond 64 bits)");
                if (result == 0 || result == 1) break;
            }
            return Value(result);
        }
    }
    const double x = a.as_float(), y = b.as_float();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") return Value(std::pow(x, y));
    if (op == "//" || op == "%") {
        if (y == 0) throw ValueError("float divmod()");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        if (op == "%") return Value(m);
        // CPython's float floor division: (x - x % y) / y, rounded to the nearest integer.
        double q = (x - m) / y;
        const double fq = std::floor(q);
        return Value(q - fq > 0.5 ? fq + 1 : fq);
    }
    return unsupported();
}

class Evaluator {
  public:
    Evaluator(const RenderLimits& limits, RenderBudget& budget)
        : limits_(limits), budget_(budget) {}
    // `set ns.x = ns` (or a value that holds ns) makes a namespace own
    // itself: a reference cycle that would outlive the render. Emptying every
    // namespace that was assigned to, once the render is over, breaks them.
    ~Evaluator() {
        for (const auto& ns : assigned_namespaces_) {
            auto doomed = std::move(ns->items);
            ns->items.clear();
        }
    }
    Evaluator(const Evaluator&) = delete;
    Evaluator& operator=(const Evaluator&) = delete;

    MarkedText run(const Program& p, const Dict& variables) {
        auto root = std::make_shared<Frame>();
        Dict globals;
        add_globals(globals);
        for (auto& [k, v] : globals.items) root->set(k.as_string(), v);
        for (auto& [k, v] : variables.items)
            if (k.is_string()) root->set(k.as_string(), v);
        Out out;
        exec_body(p.body, root, out);
        return {std::move(out.text), std::move(out.client)};
    }

  private:
    void step(int line, const char* what) {
        if (++budget_.steps > budget_.max_steps)
            throw TemplateError(line, what,
                                "the template ran more than max_steps " +
                                    std::to_string(limits_.max_steps) +
                                    " steps (an endless loop?)");
    }

    // Evaluation nests on the stack: statements in statements, expressions in
    // expressions, macro bodies in macro calls. The parser bounds one template's
    // nesting; this bounds it with recursion too.
    struct Nest {
        Evaluator& ev;
        Nest(Evaluator& e, int line, const char* what) : ev(e) {
            if (++ev.eval_depth_ > ev.limits_.max_eval_depth) {
                --ev.eval_depth_;
                throw TemplateError(line, what,
                                    "evaluation nested deeper than max_eval_depth " +
                                        std::to_string(ev.limits_.max_eval_depth));
            }
        }
        ~Nest() { --ev.eval_depth_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;
    };

    void append_literal(Out& out, const std::string& text, int line) {
        if (out.text.size() + text.size() > limits_.max_output)
            throw TemplateError(
                line, "output",
                "output larger than max_output " + std::to_string(limits_.max_output) + " bytes");
        out.text += text;
    }

    void append(Out& out, const Value& v, int line) {
        const Value text = as_text(v);
        if (out.text.size() + text.as_string().size() > limits_.max_output)
            throw TemplateError(
                line, "output",
                "output larger than max_output " + std::to_string(limits_.max_output) + " bytes");
        append_marked(out, text.as_string(), text.client_spans());
    }

    Flow exec_body(const Body& body, const FramePtr& frame, Out& out) {
        for (const StmtPtr& s : body) {
            const Flow f = exec(*s, frame, out);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

    Flow exec(const Stmt& s, const FramePtr& frame, Out& out) {
        step(s.line, "statement");
        const Nest nest(*this, s.line, "statement");
        try {
            return exec_inner(s, frame, out);
        } catch (const ValueError& e) {
            throw TemplateError(s.line, construct_of(s), e.what());
        }
    }

    Flow exec_inner(const Stmt& s, const FramePtr& frame, Out& out) {
        switch (s.kind) {
            case Stmt::Kind::Text:
                append_literal(out, s.text, s.line);
                return Flow::Normal;
            case Stmt::Kind::Output:
                append(out, eval(*s.expr, frame), s.line);
                return Flow::Normal;
            case Stmt::Kind::If:
                for (size_t i = 0; i < s.conditions.size(); ++i)
                    if (eval(*s.conditions[i], frame).truthy())
                        return exec_body(s.bodies[i], frame, out);
                return exec_body(s.else_body, frame, out);
            case Stmt::Kind::For:
                return exec_for(s, frame, out);
            case Stmt::Kind::Set: {
                Value v = eval(*s.expr, frame);
                if (!s.attr.empty()) {
                    const Value* target = frame->find(s.targets[0]);
                    if (!target || !target->is_dict() || !target->as_dict().is_namespace)
                        throw ValueError("cannot assign attribute on non-namespace object");
                    // A namespace carries values across loop iterations, so it is
                    // where nesting could grow without bound (`{% set ns.x = [ns.x] %}`).
                    if (nesting_depth(v, kMaxValueDepth) >= kMaxValueDepth)
                        throw ValueError(s.targets[0] + "." + s.attr +
                                         ": the value nests deeper than " +
                                         std::to_string(kMaxValueDepth) + " levels");
                    target->as_dict().set(Value(s.attr), std::move(v));
                    assigned_namespaces_.push_back(target->dict_ptr());
                } else {
                    assign(s.targets, std::move(v), *frame);
                }
                return Flow::Normal;
            }
            case Stmt::Kind::SetBlock: {
                Out text;
                exec_body(s.body, frame, text);
                Value v = to_value(std::move(text));
                if (s.expr) v = apply_filters(*s.expr, std::move(v), frame);
                frame->set(s.targets[0], std::move(v));
                return Flow::Normal;
            }
            case Stmt::Kind::Macro:
                frame->set(s.name, make_macro(s.name, s.params, s.body, frame, nullptr));
                return Flow::Normal;
            case Stmt::Kind::CallBlock: {
                Value caller = make_macro("caller", s.params, s.body, frame, nullptr);
                const Expr& call = *s.expr;
                Value callee = eval(*call.items[0], frame);
                if (!callee.is_callable())
                    throw ValueError("the call block's target is not callable");
                Args args = eval_args(call.args, frame);
                args.keyword.emplace_back("caller", caller);
                append(out, invoke(callee, args, call.line), s.line);
                return Flow::Normal;
            }
            case Stmt::Kind::FilterBlock: {
                Out text;
                exec_body(s.body, frame, text);
                append(out, apply_filters(*s.expr, to_value(std::move(text)), frame), s.line);
                return Flow::Normal;
            }
            case Stmt::Kind::Break:
                return Flow::Break;
            case Stmt::Kind::Continue:
                return Flow::Continue;
            case Stmt::Kind::Generation:
                return exec_body(s.body, frame, out);
        }
        return Flow::Normal;
    }

    void assign(const std::vector<std::string>& targets, Value v, Frame& frame) {
        if (targets.size() == 1) {
            frame.set(targets[0], std::move(v));
            return;
        }
        List items = iterate_tracked(v);
        if (items.size() != targets.size())
            throw ValueError("cannot unpack " + std::to_string(items.size()) + " values into " +
                             std::to_string(targets.size()) + " names");
        for (size_t i = 0; i < targets.size(); ++i) frame.set(targets[i], std::move(items[i]));
    }

    // A for loop's items: a client string's characters are client text.
    static List iterate_tracked(const Value& v) {
        List items = iterate(v);
        if (v.is_string() && v.from_client())
            for (Value& item : items) item = item.as_client();
        return items;
    }

    Flow exec_for(const Stmt& s, const FramePtr& frame, Out& out) {
        Value seq = eval(*s.expr, frame);
        if (seq.is_none() || seq.is_number() || seq.is_callable())
            throw ValueError("'" + seq.type_name() + "' object is not iterable");
        List all = iterate_tracked(seq);
        if (s.cond) {  // `for x in xs if cond`: the filter runs first; loop.* counts what passes
            List kept;
            for (Value& item : all) {
                auto f = std::make_shared<Frame>(Frame{frame, {}});
                assign(s.targets, item, *f);
                if (eval(*s.cond, f).truthy()) kept.push_back(std::move(item));
            }
            all = std::move(kept);
        }
        const auto n = static_cast<int64_t>(all.size());
        // Counts of a client list are client data (conservatively: they print as digits).
        const bool client = seq.from_client();
        auto counted = [client](Value v) { return client ? v.marked_client() : v; };
        for (int64_t i = 0; i < n; ++i) {
            step(s.line, "for");
            auto f = std::make_shared<Frame>(Frame{frame, {}});
            auto loop = std::make_shared<Dict>();
            loop->is_namespace = true;
            loop->add_new(Value("index"), counted(Value(i + 1)));
            loop->add_new(Value("index0"), counted(Value(i)));
            loop->add_new(Value("revindex"), counted(Value(n - i)));
            loop->add_new(Value("revindex0"), counted(Value(n - i - 1)));
            loop->add_new(Value("first"), counted(Value(i == 0)));
            loop->add_new(Value("last"), counted(Value(i == n - 1)));
            loop->add_new(Value("length"), counted(Value(n)));
            loop->add_new(Value("depth"), Value(1));
            loop->add_new(Value("depth0"), Value(0));
            loop->add_new(Value("previtem"), i > 0 ? all[static_cast<size_t>(i - 1)]
                                                   : Value::undefined("'previtem' is undefined"));
            loop->add_new(Value("nextitem"), i + 1 < n
                                                 ? all[static_cast<size_t>(i + 1)]
                                                 : Value::undefined("'nextitem' is undefined"));
            loop->add_new(Value("cycle"), make_callable("cycle", [i](Args& a) -> Value {
                              if (a.positional.empty())
                                  throw ValueError("no items for cycling given");
                              return a.positional[static_cast<size_t>(i) % a.positional.size()];
                          }));
            f->set("loop", Value(loop));
            assign(s.targets, all[static_cast<size_t>(i)], *f);
            if (exec_body(s.body, f, out) == Flow::Break) break;
        }
        if (n == 0) return exec_body(s.else_body, frame, out);
        return Flow::Normal;
    }

    Value make_macro(const std::string& name, const std::vector<MacroParam>& params,
                     const Body& body, const FramePtr& defined_in, const void*) {
        // The frame holds the macro and the macro needs the frame: an owning
        // capture would be a reference cycle (a leak). The evaluator keeps the
        // frame alive for the whole render; the macro holds a non-owning pointer.
        keep_alive_.push_back(defined_in);
        FramePtr scope(FramePtr(), defined_in.get());
        Value macro = make_callable(name, [this, name, &params, &body, scope](Args& args) -> Value {
            auto f = std::make_shared<Frame>(Frame{scope, {}});
            if (args.positional.size() > params.size())
                throw ValueError("macro '" + name + "' takes not more than " +
                                 std::to_string(params.size()) + " argument(s)");
            std::vector<bool> bound(params.size(), false);
            for (size_t i = 0; i < args.positional.size(); ++i) {
                f->set(params[i].name, args.positional[i]);
                bound[i] = true;
            }
            for (auto& [k, v] : args.keyword) {
                bool found = false;
                for (size_t i = 0; i < params.size(); ++i)
                    if (params[i].name == k) {
                        f->set(k, v);
                        bound[i] = found = true;
                    }
                if (!found && k == "caller") {
                    f->set(k, v);
                    found = true;
                }
                if (!found)
                    throw ValueError("macro '" + name + "' takes no keyword argument '" + k + "'");
            }
            for (size_t i = 0; i < params.size(); ++i)
                if (!bound[i])
                    f->set(params[i].name,
                           params[i].default_value
                               ? eval(*params[i].default_value, f)
                               : Value::undefined("'" + params[i].name + "' is undefined"));
            Out text;
            exec_body(body, f, text);
            return to_value(std::move(text));
        });
        macro.as_callable().is_macro = true;
        return macro;
    }

    Value invoke(const Value& callee, Args& args, int line) {
        if (++call_depth_ > limits_.max_call_depth) {
            --call_depth_;
            throw TemplateError(line, "call to '" + callee.as_callable().name + "'",
                                "calls nested deeper than " +
                                    std::to_string(limits_.max_call_depth) +
                                    " (endless recursion?)");
        }
        struct Restore {
            int& d;
            ~Restore() { --d; }
        } restore{call_depth_};
        return callee.as_callable().call(args);
    }

    Args eval_args(const CallArgs& ca, const FramePtr& frame) {
        Args args;
        for (const ExprPtr& e : ca.positional) args.positional.push_back(eval(*e, frame));
        for (const auto& [k, e] : ca.keyword) args.keyword.emplace_back(k, eval(*e, frame));
        return args;
    }

    // A filter chain whose innermost operand is null (filter blocks, block sets).
    Value apply_filters(const Expr& chain, Value v, const FramePtr& frame) {
        if (chain.items[0]) v = apply_filters(*chain.items[0], std::move(v), frame);
        Args args = eval_args(chain.args, frame);
        return filter(chain.name, v, args);
    }

    static bool any_client(const Args& args) {
        for (const Value& v : args.positional)
            if (v.from_client()) return true;
        for (const auto& [k, v] : args.keyword)
            if (v.from_client()) return true;
        return false;
    }

    // A filter, and the provenance of its result: client text in, client
    // text out (as a whole), except where the filter only picks among the
    // values it was given (they keep their own), or where the result's spans
    // can be computed exactly (join, trim: templates build prompts with them).
    Value filter(const std::string& name, const Value& operand, const Args& args) {
        Value r = call_filter(name, operand, args);
        const bool client_args = any_client(args);
        if (!operand.from_client() && !client_args) return r;
        static const char* const picking[] = {
            "first",  "last",       "list",       "sort",     "unique", "reverse", "select",
            "reject", "selectattr", "rejectattr", "dictsort", "items",  "min",     "max"};
        if (name == "default" || name == "d") return r;  // the operand or the default, as is
        if (operand.is_list() || operand.is_dict())
            for (const char* p : picking)
                if (name == p) return r;
        if (name == "join" && operand.is_list() && !args.has(1, "attribute"))
            return joined_spans(r, operand, args);
        if (name == "string" && operand.is_string() && r.as_string() == operand.as_string())
            return Value::client_string(r.as_string(), operand.client_spans()).marked_client();
        if (name == "trim" && operand.is_string() && !client_args && !args.has(0, "chars"))
            return trimmed_spans(r, operand);
        return r.as_client();
    }

    // `items | join(sep)`: each item's spans at its place in the result.
    static Value joined_spans(const Value& joined, const Value& items, const Args& args) {
        const Value sep = as_text(args.get(0, "d", Value("")));
        Out out;
        bool first = true;
        for (const Value& item : items.as_list()) {
            if (!first) append_marked(out, sep.as_string(), sep.client_spans());
            first = false;
            const Value piece = as_text(item);
            append_marked(out, piece.as_string(), piece.client_spans());
        }
        if (out.text != joined.as_string())
            return joined.as_client();  // not as expected: all of it
        Value r = to_value(std::move(out));
        return r.from_client() ? r : r.marked_client();
    }

    // `s | trim`: the kept part of s, with its spans clipped to it.
    static Value trimmed_spans(const Value& trimmed, const Value& s) {
        const std::string& text = s.as_string();
        const size_t n = trimmed.as_string().size();
        const size_t lead = n ? text.find_first_not_of(" \t\n\r\v\f") : 0;
        if (lead == std::string::npos || text.compare(lead, n, trimmed.as_string()) != 0)
            return trimmed.as_client();
        ClientSpans spans;
        for (const ClientSpan& sp : s.client_spans()) {
            const size_t b = std::max(sp.begin, lead), e = std::min(sp.end, lead + n);
            if (b < e) spans.push_back({b - lead, e - lead});
        }
        return spans.empty() ? trimmed.marked_client()
                             : Value::client_string(trimmed.as_string(), std::move(spans));
    }

    Value eval(const Expr& e, const FramePtr& frame) {
        step(e.line, "expression");
        const Nest nest(*this, e.line, "expression");
        try {
            return eval_inner(e, frame);
        } catch (const ValueError& err) {
            throw TemplateError(e.line, construct_of(e), err.what());
        }
    }

    Value eval_inner(const Expr& e, const FramePtr& frame) {
        switch (e.kind) {
            case Expr::Kind::Literal:
                return e.value;
            case Expr::Kind::Name: {
                const Value* v = frame->find(e.name);
                return v ? *v : Value::undefined("'" + e.name + "' is undefined");
            }
            case Expr::Kind::ListLit:
            case Expr::Kind::TupleLit: {
                List l;
                for (const ExprPtr& item : e.items) l.push_back(eval(*item, frame));
                return Value(std::move(l), e.kind == Expr::Kind::TupleLit);
            }
            case Expr::Kind::DictLit: {
                Value d = make_dict();
                for (size_t i = 0; i + 1 < e.items.size(); i += 2)
                    d.as_dict().set(eval(*e.items[i], frame), eval(*e.items[i + 1], frame));
                return d;
            }
            case Expr::Kind::GetAttr: {
                Value obj = eval(*e.items[0], frame);
                if (obj.is_undefined()) undefined_error(obj);
                return of_string(obj, get_attribute(obj, e.name));
            }
            case Expr::Kind::GetItem: {
                Value obj = eval(*e.items[0], frame);
                if (obj.is_undefined()) undefined_error(obj);
                return of_string(obj, get_item(obj, eval(*e.items[1], frame)));
            }
            case Expr::Kind::Slice: {
                Value obj = eval(*e.items[0], frame);
                if (obj.is_undefined()) undefined_error(obj);
                auto part = [&](size_t k) {
                    return e.items[k] ? eval(*e.items[k], frame) : Value::none();
                };
                return of_string(obj, slice(obj, part(1), part(2), part(3)));
            }
            case Expr::Kind::Call:
                return eval_call(e, frame);
            case Expr::Kind::Filter: {
                Value v = eval(*e.items[0], frame);
                Args args = eval_args(e.args, frame);
                return filter(e.name, v, args);
            }
            case Expr::Kind::Test: {
                Value v = eval(*e.items[0], frame);
                Args args = eval_args(e.args, frame);
                return derived(Value(call_test(e.name, v, args) != e.negated),
                               v.from_client() || any_client(args));
            }
            case Expr::Kind::Not: {
                const Value v = eval(*e.items[0], frame);
                return derived(Value(!v.truthy()), v.from_client());
            }
            case Expr::Kind::Neg:
            case Expr::Kind::Pos: {
                Value v = eval(*e.items[0], frame);
                if (v.is_undefined()) undefined_error(v);
                if (!v.is_number())
                    throw ValueError("bad operand type for unary " +
                                     std::string(e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" +
                                     v.type_name() + "'");
                if (e.kind == Expr::Kind::Pos)
                    return derived(v.is_bool() ? Value(v.as_int()) : v, v.from_client());
                if (v.is_float()) return derived(Value(-v.as_float()), v.from_client());
                if (v.as_int() == INT64_MIN) throw ValueError("integer overflow (beyond 64 bits)");
                return derived(Value(-v.as_int()), v.from_client());
            }
            case Expr::Kind::Cond:
                if (eval(*e.items[0], frame).truthy()) return eval(*e.items[1], frame);
                return e.items[2] ? eval(*e.items[2], frame) : Value::undefined();
            case Expr::Kind::Binary:
                return eval_binary(e, frame);
        }
        return Value();
    }

    Value eval_binary(const Expr& e, const FramePtr& frame) {
        const std::string& op = e.name;
        if (op == "and") {
            Value a = eval(*e.items[0], frame);
            return a.truthy() ? eval(*e.items[1], frame) : a;
        }
        if (op == "or") {
            Value a = eval(*e.items[0], frame);
            return a.truthy() ? a : eval(*e.items[1], frame);
        }
        Value a = eval(*e.items[0], frame);
        Value b = eval(*e.items[1], frame);
        if (op == "~") return concat(as_text(a), as_text(b));
        const bool client = a.from_client() || b.from_client();
        if (op == "==") return derived(Value(py_equal(a, b)), client);
        if (op == "!=") return derived(Value(!py_equal(a, b)), client);
        if (op == "<" || op == ">" || op == "<=" || op == ">=") {
            if (a.is_undefined()) undefined_error(a);
            if (b.is_undefined()) undefined_error(b);
            if (op == "<") return derived(Value(py_less(a, b)), client);
            if (op == ">") return derived(Value(py_less(b, a)), client);
            if (op == "<=") return derived(Value(py_less(a, b) || py_equal(a, b)), client);
            return derived(Value(py_less(b, a) || py_equal(a, b)), client);
        }
        if (op == "in") return derived(Value(contains(b, a)), client);
        if (op == "not in") return derived(Value(!contains(b, a)), client);
        return arithmetic(op, a, b, limits_.max_output);
    }

    static Value derived(Value v, bool client) { return client ? v.marked_client() : v; }

    // What a string's attribute, item or slice gives is client text if the string is.
    static Value of_string(const Value& obj, Value r) {
        return obj.is_string() && obj.from_client() ? r.as_client() : r;
    }

    // A call: a macro's result carries its own provenance; a builtin's (a method
    // of a client string, range over a client number...) is client text when any
    // input is, except the dict methods that hand back stored values as they are.
    Value eval_call(const Expr& e, const FramePtr& frame) {
        Value callee, object;
        const bool method = e.items[0]->kind == Expr::Kind::GetAttr;
        if (method) {
            object = eval(*e.items[0]->items[0], frame);
            if (object.is_undefined()) undefined_error(object);
            callee = of_string(object, get_attribute(object, e.items[0]->name));
        } else {
            callee = eval(*e.items[0], frame);
        }
        if (callee.is_undefined()) undefined_error(callee);
        if (!callee.is_callable())
            throw ValueError("'" + callee.type_name() + "' object is not callable");
        Args args = eval_args(e.args, frame);
        const bool client = object.from_client() || any_client(args);
        Value r = invoke(callee, args, e.line);
        if (!client || callee.as_callable().is_macro) return r;
        const std::string& name = e.items[0]->name;
        if (method && object.is_dict() &&
            (name == "get" || name == "items" || name == "keys" || name == "values"))
            return r;
        return r.as_client();
    }

    const RenderLimits& limits_;
    RenderBudget& budget_;
    int eval_depth_ = 0;
    std::vector<FramePtr> keep_alive_;  // frames macros were defined in
    std::vector<std::shared_ptr<Dict>> assigned_namespaces_;
    int call_depth_ = 0;
};

}  // namespace

MarkedText render_marked(const Program& program, const Dict& variables,
                         const RenderLimits& limits) {
    RenderBudget budget;
    budget.max_steps = limits.max_steps;
    budget.max_bytes = limits.max_memory;
    budget.max_string = limits.max_output;
    const BudgetScope scope(budget);
    return Evaluator(limits, budget).run(program, variables);
}

std::string render(const Program& program, const Dict& variables, const RenderLimits& limits) {
    return render_marked(program, variables, limits).text;
}

}  // namespace ferrox::tmpl
