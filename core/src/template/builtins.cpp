#include "template/builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <unordered_map>

namespace ferrox::tmpl {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw ValueError(msg); }

void require_defined(const Value& v) {
    if (v.is_undefined())
        fail(v.undefined_name().empty() ? "value is undefined" : v.undefined_name());
}

const std::string& need_string(const Value& v, const char* what) {
    require_defined(v);
    if (!v.is_string()) fail(std::string(what) + " expects a string, got '" + v.type_name() + "'");
    return v.as_string();
}

int64_t need_int(const Value& v, const char* what) {
    if (!v.is_int() && !v.is_bool())
        fail(std::string(what) + " expects an integer, got '" + v.type_name() + "'");
    return v.as_int();
}

bool is_py_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

std::string ascii_map(std::string s, int (*f)(int)) {
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x80)
            c = static_cast<char>(f(static_cast<unsigned char>(c)));
    return s;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
    const bool ws = chars.is_none() || chars.is_undefined();
    const std::string set = ws ? std::string() : need_string(chars, "strip");
    auto strip_it = [&](unsigned char c) {
        return ws ? is_py_space(c) : set.find(static_cast<char>(c)) != std::string::npos;
    };
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && strip_it(static_cast<unsigned char>(s[b]))) ++b;
    if (right)
        while (e > b && strip_it(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

List py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
    List out;
    if (sep.is_none() || sep.is_undefined()) {
        size_t i = 0;
        while (true) {
            while (i < s.size() && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
                size_t e = s.size();
                while (e > i && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
                out.emplace_back(s.substr(i, e - i));
                break;
            }
            size_t j = i;
            while (j < s.size() && !is_py_space(static_cast<unsigned char>(s[j]))) ++j;
            check_piece_count(out.size() + 1);
            out.emplace_back(s.substr(i, j - i));
            i = j;
        }
        return out;
    }
    const std::string& d = need_string(sep, "split");
    if (d.empty()) fail("empty separator");
    size_t i = 0;
    while (true) {
        const size_t j = s.find(d, i);
        if (j == std::string::npos ||
            (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
            out.emplace_back(s.substr(i));
            break;
        }
        check_piece_count(out.size() + 1);
        out.emplace_back(s.substr(i, j - i));
        i = j + d.size();
    }
    return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count) {
    std::string out;
    if (from.empty()) {  // Python inserts `to` between every character
        const auto chars = utf8_chars(s);
        int64_t n = 0;
        for (const auto& c : chars) {
            if (count < 0 || n < count) out += to, ++n;
            out += c;
            check_string_length(out.size());
        }
        if (count < 0 || n < count) out += to;
        return out;
    }
    size_t i = 0;
    int64_t n = 0;
    while (true) {
        const size_t j = s.find(from, i);
        if (j == std::string::npos || (count >= 0 && n >= count)) {
            out += s.substr(i);
            return out;
        }
        check_string_length(out.size() + (j - i) + to.size());
        out += s.substr(i, j - i) + to;
        i = j + from.size();
        ++n;
    }
}

// str.splitlines(): the line boundaries Python recognises, ends dropped.
std::vector<std::string> py_splitlines(const std::string& s) {
    std::vector<std::string> lines;
    std::string cur;
    for (size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t skip = 0;
        if (c == '\r')
            skip = (i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
        else if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e))
            skip = 1;
        else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85)
            skip = 2;
        else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                 (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
                  static_cast<unsigned char>(s[i + 2]) == 0xa9))
            skip = 3;
        if (skip) {
            check_piece_count(lines.size() + 1);
            lines.push_back(std::move(cur));
            cur.clear();
            i += skip - 1;
        } else {
            cur += static_cast<char>(c);
        }
    }
    if (!cur.empty()) lines.push_back(std::move(cur));
    return lines;
}

std::string py_title(const std::string& s) {
    std::string out = s;
    bool prev_cased = false;
    for (char& ch : out) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalpha(c) && c < 0x80) {
            ch = static_cast<char>(prev_cased ? std::tolower(c) : std::toupper(c));
            prev_cased = true;
        } else {
            prev_cased = c >= 0x80 && prev_cased;
        }
    }
    return out;
}

std::string py_capitalize(const std::string& s) {
    std::string out = ascii_map(s, [](int c) { return std::tolower(c); });
    if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80)
        out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return out;
}

bool starts_or_ends(const std::string& s, const Value& what, bool start) {
    auto one = [&](const Value& v) {
        const std::string& p = need_string(v, start ? "startswith" : "endswith");
        if (p.size() > s.size()) return false;
        return start ? s.compare(0, p.size(), p) == 0
                     : s.compare(s.size() - p.size(), p.size(), p) == 0;
    };
    if (what.is_list()) {
        for (const Value& v : what.as_list())
            if (one(v)) return true;
        return false;
    }
    return one(what);
}

int64_t count_substr(const std::string& s, const std::string& sub) {
    if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
    int64_t n = 0;
    for (size_t i = s.find(sub); i != std::string::npos; i = s.find(sub, i + sub.size())) ++n;
    return n;
}

int64_t char_index(const std::string& s, size_t byte_pos) {
    return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte_pos)));
}

