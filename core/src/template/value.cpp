#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

namespace ferrox::tmpl {

namespace {

thread_local RenderBudget* t_budget = nullptr;

// Where every recursive walk of a value (repr, tojson, ==, <) stops, as
// Python's recursion limit stops it, instead of overflowing the stack.
void check_value_depth(size_t depth) {
    if (depth > kMaxValueDepth)
        throw ValueError("maximum recursion depth exceeded (values nest deeper than " +
                         std::to_string(kMaxValueDepth) + ")");
}

}  // namespace

void check_string_length(size_t length) {
    const size_t limit = t_budget ? t_budget->max_string : kDefaultMaxOutput;
    if (length > limit)
        throw ValueError("string longer than the output limit (max_output " +
                         std::to_string(limit) + " bytes)");
}

void check_piece_count(size_t count) {
    if (count > kMaxStringPieces)
        throw ValueError("a string cut into more than " + std::to_string(kMaxStringPieces) +
                         " pieces");
}

void charge_steps(uint64_t work) {
    if (!t_budget) return;
    t_budget->steps += work;
    if (t_budget->steps > t_budget->max_steps)
        throw ValueError("the template ran more than max_steps " +
                         std::to_string(t_budget->max_steps) + " steps (an endless loop?)");
}

void charge_bytes(uint64_t bytes) {
    if (!t_budget) return;
    t_budget->bytes += bytes;
    if (t_budget->bytes > t_budget->max_bytes)
        throw ValueError("the template allocated more than max_memory " +
                         std::to_string(t_budget->max_bytes) + " bytes in total");
}

BudgetScope::BudgetScope(RenderBudget& budget) : saved_(t_budget) { t_budget = &budget; }
BudgetScope::~BudgetScope() { t_budget = saved_; }

namespace {
const std::shared_ptr<const ClientSpans>& derived_marker() {
    static const auto marker = std::make_shared<const ClientSpans>();
    return marker;
}
[[noreturn]] void too_deep() {
    throw ValueError("values nest deeper than " + std::to_string(kMaxValueDepth) + " levels");
}
}  // namespace

const std::string& Value::empty_string() {
    static const std::string empty;
    return empty;
}

Value::Value(std::string s) : kind_(Kind::String) {
    charge_bytes(s.size());
    str_ = std::make_shared<const std::string>(std::move(s));
}

Value Value::client_string(std::string s, ClientSpans spans) {
    Value v(std::move(s));
    v.client_ =
        spans.empty() ? derived_marker() : std::make_shared<const ClientSpans>(std::move(spans));
    return v;
}

Value::Value(List l, bool tuple) : kind_(Kind::Seq), tuple_(tuple) {
    uint32_t deepest = 0;
    bool client = false;
    for (const Value& item : l) {
        deepest = std::max(deepest, item.depth());
        client = client || item.from_client();
    }
    if (deepest + 1 > kMaxValueDepth) too_deep();
    charge_bytes(l.size() * sizeof(Value));
    depth_ = deepest + 1;
    if (client) client_ = derived_marker();
    list_ = std::make_shared<List>(std::move(l));
}
Value::Value(std::shared_ptr<Dict> d) : kind_(Kind::Map), dict_(std::move(d)) {}
Value::Value(std::shared_ptr<Callable> c) : kind_(Kind::Func), callable_(std::move(c)) {}

uint32_t Value::depth() const {
    if (kind_ == Kind::Seq) return depth_;
    if (kind_ == Kind::Map) return dict_->depth;
    return 0;
}

bool Value::from_client() const {
    return client_ != nullptr || (kind_ == Kind::Map && dict_->from_client);
}

const ClientSpans& Value::client_spans() const {
    static const ClientSpans none;
    return client_ ? *client_ : none;
}

Value Value::marked_client() const {
    Value v = *this;
    if (!v.client_) v.client_ = derived_marker();
    return v;
}

Value Value::as_client() const { return as_client_at(0); }

Value Value::as_client_at(size_t depth) const {
    check_value_depth(depth);
    switch (kind_) {
        case Kind::String: {
            Value v = *this;
            const size_t n = as_string().size();
            const auto& spans = client_spans();
            const bool whole = spans.size() == 1 && spans[0].begin == 0 && spans[0].end == n;
            if (!whole)
                v.client_ =
                    n ? std::make_shared<const ClientSpans>(ClientSpans{{0, n}}) : derived_marker();
            return v;
        }
        case Kind::Seq: {
            List items;
            items.reserve(list_->size());
            for (const Value& item : *list_) items.push_back(item.as_client_at(depth + 1));
            Value v(std::move(items), tuple_);
            v.generator_ = generator_;
            v.client_ = derived_marker();
            return v;
        }
        case Kind::Map: {
            auto d = std::make_shared<Dict>();
            d->is_namespace = dict_->is_namespace;
            for (const auto& [k, item] : dict_->items)
                d->set(k.as_client_at(depth + 1), item.as_client_at(depth + 1));
            d->from_client = true;
            return Value(std::move(d));
        }
        case Kind::Func:
        case Kind::Undefined:
            return *this;
        default:
            return marked_client();
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
        case Kind::Int:
            return int_ != 0;
        case Kind::Float:
            return float_ != 0.0;
        case Kind::String:
            return !as_string().empty();
        case Kind::Seq:
            return generator_ || !list_->empty();
        case Kind::Map:
            return dict_->is_namespace || !dict_->items.empty();
        case Kind::Func:
            return true;
    }
    return false;
}

std::string Value::type_name() const {
    switch (kind_) {
        case Kind::Undefined:
            return "Undefined";
        case Kind::None:
            return "NoneType";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::String:
            return "str";
        case Kind::Seq:
            return generator_ ? "generator" : tuple_ ? "tuple" : "list";
        case Kind::Map:
            return dict_->is_namespace ? "Namespace" : "dict";
        case Kind::Func:
            return "function";
    }
    return "?";
}

const Value* Dict::find(const Value& key) const {
    for (const auto& [k, v] : items)
        if (py_equal(k, key)) return &v;
    return nullptr;
}

const Value* Dict::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k.is_string() && k.as_string() == key) return &v;
    return nullptr;
}

