// The values a chat template computes with, and the Python semantics the output
// depends on: jinja2 prints values with Python's str(), so a float, a list or a
// dict must print exactly as CPython would for the prompt to be byte-identical.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferrox::tmpl {

// A render or parse failure: the template line and the construct that failed.
struct TemplateError : std::runtime_error {
    TemplateError(int at_line, std::string what_construct, const std::string& message)
        : std::runtime_error(message), line(at_line), construct(std::move(what_construct)) {}
    int line;               // 1-based; 0 when unknown
    std::string construct;  // "filter 'tojson'", "for", "call to 'raise_exception'", ...
};

// Thrown by a builtin that has no line of its own; the evaluator adds the line.
struct ValueError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// How deeply values may nest (lists, dicts, namespaces): Python stops at its
// recursion limit (1000 frames) when printing or comparing deeper values;
// here every walker stops at this depth with a ValueError instead of
// overflowing the stack, and a namespace attribute may not be set to a value
// nesting deeper (the only way a template grows a value across iterations).
inline constexpr size_t kMaxValueDepth = 512;

// A render's default output limit (RenderLimits::max_output).
inline constexpr size_t kDefaultMaxOutput = size_t{64} << 20;

// At most kMaxStringPieces elements in a list cut from one string (its
// characters, split parts or lines: each element is a Value of ~100 bytes, so
// a 64 MiB string cut into characters would take 6 GB).
inline constexpr size_t kMaxStringPieces = size_t{1} << 20;

// What one render may spend, charged as it goes by the evaluator and by the
// builtins (a builtin charges the work it does: n for a join or `in` over a
// list, n log n for a sort, n^2 for unique). Outside a render nothing is charged
// and strings are capped at kDefaultMaxOutput.
struct RenderBudget {
    uint64_t max_steps = 0;  // statements + expressions + loop iterations + builtin work
    uint64_t max_bytes = 0;  // bytes of strings, list and dict slots created, in total
    size_t max_string = 0;   // bytes of any one string (the render's max_output)
    uint64_t steps = 0, bytes = 0;
};
// ValueError "string longer than the output limit" past the render's max_output.
void check_string_length(size_t length);
// ValueError past kMaxStringPieces.
void check_piece_count(size_t count);
// ValueError naming the step budget when `work` more steps exceed it.
void charge_steps(uint64_t work);
// ValueError naming the memory budget when `bytes` more bytes exceed it.
void charge_bytes(uint64_t bytes);
// Makes `budget` the one this thread charges while it lives (the evaluator's render).
class BudgetScope {
  public:
    explicit BudgetScope(RenderBudget& budget);
    ~BudgetScope();
    BudgetScope(const BudgetScope&) = delete;
    BudgetScope& operator=(const BudgetScope&) = delete;

  private:
    RenderBudget* saved_;
};

// Byte ranges [begin, end) of a string that came from the request (a message's
// content, a name, a tool call's arguments...), in order and not overlapping.
// A value carries them through concatenation, output and joins; whatever a
// builtin computes from client text is client text as a whole (conservative).
struct ClientSpan {
    size_t begin, end;
};
using ClientSpans = std::vector<ClientSpan>;

class Value;
using List = std::vector<Value>;
struct Dict;
struct Callable;