// str.format with {}, {0} and {name} fields; a format spec or conversion is refused.
std::string str_format(const std::string& fmt, const Args& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}')
                ++i;
            else
                fail("Single '}' encountered in format string");
            out += '}';
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const size_t end = fmt.find('}', i);
        if (end == std::string::npos) fail("Single '{' encountered in format string");
        const std::string field = fmt.substr(i + 1, end - i - 1);
        if (field.find_first_of(":!.[") != std::string::npos)
            fail("str.format: format specs, conversions and field access are not supported");
        Value v;
        if (field.empty()) {
            if (auto_index >= args.positional.size())
                fail("Replacement index out of range for positional args tuple");
            v = args.positional[auto_index++];
        } else if (std::all_of(field.begin(), field.end(), [](char d) {
                       return std::isdigit(static_cast<unsigned char>(d)) != 0;
                   })) {
            if (field.size() > 6) fail("Replacement index out of range for positional args tuple");
            const size_t k = std::stoul(field);
            if (k >= args.positional.size())
                fail("Replacement index out of range for positional args tuple");
            v = args.positional[k];
        } else {
            bool found = false;
            for (const auto& [name, value] : args.keyword)
                if (name == field) v = value, found = true;
            if (!found) fail("KeyError: '" + field + "'");
        }
        out += py_str(v);
        check_string_length(out.size());
        i = end;
    }
    return out;
}

Value bound(const Value& obj, const std::string& name,
            std::function<Value(const Value&, Args&)> f) {
    return make_callable(name, [obj, f = std::move(f)](Args& a) { return f(obj, a); });
}

Value string_method(const Value& obj, const std::string& name) {
    using F = std::function<Value(const Value&, Args&)>;
    static const std::unordered_map<std::string, F> methods = {
        {"strip",
         [](const Value& o, Args& a) {
             return Value(py_strip(o.as_string(), a.get(0, "chars", Value::none()), true, true));
         }},
        {"lstrip",
         [](const Value& o, Args& a) {
             return Value(py_strip(o.as_string(), a.get(0, "chars", Value::none()), true, false));
         }},
        {"rstrip",
         [](const Value& o, Args& a) {
             return Value(py_strip(o.as_string(), a.get(0, "chars", Value::none()), false, true));
         }},
        {"split",
         [](const Value& o, Args& a) {
             return Value(py_split(o.as_string(), a.get(0, "sep", Value::none()),
                                   need_int(a.get(1, "maxsplit", Value(-1)), "split")));
         }},
        {"splitlines",
         [](const Value& o, Args&) {
             List l;
             for (auto& s : py_splitlines(o.as_string())) l.emplace_back(std::move(s));
             return Value(std::move(l));
         }},
        {"startswith",
         [](const Value& o, Args& a) {
             return Value(starts_or_ends(o.as_string(), a.get(0, "prefix"), true));
         }},
        {"endswith",
         [](const Value& o, Args& a) {
             return Value(starts_or_ends(o.as_string(), a.get(0, "suffix"), false));
         }},
        {"upper",
         [](const Value& o, Args&) {
             return Value(ascii_map(o.as_string(), [](int c) { return std::toupper(c); }));
         }},
        {"lower",
         [](const Value& o, Args&) {
             return Value(ascii_map(o.as_string(), [](int c) { return std::tolower(c); }));
         }},
        {"title", [](const Value& o, Args&) { return Value(py_title(o.as_string())); }},
        {"capitalize", [](const Value& o, Args&) { return Value(py_capitalize(o.as_string())); }},
        {"replace",
         [](const Value& o, Args& a) {
             return Value(py_replace(o.as_string(), need_string(a.get(0, "old"), "replace"),
                                     need_string(a.get(1, "new"), "replace"),
                                     need_int(a.get(2, "count", Value(-1)), "replace")));
         }},
        {"find",
         [](const Value& o, Args& a) {
             const size_t p = o.as_string().find(need_string(a.get(0, "sub"), "find"));
             return Value(p == std::string::npos ? int64_t{-1} : char_index(o.as_string(), p));
         }},
        {"rfind",
         [](const Value& o, Args& a) {
             const size_t p = o.as_string().rfind(need_string(a.get(0, "sub"), "rfind"));
             return Value(p == std::string::npos ? int64_t{-1} : char_index(o.as_string(), p));
         }},
        {"count",
         [](const Value& o, Args& a) {
             return Value(count_substr(o.as_string(), need_string(a.get(0, "sub"), "count")));
         }},
        {"join",
         [](const Value& o, Args& a) {
             std::string out;
             bool first = true;
             for (const Value& v : iterate(a.get(0, "iterable"))) {
                 const std::string& piece = need_string(v, "join");
                 check_string_length(out.size() + (first ? 0 : o.as_string().size()) +
                                     piece.size());
                 if (!first) out += o.as_string();
                 first = false;
                 out += piece;
             }
             return Value(std::move(out));
         }},
        {"removeprefix",
         [](const Value& o, Args& a) {
             const std::string p = need_string(a.get(0, "prefix"), "removeprefix");
             const std::string& s = o.as_string();
             return Value(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
         }},
        {"removesuffix",
         [](const Value& o, Args& a) {
             const std::string p = need_string(a.get(0, "suffix"), "removesuffix");
             const std::string& s = o.as_string();
             return Value(!p.empty() && s.size() >= p.size() &&
                                  s.compare(s.size() - p.size(), p.size(), p) == 0
                              ? s.substr(0, s.size() - p.size())
                              : s);
         }},
        {"format", [](const Value& o, Args& a) { return Value(str_format(o.as_string(), a)); }},
        {"isdigit",
         [](const Value& o, Args&) {
             const std::string& s = o.as_string();
             return Value(!s.empty() && std::all_of(s.begin(), s.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; }));
         }},
        {"isalpha",
         [](const Value& o, Args&) {
             const std::string& s = o.as_string();
             return Value(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
                 return std::isalpha(static_cast<unsigned char>(c)) != 0;
             }));
         }},
        {"isspace",
         [](const Value& o, Args&) {
             const std::string& s = o.as_string();
             return Value(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
                 return is_py_space(static_cast<unsigned char>(c));
             }));
         }},
    };
    auto it = methods.find(name);
    if (it == methods.end())
        return Value::undefined("'str object' has no attribute '" + name + "'");
    return bound(obj, name, it->second);
}