void Dict::add_new(Value key, Value value) {
    const uint32_t d = std::max(key.depth(), value.depth()) + 1;
    if (d > kMaxValueDepth) too_deep();
    depth = std::max(depth, d);
    from_client = from_client || key.from_client() || value.from_client();
    items.emplace_back(std::move(key), std::move(value));
}

void Dict::set(Value key, Value value) {
    const uint32_t d = std::max(key.depth(), value.depth()) + 1;
    if (d > kMaxValueDepth) too_deep();
    depth = std::max(depth, d);
    from_client = from_client || key.from_client() || value.from_client();
    for (auto& [k, v] : items)
        if (py_equal(k, key)) {
            v = std::move(value);
            return;
        }
    items.emplace_back(std::move(key), std::move(value));
}

Value Args::get(size_t index, std::string_view name, Value fallback) const {
    if (index < positional.size()) return positional[index];
    for (const auto& [k, v] : keyword)
        if (k == name) return v;
    return fallback;
}

bool Args::has(size_t index, std::string_view name) const {
    if (index < positional.size()) return true;
    for (const auto& [k, v] : keyword)
        if (k == name) return true;
    return false;
}

Value make_dict() { return Value(std::make_shared<Dict>()); }

Value make_callable(std::string name, std::function<Value(Args&)> call) {
    return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(call)}));
}

std::string py_float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    // The shortest digits that round-trip (what repr() uses), then Python's layout:
    // positional for exponents in [-4, 16), otherwise d.ddde+XX.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string sign;
    if (sci[0] == '-') sign = "-", sci.erase(0, 1);
    const size_t e_pos = sci.find('e');
    std::string digits = sci.substr(0, e_pos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int exp = std::stoi(sci.substr(e_pos + 1));
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    if (exp >= -4 && exp < 16) {
        std::string out;
        if (exp < 0) {
            out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        } else {
            const size_t int_digits = static_cast<size_t>(exp) + 1;
            if (digits.size() <= int_digits) {
                out = digits + std::string(int_digits - digits.size(), '0') + ".0";
            } else {
                out = digits.substr(0, int_digits) + "." + digits.substr(int_digits);
            }
        }
        return sign + out;
    }
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) mant += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + mant + e;
}

namespace {

std::string repr_string(const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        if (c == '\\')
            out += "\\\\";
        else if (c == static_cast<unsigned char>(quote))
            out += std::string("\\") + quote;
        else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else
            out += static_cast<char>(c);
    }
    out += quote;
    return out;
}

void json_string(std::string& out, const std::string& s) {
    out += '"';
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    out += b;
                } else
                    out += static_cast<char>(c);
        }
    }
    out += '"';
}

struct JsonWriter {
    int indent;
    std::string item_sep, key_sep;
    bool sort_keys;
    std::string out;

    void newline(int depth) {
        check_string_length(out.size() + 1 +
                            static_cast<size_t>(indent) * static_cast<size_t>(depth));
        out += '\n';
        out.append(static_cast<size_t>(indent * depth), ' ');
    }