class Value {
  public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, Seq, Map, Func };

    Value() = default;  // undefined
    static Value none() { return Value(Kind::None); }
    // `why`: the message an error raises when the value is used ("'x' is undefined").
    static Value undefined(std::string why = {}) {
        Value v;
        v.str_ = std::make_shared<const std::string>(std::move(why));
        return v;
    }
    Value(bool b) : kind_(Kind::Bool), int_(b) {}
    Value(int i) : kind_(Kind::Int), int_(i) {}
    Value(int64_t i) : kind_(Kind::Int), int_(i) {}
    Value(double d) : kind_(Kind::Float), float_(d) {}
    Value(std::string s);
    Value(const char* s) : Value(std::string(s)) {}
    // A string whose `spans` came from the request (see ClientSpans).
    static Value client_string(std::string s, ClientSpans spans);
    Value(List l, bool tuple = false);
    // What map/select/selectattr/reject/rejectattr return in jinja2: a Python
    // generator. It iterates like a list but is always truthy, has no len(), no
    // index, and tojson refuses it -- templates depend on each of those.
    static Value generator(List l) {
        Value v(std::move(l));
        v.generator_ = true;
        return v;
    }
    // A markupsafe.Markup string (from |safe or |escape): `Markup + str` escapes the str.
    static Value markup(std::string s) {
        Value v(std::move(s));
        v.markup_ = true;
        return v;
    }
    Value(std::shared_ptr<Dict> d);
    Value(std::shared_ptr<Callable> c);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return is_int() || is_float() || is_bool(); }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::Seq; }
    bool is_tuple() const { return kind_ == Kind::Seq && tuple_; }
    bool is_generator() const { return kind_ == Kind::Seq && generator_; }
    bool is_markup() const { return kind_ == Kind::String && markup_; }
    bool is_dict() const { return kind_ == Kind::Map; }
    bool is_callable() const { return kind_ == Kind::Func; }

    bool as_bool() const { return int_ != 0; }
    int64_t as_int() const { return int_; }
    double as_float() const { return is_float() ? float_ : static_cast<double>(int_); }
    const std::string& as_string() const { return str_ ? *str_ : empty_string(); }
    const std::string& undefined_name() const { return as_string(); }
    const List& as_list() const { return *list_; }
    List& as_list() { return *list_; }
    const std::shared_ptr<List>& list_ptr() const { return list_; }
    Dict& as_dict() const { return *dict_; }
    const std::shared_ptr<Dict>& dict_ptr() const { return dict_; }
    Callable& as_callable() const { return *callable_; }

    bool truthy() const;

    // Provenance. from_client: the value is or holds text from the request (a
    // container: some element may be); client_spans: where in a string.
    bool from_client() const;
    const ClientSpans& client_spans() const;
    // This value with every string in it, keys included, client text as a
    // whole and every container marked (what a builtin returns from client input).
    Value as_client() const;
    // A copy marked as derived from client data; a string keeps its spans
    // (its client bytes are where they say: none when it has none).
    Value marked_client() const;
    // How deeply containers nest in this value (a scalar 0, [1] 1); a list
    // nesting deeper than kMaxValueDepth is refused when it is built, so no walk
    // and no destructor ever recurses further.
    uint32_t depth() const;
    // Python's type name: 'str', 'int', 'list', 'dict', ... (for error messages).
    std::string type_name() const;

  private:
    explicit Value(Kind k) : kind_(k) {}
    static const std::string& empty_string();
    Value as_client_at(size_t depth) const;
    Kind kind_ = Kind::Undefined;
    bool tuple_ = false;
    bool generator_ = false;
    bool markup_ = false;
    uint32_t depth_ = 0;  // lists: fixed when built; dicts: Dict::depth
    int64_t int_ = 0;
    double float_ = 0;
    // Shared, never copied: reading a variable or passing a string around
    // costs a reference count, not its bytes.
    std::shared_ptr<const std::string> str_;
    // Non-null: from the client (for a string, where; empty spans on a
    // non-string mean "derived from client data").
    std::shared_ptr<const ClientSpans> client_;
    std::shared_ptr<List> list_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<Callable> callable_;
};

// An insertion-ordered dict, as Python's. Chat-template dicts are small, so a
// linear search beats hashing and keeps the order for free.
struct Dict {
    std::vector<std::pair<Value, Value>> items;
    bool is_namespace = false;  // namespace(): its attributes may be assigned
    bool from_client = false;   // holds (or may hold) client text
    uint32_t depth = 1;         // 1 + the deepest key or value (as Value::depth)
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    void set(Value key, Value value);
    // set() for a key known to be new (the evaluator's loop variable): no search,
    // so no comparisons charged to the template's step budget.
    void add_new(Value key, Value value);
};

// Positional and keyword arguments of a call.
struct Args {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
    // The argument at `index` or named `name`, or `fallback` when absent.
    Value get(size_t index, std::string_view name, Value fallback = Value()) const;
    bool has(size_t index, std::string_view name) const;
};

struct Callable {
    std::string name;
    std::function<Value(Args&)> call;
    bool is_macro = false;  // the template's own: its result carries its own provenance
};

Value make_dict();
Value make_callable(std::string name, std::function<Value(Args&)> call);

// Python's str() and repr().
std::string py_str(const Value& v);
std::string py_repr(const Value& v);
std::string py_float_repr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...):
// indent < 0 means None; absent separators take json.dumps' defaults.
std::string json_dumps(const Value& v, int indent, const std::optional<std::string>& item_sep,
                       const std::optional<std::string>& key_sep, bool sort_keys);

// Python's ==, and < for the orderable pairs (numbers, strings, lists); < throws
// ValueError for pairs Python refuses to order.
bool py_equal(const Value& a, const Value& b);
bool py_less(const Value& a, const Value& b);

// The deepest nesting of containers in v (a scalar is 0, [1] is 1), walked
// without recursion; a container met again on its own path (a namespace that
// holds itself) is not walked twice. Stops counting past `limit`.
size_t nesting_depth(const Value& v, size_t limit);

// Unicode-aware helpers: Python counts and slices code points, not bytes.
std::vector<std::string> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);

}  // namespace ferrox::tmpl