Value dict_method(const Value& obj, const std::string& name) {
    if (name == "items")
        return bound(obj, name, [](const Value& o, Args&) {
            List l;
            for (auto& [k, v] : o.as_dict().items) l.emplace_back(List{k, v}, true);
            return Value(std::move(l));
        });
    if (name == "keys")
        return bound(obj, name, [](const Value& o, Args&) {
            List l;
            for (auto& kv : o.as_dict().items) l.push_back(kv.first);
            return Value(std::move(l));
        });
    if (name == "values")
        return bound(obj, name, [](const Value& o, Args&) {
            List l;
            for (auto& kv : o.as_dict().items) l.push_back(kv.second);
            return Value(std::move(l));
        });
    if (name == "get")
        return bound(obj, name, [](const Value& o, Args& a) {
            const Value* v = o.as_dict().find(a.get(0, "key"));
            return v ? *v : a.get(1, "default", Value::none());
        });
    static const char* const unsafe[] = {"pop", "popitem", "setdefault", "update", "clear"};
    for (const char* u : unsafe)
        if (name == u)
            return bound(obj, name, [name](const Value&, Args&) -> Value {
                fail("access to attribute '" + name + "' of 'dict' object is unsafe.");
            });
    return Value();
}

Value list_method(const Value& obj, const std::string& name) {
    if (name == "index")
        return bound(obj, name, [](const Value& o, Args& a) {
            const Value x = a.get(0, "value");
            const List& l = o.as_list();
            for (size_t i = 0; i < l.size(); ++i)
                if (py_equal(l[i], x)) return Value(static_cast<int64_t>(i));
            fail(py_repr(x) + " is not in list");
        });
    if (name == "count")
        return bound(obj, name, [](const Value& o, Args& a) {
            const Value x = a.get(0, "value");
            int64_t n = 0;
            for (const Value& v : o.as_list()) n += py_equal(v, x);
            return Value(n);
        });
    static const char* const unsafe[] = {"append", "extend", "insert", "pop",
                                         "remove", "clear",  "sort",   "reverse"};
    for (const char* u : unsafe)
        if (name == u)
            return bound(obj, name, [name](const Value&, Args&) -> Value {
                fail("access to attribute '" + name + "' of 'list' object is unsafe.");
            });
    return Value::undefined("'list object' has no attribute '" + name + "'");
}

// Python-compatible sequence index: negative counts from the end.
bool normalize_index(int64_t& i, size_t n) {
    if (i < 0) i += static_cast<int64_t>(n);
    return i >= 0 && i < static_cast<int64_t>(n);
}

Value attr_path(const Value& obj, const std::string& path) {
    Value v = obj;
    size_t i = 0;
    while (true) {
        const size_t dot = path.find('.', i);
        const std::string part =
            path.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
        bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
        });
        numeric = numeric && part.size() < 18;  // beyond that it cannot index anything
        v = get_item(v, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
        if (dot == std::string::npos) return v;
        i = dot + 1;
    }
}

std::string soft_str(const Value& v) { return py_str(v); }

Value sorted_list(List items, bool reverse, bool case_sensitive, const Value& attribute) {
    auto key = [&](const Value& v) {
        Value k = attribute.is_string() ? attr_path(v, attribute.as_string()) : v;
        if (!case_sensitive && k.is_string())
            return Value(ascii_map(k.as_string(), [](int c) { return std::tolower(c); }));
        return k;
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? py_less(key(b), key(a)) : py_less(key(a), key(b));
    });
    return Value(std::move(items));
}

Value select_common(const Value& seq, const Args& args, bool by_attr, bool keep_if) {
    List out;
    if (!seq.truthy()) return Value::generator({});  // jinja2: `if value:` guards the loop
    size_t test_pos = by_attr ? 1 : 0;
    std::string attr = by_attr ? need_string(args.get(0, "attribute"), "selectattr") : "";
    const bool has_test = args.positional.size() > test_pos;
    std::string test = has_test ? need_string(args.positional[test_pos], "select") : "";
    Args test_args;
    for (size_t i = test_pos + 1; i < args.positional.size(); ++i)
        test_args.positional.push_back(args.positional[i]);
    for (const Value& item : iterate(seq)) {
        Value v = by_attr ? attr_path(item, attr) : item;
        const bool r = has_test ? call_test(test, v, test_args) : v.truthy();
        if (r == keep_if) out.push_back(item);
    }
    return Value(std::move(out));
}

}  // namespace

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

namespace {

// Non-ASCII characters as \uXXXX (surrogate pairs above the BMP), as
// json.dumps(ensure_ascii=True) writes them; only strings hold such bytes.
std::string ascii_escape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            out += static_cast<char>(c);
            ++i;
            continue;
        }
        size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        uint32_t cp = c & (n == 4 ? 0x07 : n == 3 ? 0x0f : 0x1f);
        for (size_t k = 1; k < n && i + k < s.size(); ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
        i += n;
        char b[16];
        if (cp >= 0x10000) {
            cp -= 0x10000;
            std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xd800 + (cp >> 10),
                          0xdc00 + (cp & 0x3ff));
        } else {
            std::snprintf(b, sizeof b, "\\u%04x", cp);
        }
        out += b;
    }
    return out;
}