    void write(const Value& v, int depth) {
        check_value_depth(static_cast<size_t>(depth));
        switch (v.kind()) {
            case Value::Kind::None:
                out += "null";
                return;
            case Value::Kind::Bool:
                out += v.as_bool() ? "true" : "false";
                return;
            case Value::Kind::Int:
                out += std::to_string(v.as_int());
                return;
            case Value::Kind::Float: {
                const double d = v.as_float();
                if (std::isnan(d))
                    out += "NaN";
                else if (std::isinf(d))
                    out += d < 0 ? "-Infinity" : "Infinity";
                else
                    out += py_float_repr(d);
                return;
            }
            case Value::Kind::String:
                json_string(out, v.as_string());
                return;
            case Value::Kind::Seq: {
                if (v.is_generator()) break;
                const List& l = v.as_list();
                if (l.empty()) {
                    out += "[]";
                    return;
                }
                out += '[';
                for (size_t i = 0; i < l.size(); ++i) {
                    if (i) out += item_sep;
                    if (indent >= 0) newline(depth + 1);
                    write(l[i], depth + 1);
                }
                if (indent >= 0) newline(depth);
                out += ']';
                return;
            }
            case Value::Kind::Map: {
                if (v.as_dict().is_namespace) break;
                std::vector<const std::pair<Value, Value>*> items;
                for (const auto& kv : v.as_dict().items) items.push_back(&kv);
                if (sort_keys)
                    std::stable_sort(items.begin(), items.end(),
                                     [](auto* a, auto* b) { return py_less(a->first, b->first); });
                if (items.empty()) {
                    out += "{}";
                    return;
                }
                out += '{';
                for (size_t i = 0; i < items.size(); ++i) {
                    if (i) out += item_sep;
                    if (indent >= 0) newline(depth + 1);
                    const Value& k = items[i]->first;
                    if (k.is_string())
                        json_string(out, k.as_string());
                    else if (k.is_none())
                        out += "\"null\"";
                    else if (k.is_bool())
                        out += k.as_bool() ? "\"true\"" : "\"false\"";
                    else if (k.is_int() || k.is_float())
                        json_string(out, py_str(k));
                    else
                        throw ValueError("keys must be str, int, float, bool or None, not " +
                                         k.type_name());
                    out += key_sep;
                    write(items[i]->second, depth + 1);
                }
                if (indent >= 0) newline(depth);
                out += '}';
                return;
            }
            default:
                break;
        }
        throw ValueError("Object of type " + v.type_name() + " is not JSON serializable");
    }
};

}  // namespace

std::string py_str(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return "";
        case Value::Kind::String:
            return v.as_string();
        default:
            return py_repr(v);
    }
}

namespace {

// repr() of containers. A namespace can hold itself (`{% set ns.me = ns %}`),
// so, as Python's repr does, a container already being printed prints as
// "[...]" or "{...}" instead of recursing; and, as Python's recursion limit
// does, nesting deeper than kMaxValueDepth is an error, not a stack overflow.
struct ReprWriter {
    std::vector<const void*> open;  // the containers being printed, outermost first

    bool is_open(const void* p) const {
        return std::find(open.begin(), open.end(), p) != open.end();
    }

    std::string repr(const Value& v) {
        check_value_depth(open.size());
        switch (v.kind()) {
            case Value::Kind::Undefined:
                return "";
            case Value::Kind::None:
                return "None";
            case Value::Kind::Bool:
                return v.as_bool() ? "True" : "False";
            case Value::Kind::Int:
                return std::to_string(v.as_int());
            case Value::Kind::Float:
                return py_float_repr(v.as_float());
            case Value::Kind::String:
                return repr_string(v.as_string());
            case Value::Kind::Seq: {
                if (v.is_generator())
                    throw ValueError(
                        "printing a generator (jinja2 prints its memory address); add |list");
                const List& l = v.as_list();
                if (is_open(&l)) return v.is_tuple() ? "(...)" : "[...]";
                open.push_back(&l);
                std::string out = v.is_tuple() ? "(" : "[";
                for (size_t i = 0; i < l.size(); ++i) {
                    if (i) out += ", ";
                    out += repr(l[i]);
                }
                if (v.is_tuple() && l.size() == 1) out += ",";
                open.pop_back();
                return out + (v.is_tuple() ? ")" : "]");
            }
            case Value::Kind::Map: {
                const Dict& d = v.as_dict();
                const char* open_text = d.is_namespace ? "<Namespace {" : "{";
                const char* close_text = d.is_namespace ? "}>" : "}";
                if (is_open(&d)) return std::string(open_text) + "..." + close_text;
                open.push_back(&d);
                std::string out = open_text;
                bool first = true;
                for (const auto& [k, val] : d.items) {
                    if (!first) out += ", ";
                    first = false;
                    out += repr(k);
                    out += ": ";
                    out += repr(val);
                }
                open.pop_back();
                return out + close_text;
            }
            case Value::Kind::Func:
                return "<function " + v.as_callable().name + ">";
        }
        return "";
    }
};

}  // namespace

