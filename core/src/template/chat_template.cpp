// The public face of the template engine: parse once, render many times, and
// turn every engine error into "<origin>:<line>: <construct>: <why>".
#include "ferrox/template/chat_template.h"

#include <algorithm>

#include "template/builtins.h"
#include "template/evaluator.h"
#include "template/parser.h"

namespace ferrox {
namespace {

using tmpl::Value;

Value from_json_at(const nlohmann::ordered_json& j, bool client, size_t depth);

// A client's JSON nests as deeply as it likes; the values the template sees may
// not (kMaxValueDepth), and this walk recurses, so it stops there first.
Value from_json(const nlohmann::ordered_json& j, bool client, size_t depth = 0) {
    if (depth > tmpl::kMaxValueDepth)
        throw tmpl::ValueError("the context nests deeper than " +
                               std::to_string(tmpl::kMaxValueDepth) + " levels");
    Value v = from_json_at(j, client, depth);
    if (!client) return v;
    return v.is_string() ? v.as_client() : v.marked_client();
}

Value from_json_at(const nlohmann::ordered_json& j, bool client, size_t depth) {
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = j.get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
            return Value(static_cast<int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value(j.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            tmpl::List l;
            for (const auto& item : j) l.push_back(from_json(item, client, depth + 1));
            return Value(std::move(l));
        }
        case nlohmann::ordered_json::value_t::object: {
            Value d = tmpl::make_dict();
            for (const auto& [k, v] : j.items()) {
                const Value key(k);
                d.as_dict().set(client ? key.as_client() : key, from_json(v, client, depth + 1));
            }
            return d;
        }
        default:
            return Value::none();
    }
}

// jinja2 refuses an unknown filter or test when it compiles the template, except
// inside an `if` (statement or expression) of the same scope, where it waits for
// the render to reach it; a for, macro or call body starts a new scope.
void check_names(const tmpl::Expr* e, bool in_if);

void check_args(const tmpl::CallArgs& a, bool in_if) {
    for (const auto& p : a.positional) check_names(p.get(), in_if);
    for (const auto& [k, p] : a.keyword) check_names(p.get(), in_if);
}

void check_names(const tmpl::Expr* e, bool in_if) {
    if (!e) return;
    if (e->kind == tmpl::Expr::Kind::Cond) in_if = true;
    if (!in_if && e->kind == tmpl::Expr::Kind::Filter && !tmpl::is_known_filter(e->name))
        throw tmpl::TemplateError(e->line, "filter '" + e->name + "'",
                                  "no filter named '" + e->name + "'");
    if (!in_if && e->kind == tmpl::Expr::Kind::Test && !tmpl::is_known_test(e->name))
        throw tmpl::TemplateError(e->line, "test '" + e->name + "'",
                                  "no test named '" + e->name + "'");
    for (const auto& c : e->items) check_names(c.get(), in_if);
    check_args(e->args, in_if);
}

void check_body(const tmpl::Body& body, bool in_if) {
    for (const auto& s : body) {
        const bool is_if = s->kind == tmpl::Stmt::Kind::If;
        const bool new_scope = s->kind == tmpl::Stmt::Kind::For ||
                               s->kind == tmpl::Stmt::Kind::Macro ||
                               s->kind == tmpl::Stmt::Kind::CallBlock;
        const bool inner = is_if ? true : (new_scope ? false : in_if);
        check_names(s->expr.get(), in_if);
        check_names(s->cond.get(), inner);
        for (const auto& c : s->conditions) check_names(c.get(), true);
        for (const auto& b : s->bodies) check_body(b, true);
        for (const auto& p : s->params) check_names(p.default_value.get(), inner);
        check_body(s->body, inner);
        check_body(s->else_body, inner);
    }
}

Error located(const std::string& origin, const tmpl::TemplateError& e) {
    return make_error("{}:{}: {}: {}", origin, e.line, e.construct, e.what());
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string source, std::string origin) {
    if (source.size() > kMaxChatTemplateSource)
        return make_error("{}: the template is {} bytes; a chat template is at most {} bytes",
                          origin, source.size(), kMaxChatTemplateSource);
    ChatTemplate t;
    try {
        auto program = std::make_shared<tmpl::Program>(tmpl::parse(source));
        check_body(program->body, false);
        t.program_ = std::move(program);
    } catch (const tmpl::TemplateError& e) {
        return located(origin, e);
    }
    t.source_ = std::move(source);
    t.origin_ = std::move(origin);
    return t;
}

Expected<std::string> ChatTemplate::render(const nlohmann::ordered_json& context) const {
    auto marked = render_marked(context, {});
    if (!marked) return marked.error();
    return std::move(marked->text);
}

Expected<MarkedPrompt> ChatTemplate::render_marked(
    const nlohmann::ordered_json& context, std::span<const std::string_view> trusted) const {
    if (!context.is_object()) return make_error("{}: the context must be a JSON object", origin_);
    try {
        tmpl::Dict vars;
        for (const auto& [k, v] : context.items()) {
            const bool client =
                std::find(trusted.begin(), trusted.end(), std::string_view(k)) == trusted.end();
            vars.set(Value(k), from_json(v, client));
        }
        const tmpl::RenderLimits limits{limits_.max_steps, limits_.max_call_depth,
                                        limits_.max_output, limits_.max_memory,
                                        limits_.max_eval_depth};
        tmpl::MarkedText out = tmpl::render_marked(*program_, vars, limits);
        MarkedPrompt p{std::move(out.text), {}};
        p.client.reserve(out.client.size());
        for (const auto& sp : out.client) p.client.push_back({sp.begin, sp.end});
        return p;
    } catch (const tmpl::TemplateError& e) {
        return located(origin_, e);
    } catch (const tmpl::ValueError& e) {
        return make_error("{}: {}", origin_, e.what());
    }
}

nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages,
                                    bool add_generation_prompt, const std::string& bos_token,
                                    const std::string& eos_token,
                                    const nlohmann::ordered_json& tools,
                                    const nlohmann::ordered_json& kwargs) {
    nlohmann::ordered_json c = nlohmann::ordered_json::object();
    c["messages"] = messages;
    // As transformers passes them: None when absent, which `tools is not none` tests.
    c["tools"] = tools.is_array() && !tools.empty() ? tools : nlohmann::ordered_json(nullptr);
    c["documents"] = nullptr;
    c["add_generation_prompt"] = add_generation_prompt;
    c["bos_token"] = bos_token;
    c["eos_token"] = eos_token;
    if (kwargs.is_object())
        for (const auto& [key, value] : kwargs.items())
            if (std::find(std::begin(kChatContextKeys), std::end(kChatContextKeys), key) ==
                std::end(kChatContextKeys))
                c[key] = value;
    return c;
}

}  // namespace ferrox