Value to_int(const Value& v, const Value& fallback) {
    if (v.is_int() || v.is_bool()) return Value(v.as_int());
    if (v.is_float()) {
        if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return fallback;
        return Value(static_cast<int64_t>(v.as_float()));
    }
    if (v.is_string()) {
        std::string s = py_strip(v.as_string(), Value::none(), true, true);
        s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
        try {
            size_t used = 0;
            const long long r = std::stoll(s, &used, 10);
            if (used == s.size()) return Value(static_cast<int64_t>(r));
            const double d = std::stod(s, &used);
            if (used == s.size()) return to_int(Value(d), fallback);
        } catch (const std::exception&) {
        }
    }
    return fallback;
}

Value to_float(const Value& v, const Value& fallback) {
    if (v.is_number()) return Value(v.as_float());
    if (v.is_string()) {
        const std::string s = py_strip(v.as_string(), Value::none(), true, true);
        try {
            size_t used = 0;
            const double d = std::stod(s, &used);
            if (used == s.size()) return Value(d);
        } catch (const std::exception&) {
        }
    }
    return fallback;
}

std::string indent_text(std::string s, const Value& width, bool first, bool blank) {
    const int64_t spaces = width.is_string() ? 0 : std::max<int64_t>(0, need_int(width, "indent"));
    check_string_length(static_cast<uint64_t>(spaces));
    const std::string pad =
        width.is_string() ? width.as_string() : std::string(static_cast<size_t>(spaces), ' ');
    s += "\n";
    std::vector<std::string> lines = py_splitlines(s);
    std::string rv;
    // At most one pad per line plus the first: checked before anything is built.
    check_string_length(s.size() + (lines.size() + 1) * pad.size());
    if (blank) {
        for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + pad : "") + lines[i];
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (size_t i = 1; i < lines.size(); ++i)
            rv += "\n" + (lines[i].empty() ? "" : pad + lines[i]);
    }
    if (first) rv = pad + rv;
    return rv;
}

std::string printf_format(const std::string& fmt, const List& args) {
    std::string out;
    size_t ai = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) fail("incomplete format");
        const char c = fmt[i];
        if (c == '%') {
            out += '%';
            continue;
        }
        if (ai >= args.size()) fail("not enough arguments for format string");
        const Value& a = args[ai++];
        if (c == 's')
            out += py_str(a);
        else if (c == 'r')
            out += py_repr(a);
        else if (c == 'd' || c == 'i')
            out += std::to_string(to_int(a, Value(int64_t{0})).as_int());
        else
            fail(std::string("unsupported format character '") + c + "'");
        check_string_length(out.size());
    }
    if (ai < args.size()) fail("not all arguments converted during string formatting");
    return out;
}

using Filter = Value (*)(const Value&, const Args&);