std::string py_repr(const Value& v) { return ReprWriter{}.repr(v); }

std::string json_dumps(const Value& v, int indent, const std::optional<std::string>& item_sep,
                       const std::optional<std::string>& key_sep, bool sort_keys) {
    JsonWriter w{
        indent, item_sep.value_or(indent >= 0 ? "," : ", "), key_sep.value_or(": "), sort_keys, {}};
    w.write(v, 0);
    check_string_length(w.out.size());
    return std::move(w.out);
}

namespace {

// Every comparison is a step: `unique` pays n^2, a sort n log n, `in` over a list n.
bool equal_at(const Value& a, const Value& b, size_t depth) {
    check_value_depth(depth);
    charge_steps(1);
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None:
            return true;
        case Value::Kind::String:
            return a.as_string() == b.as_string();
        case Value::Kind::Seq: {
            if (a.is_generator() || b.is_generator()) return a.list_ptr() == b.list_ptr();
            if (a.is_tuple() != b.is_tuple()) return false;
            const List &x = a.as_list(), &y = b.as_list();
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i)
                if (!equal_at(x[i], y[i], depth + 1)) return false;
            return true;
        }
        case Value::Kind::Map: {
            const Dict &x = a.as_dict(), &y = b.as_dict();
            if (&x == &y) return true;
            if (x.is_namespace || y.is_namespace || x.items.size() != y.items.size()) return false;
            for (const auto& [k, v] : x.items) {
                const Value* other = y.find(k);
                if (!other || !equal_at(v, *other, depth + 1)) return false;
            }
            return true;
        }
        case Value::Kind::Func:
            return &a.as_callable() == &b.as_callable();
        default:
            return false;
    }
}

bool less_at(const Value& a, const Value& b, size_t depth) {
    check_value_depth(depth);
    charge_steps(1);
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
    if (a.is_list() && b.is_list()) {
        const List &x = a.as_list(), &y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (less_at(x[i], y[i], depth + 1)) return true;
            if (less_at(y[i], x[i], depth + 1)) return false;
        }
        return x.size() < y.size();
    }
    throw ValueError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                     b.type_name() + "'");
}

}  // namespace

bool py_equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }
bool py_less(const Value& a, const Value& b) { return less_at(a, b, 0); }

size_t nesting_depth(const Value& v, size_t limit) {
    // An iterative depth-first walk: `done` memoises each container's depth,
    // so a value shared many times (`[x, x]`, again and again) is walked once;
    // `on_path` is the chain being walked, so a namespace that holds itself is
    // not entered again.
    const auto id_of = [](const Value& x) -> const void* {
        if (x.is_list()) return x.list_ptr().get();
        if (x.is_dict()) return x.dict_ptr().get();
        return nullptr;
    };
    const auto child = [](const Value& x, size_t i) -> const Value* {
        if (x.is_list()) return i < x.as_list().size() ? &x.as_list()[i] : nullptr;
        const auto& items = x.as_dict().items;
        if (i / 2 >= items.size()) return nullptr;
        return i % 2 ? &items[i / 2].second : &items[i / 2].first;
    };
    struct Step {
        const Value* value;
        const void* id;
        size_t next = 0, deepest_child = 0;
    };
    if (!id_of(v)) return 0;
    std::unordered_map<const void*, size_t> done;
    std::unordered_set<const void*> on_path{id_of(v)};
    std::vector<Step> path{{&v, id_of(v)}};
    while (!path.empty()) {
        if (path.size() > limit) return path.size();
        Step& top = path.back();
        if (const Value* c = child(*top.value, top.next)) {
            ++top.next;
            const void* id = id_of(*c);
            if (!id || on_path.count(id)) continue;
            if (const auto it = done.find(id); it != done.end()) {
                top.deepest_child = std::max(top.deepest_child, it->second);
                continue;
            }
            on_path.insert(id);
            path.push_back({c, id});
            continue;
        }
        const size_t depth = top.deepest_child + 1;
        done[top.id] = depth;
        on_path.erase(top.id);
        path.pop_back();
        if (path.empty()) return depth;
        path.back().deepest_child = std::max(path.back().deepest_child, depth);
    }
    return 0;
}

std::vector<std::string> utf8_chars(std::string_view s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0xf0)
            n = 4;
        else if (c >= 0xe0)
            n = 3;
        else if (c >= 0xc0)
            n = 2;
        n = std::min(n, s.size() - i);
        check_piece_count(out.size() + 1);
        out.emplace_back(s.substr(i, n));
        i += n;
    }
    return out;
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s)
        if ((c & 0xc0) != 0x80) ++n;
    return n;
}

}  // namespace ferrox::tmpl