const std::unordered_map<std::string_view, Filter>& filters() {
    static const std::unordered_map<std::string_view, Filter> table = {
        {"abs",
         [](const Value& v, const Args&) {
             if (v.is_float()) return Value(std::fabs(v.as_float()));
             const int64_t i = need_int(v, "abs");
             if (i == INT64_MIN) fail("integer overflow (beyond 64 bits)");
             return Value(i < 0 ? -i : i);
         }},
        {"attr",
         [](const Value& v, const Args& a) {
             return get_attribute(v, need_string(a.get(0, "name"), "attr"));
         }},
        {"capitalize",
         [](const Value& v, const Args&) { return Value(py_capitalize(soft_str(v))); }},
        {"center",
         [](const Value& v, const Args& a) {
             const std::string s = soft_str(v);
             const int64_t w = need_int(a.get(0, "width", Value(80)), "center");
             const int64_t len = static_cast<int64_t>(utf8_length(s));
             if (w <= len) return Value(s);
             check_string_length(s.size() + static_cast<uint64_t>(w - len));
             const int64_t total = w - len, left = total / 2 + (total & w & 1);
             return Value(std::string(static_cast<size_t>(left), ' ') + s +
                          std::string(static_cast<size_t>(total - left), ' '));
         }},
        {"default",
         [](const Value& v, const Args& a) {
             const bool boolean = a.get(1, "boolean", Value(false)).truthy();
             if (v.is_undefined() || (boolean && !v.truthy()))
                 return a.get(0, "default_value", Value(""));
             return v;
         }},
        {"dictsort",
         [](const Value& v, const Args& a) {
             require_defined(v);
             if (!v.is_dict()) fail("dictsort expects a dict");
             const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
             const std::string by =
                 a.has(1, "by") ? need_string(a.get(1, "by"), "dictsort") : "key";
             const bool rev = a.get(2, "reverse", Value(false)).truthy();
             List items;
             for (auto& [k, val] : v.as_dict().items) items.emplace_back(List{k, val}, true);
             const size_t pos = by == "value" ? 1 : 0;
             auto key = [&](const Value& t) {
                 const Value& k = t.as_list()[pos];
                 return (!cs && k.is_string())
                            ? Value(ascii_map(k.as_string(), [](int c) { return std::tolower(c); }))
                            : k;
             };
             std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
                 return rev ? py_less(key(y), key(x)) : py_less(key(x), key(y));
             });
             return Value(std::move(items));
         }},
        {"escape",
         [](const Value& v, const Args&) {
             return v.is_markup() ? v : Value::markup(html_escape(soft_str(v)));
         }},
        {"first",
         [](const Value& v, const Args&) {
             List l = iterate(v);
             return l.empty() ? Value::undefined("first of an empty sequence") : l.front();
         }},
        {"float", [](const Value& v,
                     const Args& a) { return to_float(v, a.get(0, "default", Value(0.0))); }},
        {"format", [](const Value& v,
                      const Args& a) { return Value(printf_format(soft_str(v), a.positional)); }},
        {"indent",
         [](const Value& v, const Args& a) {
             return Value(indent_text(soft_str(v), a.get(0, "width", Value(4)),
                                      a.get(1, "first", Value(false)).truthy(),
                                      a.get(2, "blank", Value(false)).truthy()));
         }},
        {"int", [](const Value& v,
                   const Args& a) { return to_int(v, a.get(0, "default", Value(int64_t{0}))); }},
        {"items",
         [](const Value& v, const Args&) {
             if (v.is_undefined()) return Value(List{});
             if (!v.is_dict()) fail("items expects a mapping, got '" + v.type_name() + "'");
             List l;
             for (auto& [k, val] : v.as_dict().items) l.emplace_back(List{k, val}, true);
             return Value(std::move(l));
         }},
        {"join",
         [](const Value& v, const Args& a) {
             const std::string sep = soft_str(a.get(0, "d", Value("")));
             const Value attr = a.get(1, "attribute", Value::none());
             std::string out;
             bool first = true;
             for (const Value& item : iterate(v)) {
                 const std::string piece =
                     soft_str(attr.is_none() ? item : attr_path(item, soft_str(attr)));
                 check_string_length(out.size() + (first ? 0 : sep.size()) + piece.size());
                 if (!first) out += sep;
                 first = false;
                 out += piece;
             }
             return Value(std::move(out));
         }},
        {"last",
         [](const Value& v, const Args&) {
             if (v.is_generator()) fail("'generator' object is not reversible");
             List l = iterate(v);
             return l.empty() ? Value::undefined("last of an empty sequence") : l.back();
         }},
        {"length",
         [](const Value& v, const Args&) {
             if (v.is_undefined()) return Value(int64_t{0});
             if (v.is_string()) return Value(static_cast<int64_t>(utf8_length(v.as_string())));
             if (v.is_generator()) fail("object of type 'generator' has no len()");
             if (v.is_list()) return Value(static_cast<int64_t>(v.as_list().size()));
             if (v.is_dict()) return Value(static_cast<int64_t>(v.as_dict().items.size()));
             fail("object of type '" + v.type_name() + "' has no len()");
         }},
        {"list", [](const Value& v, const Args&) { return Value(iterate(v)); }},
        {"lower",
         [](const Value& v, const Args&) {
             return Value(ascii_map(soft_str(v), [](int c) { return std::tolower(c); }));
         }},
        {"map",
         [](const Value& v, const Args& a) {
             List out;
             if (!v.truthy()) return Value::generator({});
             if (a.has(99, "attribute")) {
                 const std::string attr = soft_str(a.get(99, "attribute"));
                 const bool has_default = a.has(99, "default");
                 for (const Value& item : iterate(v)) {
                     Value r = attr_path(item, attr);
                     out.push_back(r.is_undefined() && has_default ? a.get(99, "default") : r);
                 }
                 return Value::generator(std::move(out));
             }
             const std::string name = need_string(a.get(0, "filter"), "map");
             Args rest;
             rest.positional.assign(a.positional.begin() + 1, a.positional.end());
             rest.keyword = a.keyword;
             for (const Value& item : iterate(v)) out.push_back(call_filter(name, item, rest));
             return Value::generator(std::move(out));
         }},
        {"max",
         [](const Value& v, const Args&) {
             List l = iterate(v);
             if (l.empty()) return Value::undefined("max of an empty sequence");
             Value best = l[0];
             for (const Value& x : l)
                 if (py_less(best, x)) best = x;
             return best;
         }},
        {"min",
         [](const Value& v, const Args&) {
             List l = iterate(v);
             if (l.empty()) return Value::undefined("min of an empty sequence");
             Value best = l[0];
             for (const Value& x : l)
                 if (py_less(x, best)) best = x;
             return best;
         }},
        {"reject", [](const Value& v, const Args& a) { return select_common(v, a, false, false); }},
        {"rejectattr",
         [](const Value& v, const Args& a) { return select_common(v, a, true, false); }},
        {"replace",
         [](const Value& v, const Args& a) {
             const Value count = a.get(2, "count", Value::none());
             return Value(py_replace(soft_str(v), soft_str(a.get(0, "old")),
                                     soft_str(a.get(1, "new")),
                                     count.is_none() ? -1 : need_int(count, "replace")));
         }},
        {"reverse",
         [](const Value& v, const Args&) {
             if (v.is_string()) {
                 auto chars = utf8_chars(v.as_string());
                 std::string out;
                 for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
                 return Value(std::move(out));
             }
             List l = iterate(v);
             std::reverse(l.begin(), l.end());
             return Value(std::move(l));
         }},
        {"round",
         [](const Value& v, const Args& a) {
             const int64_t precision = need_int(a.get(0, "precision", Value(0)), "round");
             const std::string method = soft_str(a.get(1, "method", Value("common")));
             const double scale = std::pow(10.0, static_cast<double>(precision));
             const double x = v.as_float() * scale;
             double r = method == "ceil"    ? std::ceil(x)
                        : method == "floor" ? std::floor(x)
                                            : std::nearbyint(x);
             return Value(r / scale);
         }},
        {"safe", [](const Value& v,
                    const Args&) { return v.is_markup() ? v : Value::markup(soft_str(v)); }},
        {"select", [](const Value& v, const Args& a) { return select_common(v, a, false, true); }},
        {"selectattr",
         [](const Value& v, const Args& a) { return select_common(v, a, true, true); }},
        {"sort",
         [](const Value& v, const Args& a) {
             return sorted_list(iterate(v), a.get(0, "reverse", Value(false)).truthy(),
                                a.get(1, "case_sensitive", Value(false)).truthy(),
                                a.get(2, "attribute", Value::none()));
         }},
        {"string", [](const Value& v, const Args&) { return Value(soft_str(v)); }},
        {"sum",
         [](const Value& v, const Args& a) {
             const Value attr = a.get(0, "attribute", Value::none());
             Value total = a.get(1, "start", Value(int64_t{0}));
             for (const Value& item : iterate(v)) {
                 const Value x = attr.is_none() ? item : attr_path(item, soft_str(attr));
                 if (!x.is_number() || !total.is_number()) fail("sum expects numbers");
                 total = (x.is_float() || total.is_float()) ? Value(total.as_float() + x.as_float())
                                                            : Value(total.as_int() + x.as_int());
             }
             return total;
         }},
        {"title", [](const Value& v, const Args&) { return Value(py_title(soft_str(v))); }},
        {"tojson",
         [](const Value& v, const Args& a) {
             // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None,
             // sort_keys=False)
             const bool ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
             const Value indent = a.get(1, "indent", Value::none());
             const Value seps = a.get(2, "separators", Value::none());
             const bool sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
             std::optional<std::string> item_sep, key_sep;
             if (seps.is_list()) {
                 if (seps.as_list().size() != 2) fail("separators must be a pair");
                 item_sep = need_string(seps.as_list()[0], "tojson");
                 key_sep = need_string(seps.as_list()[1], "tojson");
             }
             int ind = -1;
             if (indent.is_int())
                 ind = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
             else if (!indent.is_none())
                 fail("tojson: indent must be an integer");
             const std::string out = json_dumps(v, ind, item_sep, key_sep, sort_keys);
             return Value(ensure_ascii ? ascii_escape(out) : out);
         }},
        {"trim",
         [](const Value& v, const Args& a) {
             return Value(py_strip(soft_str(v), a.get(0, "chars", Value::none()), true, true));
         }},
        {"unique",
         [](const Value& v, const Args& a) {
             const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
             const Value attr = a.get(1, "attribute", Value::none());
             List out, keys;
             for (const Value& item : iterate(v)) {
                 Value k = attr.is_none() ? item : attr_path(item, soft_str(attr));
                 if (!cs && k.is_string())
                     k = Value(ascii_map(k.as_string(), [](int c) { return std::tolower(c); }));
                 bool seen = false;
                 for (const Value& s : keys) seen = seen || py_equal(s, k);
                 if (!seen) keys.push_back(k), out.push_back(item);
             }
             return Value(std::move(out));
         }},
        {"upper",
         [](const Value& v, const Args&) {
             return Value(ascii_map(soft_str(v), [](int c) { return std::toupper(c); }));
         }},
        {"wordcount",
         [](const Value& v, const Args&) {
             return Value(static_cast<int64_t>(py_split(soft_str(v), Value::none(), -1).size()));
         }},
    };
    return table;
}

using Test = bool (*)(const Value&, const Args&);

const std::unordered_map<std::string_view, Test>& tests() {
    static const std::unordered_map<std::string_view, Test> table = {
        {"defined", [](const Value& v, const Args&) { return !v.is_undefined(); }},
        {"undefined", [](const Value& v, const Args&) { return v.is_undefined(); }},
        {"none", [](const Value& v, const Args&) { return v.is_none(); }},
        {"boolean", [](const Value& v, const Args&) { return v.is_bool(); }},
        {"true", [](const Value& v, const Args&) { return v.is_bool() && v.as_bool(); }},
        {"false", [](const Value& v, const Args&) { return v.is_bool() && !v.as_bool(); }},
        {"integer", [](const Value& v, const Args&) { return v.is_int(); }},
        {"float", [](const Value& v, const Args&) { return v.is_float(); }},
        {"number", [](const Value& v, const Args&) { return v.is_number(); }},
        {"string", [](const Value& v, const Args&) { return v.is_string(); }},
        {"mapping",
         [](const Value& v, const Args&) { return v.is_dict() && !v.as_dict().is_namespace; }},
        {"iterable",
         [](const Value& v, const Args&) {
             return v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict().is_namespace);
         }},
        {"sequence",
         [](const Value& v, const Args&) {
             return v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict().is_namespace);
         }},
        {"callable", [](const Value& v, const Args&) { return v.is_callable(); }},
        {"even", [](const Value& v, const Args&) { return need_int(v, "even") % 2 == 0; }},
        {"odd", [](const Value& v, const Args&) { return need_int(v, "odd") % 2 != 0; }},
        {"divisibleby",
         [](const Value& v, const Args& a) {
             const int64_t d = need_int(a.get(0, "num"), "divisibleby");
             if (d == 0) fail("integer division or modulo by zero");
             return need_int(v, "divisibleby") % d == 0;
         }},
        {"eq", [](const Value& v, const Args& a) { return py_equal(v, a.get(0, "other")); }},
        {"ne", [](const Value& v, const Args& a) { return !py_equal(v, a.get(0, "other")); }},
        {"lt", [](const Value& v, const Args& a) { return py_less(v, a.get(0, "other")); }},
        {"gt", [](const Value& v, const Args& a) { return py_less(a.get(0, "other"), v); }},
        {"le", [](const Value& v, const Args& a) { return !py_less(a.get(0, "other"), v); }},
        {"ge", [](const Value& v, const Args& a) { return !py_less(v, a.get(0, "other")); }},
        {"in", [](const Value& v, const Args& a) { return contains(a.get(0, "seq"), v); }},
        {"sameas",
         [](const Value& v, const Args& a) {
             const Value o = a.get(0, "other");
             if (v.kind() != o.kind()) return false;
             if (v.is_list()) return v.list_ptr() == o.list_ptr();
             if (v.is_dict()) return v.dict_ptr() == o.dict_ptr();
             return py_equal(v, o);
         }},
        {"lower",
         [](const Value& v, const Args&) {
             const std::string& s = v.is_string() ? v.as_string() : py_str(v);
             return std::any_of(
                        s.begin(), s.end(),
                        [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0; }) &&
                    !std::any_of(s.begin(), s.end(), [](char c) {
                        return std::isupper(static_cast<unsigned char>(c)) != 0;
                    });
         }},
        {"upper",
         [](const Value& v, const Args&) {
             const std::string& s = v.is_string() ? v.as_string() : py_str(v);
             return std::any_of(
                        s.begin(), s.end(),
                        [](char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }) &&
                    !std::any_of(s.begin(), s.end(), [](char c) {
                        return std::islower(static_cast<unsigned char>(c)) != 0;
                    });
         }},
        {"filter", [](const Value& v,
                      const Args&) { return v.is_string() && is_known_filter(v.as_string()); }},
        {"test",
         [](const Value& v, const Args&) { return v.is_string() && is_known_test(v.as_string()); }},
    };
    return table;
}

std::string_view canonical_filter(std::string_view name) {
    if (name == "d") return "default";
    if (name == "e") return "escape";
    if (name == "count") return "length";
    return name;
}

std::string_view canonical_test(std::string_view name) {
    if (name == "equalto" || name == "==") return "eq";
    if (name == "!=") return "ne";
    if (name == "lessthan" || name == "<") return "lt";
    if (name == "greaterthan" || name == ">") return "gt";
    if (name == "<=") return "le";
    if (name == ">=") return "ge";
    return name;
}

}  // namespace

bool is_known_filter(std::string_view name) { return filters().count(canonical_filter(name)) != 0; }
bool is_known_test(std::string_view name) { return tests().count(canonical_test(name)) != 0; }

Value call_filter(std::string_view name, const Value& operand, const Args& args) {
    auto it = filters().find(canonical_filter(name));
    if (it == filters().end()) fail("no filter named '" + std::string(name) + "'");
    return it->second(operand, args);
}

bool call_test(std::string_view name, const Value& operand, const Args& args) {
    auto it = tests().find(canonical_test(name));
    if (it == tests().end()) fail("no test named '" + std::string(name) + "'");
    return it->second(operand, args);
}

Value get_attribute(const Value& obj, const std::string& name) {
    if (obj.is_dict()) {
        if (!obj.as_dict().is_namespace) {
            Value m = dict_method(obj, name);
            if (!m.is_undefined()) return m;
        }
        if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
        return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
    }
    if (obj.is_string()) return string_method(obj, name);
    if (obj.is_list()) return list_method(obj, name);
    return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find(key)) return *v;
        if (key.is_string()) return get_attribute(obj, key.as_string());
        return Value::undefined("'" + obj.type_name() + " object' has no attribute " +
                                py_repr(key));
    }
    if (obj.is_generator()) fail("'generator' object is not subscriptable");
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
            if (!normalize_index(i, obj.as_list().size()))
                return Value::undefined("list index out of range");
            return obj.as_list()[static_cast<size_t>(i)];
        }
        auto chars = utf8_chars(obj.as_string());
        if (!normalize_index(i, chars.size())) return Value::undefined("string index out of range");
        return Value(chars[static_cast<size_t>(i)]);
    }
    if (key.is_string()) return get_attribute(obj, key.as_string());
    if (key.is_list() || key.is_dict()) fail("unhashable type: '" + key.type_name() + "'");
    return Value::undefined("'" + obj.type_name() + " object' has no attribute " + py_repr(key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
    if ((!obj.is_list() && !obj.is_string()) || obj.is_generator())
        fail("'" + obj.type_name() + "' object is not subscriptable");
    auto as_index = [](const Value& v) -> int64_t {
        if (!v.is_int() && !v.is_bool()) fail("slice indices must be integers or None");
        return v.as_int();
    };
    const int64_t step = step_v.is_none() ? 1 : as_index(step_v);
    if (step == 0) fail("slice step cannot be zero");
    std::vector<std::string> chars;
    const bool ascii = obj.is_string() && utf8_length(obj.as_string()) == obj.as_string().size();
    if (obj.is_string() && !ascii) chars = utf8_chars(obj.as_string());
    const auto n = static_cast<int64_t>(obj.is_list() ? obj.as_list().size()
                                        : ascii       ? obj.as_string().size()
                                                      : chars.size());
    auto adjust = [&](const Value& v, int64_t def) {
        if (v.is_none()) return def;
        int64_t i = as_index(v);
        if (i < 0) {
            i += n;
            if (i < 0) i = step < 0 ? -1 : 0;
        } else if (i >= n) {
            i = step < 0 ? n - 1 : n;
        }
        return i;
    };
    const int64_t b = adjust(start, step < 0 ? n - 1 : 0);
    const int64_t e = adjust(stop, step < 0 ? -1 : n);
    // Python's slice length, in unsigned arithmetic: `i += step` with a step
    // near 2^63 would wrap past the end (a read out of bounds), so each index
    // is b + k * step for k below the count, which stays within [0, n).
    const uint64_t stride =
        step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    const uint64_t span = step > 0 ? (e > b ? static_cast<uint64_t>(e - b) : 0)
                                   : (b > e ? static_cast<uint64_t>(b - e) : 0);
    const uint64_t count = span ? (span - 1) / stride + 1 : 0;
    charge_steps(count);
    auto index = [&](uint64_t k) {
        const uint64_t offset = k * stride;  // < span <= n: no overflow
        return static_cast<size_t>(step > 0 ? static_cast<uint64_t>(b) + offset
                                            : static_cast<uint64_t>(b) - offset);
    };
    if (obj.is_list()) {
        List out;
        out.reserve(count);
        for (uint64_t k = 0; k < count; ++k) out.push_back(obj.as_list()[index(k)]);
        Value r(std::move(out), obj.is_tuple());
        return obj.from_client() ? r.marked_client() : r;
    }
    std::string out;
    for (uint64_t k = 0; k < count; ++k) {
        if (ascii)
            out += obj.as_string()[index(k)];
        else
            out += chars[index(k)];
    }
    return Value(std::move(out));
}

List iterate(const Value& v) {
    // Copying the elements out is work the size of the sequence.
    if (v.is_list()) charge_steps(v.as_list().size());
    if (v.is_dict()) charge_steps(v.as_dict().items.size());
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return {};
        case Value::Kind::Seq:
            return v.as_list();
        case Value::Kind::String: {
            List l;
            for (auto& c : utf8_chars(v.as_string())) l.emplace_back(std::move(c));
            return l;
        }
        case Value::Kind::Map: {
            if (v.as_dict().is_namespace) break;
            List l;
            for (auto& kv : v.as_dict().items) l.push_back(kv.first);
            return l;
        }
        default:
            break;
    }
    fail("'" + v.type_name() + "' object is not iterable");
}

bool contains(const Value& container, const Value& item) {
    if (container.is_string()) {
        if (!item.is_string())
            fail("'in <string>' requires string as left operand, not " + item.type_name());
        return container.as_string().find(item.as_string()) != std::string::npos;
    }
    if (container.is_list()) {
        for (const Value& v : container.as_list())
            if (py_equal(v, item)) return true;
        return false;
    }
    if (container.is_dict()) return container.as_dict().find(item) != nullptr;
    if (container.is_undefined()) return false;
    fail("argument of type '" + container.type_name() + "' is not iterable");
}

void add_globals(Dict& g) {
    g.set(Value("range"), make_callable("range", [](Args& a) -> Value {
              int64_t start = 0, stop = 0, step = 1;
              if (a.positional.size() == 1)
                  stop = need_int(a.positional[0], "range");
              else if (a.positional.size() >= 2) {
                  start = need_int(a.positional[0], "range");
                  stop = need_int(a.positional[1], "range");
                  if (a.positional.size() >= 3) step = need_int(a.positional[2], "range");
              } else
                  fail("range expected at least 1 argument");
              if (step == 0) fail("range() arg 3 must not be zero");
              const double count =
                  std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                            static_cast<double>(step));
              if (count > static_cast<double>(kMaxRange))
                  fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                       std::to_string(kMaxRange) + ").");
              List l;
              for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) l.emplace_back(i);
              return Value(std::move(l));
          }));
    g.set(Value("namespace"), make_callable("namespace", [](Args& a) -> Value {
              auto d = std::make_shared<Dict>();
              d->is_namespace = true;
              for (const Value& p : a.positional) {
                  if (!p.is_dict()) fail("namespace() takes mappings as positional arguments");
                  for (auto& [k, v] : p.as_dict().items) d->set(k, v);
              }
              for (auto& [k, v] : a.keyword) d->set(Value(k), v);
              return Value(d);
          }));
    g.set(Value("dict"), make_callable("dict", [](Args& a) -> Value {
              Value d = make_dict();
              for (const Value& p : a.positional) {
                  if (!p.is_dict()) fail("dict() takes a mapping");
                  for (auto& [k, v] : p.as_dict().items) d.as_dict().set(k, v);
              }
              for (auto& [k, v] : a.keyword) d.as_dict().set(Value(k), v);
              return d;
          }));
    g.set(Value("raise_exception"), make_callable("raise_exception", [](Args& a) -> Value {
              fail("raise_exception: " + py_str(a.get(0, "message", Value(""))));
          }));
    g.set(Value("strftime_now"), make_callable("strftime_now", [](Args& a) -> Value {
              const std::string fmt = need_string(a.get(0, "format"), "strftime_now");
              const std::time_t now = std::time(nullptr);
              std::tm tm{};
              localtime_r(&now, &tm);
              char buf[512];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
              // The format is the template's, as with Python's strftime.
              const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
#pragma GCC diagnostic pop
              if (n == 0 && !fmt.empty()) fail("strftime_now: format too long or empty result");
              return Value(std::string(buf, n));
          }));
}

}  // namespace ferrox::tmpl
