#include "call_text.h"

#include <nlohmann/json.hpp>

namespace ferrox::chat_format {
namespace {

using nlohmann::ordered_json;

struct TooDeep {};

// JSON text to a value, nesting bounded while it is read (the parser is
// iterative; the callback stops it before anything deeper is built).
std::optional<ordered_json> parse_json(std::string_view text, int max_depth) {
    const auto bound = [max_depth](int depth, ordered_json::parse_event_t event, ordered_json&) {
        using E = ordered_json::parse_event_t;
        if ((event == E::object_start || event == E::array_start) && depth >= max_depth)
            throw TooDeep{};
        return true;
    };
    try {
        return ordered_json::parse(text.begin(), text.end(), bound);
    } catch (const TooDeep&) {
        return std::nullopt;
    } catch (const ordered_json::exception&) {
        return std::nullopt;
    }
}

std::string compact(const ordered_json& value) {
    return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// Arguments are a JSON object, or a string that holds one (OpenAI style).
std::optional<std::string> object_arguments(const ordered_json& args, int max_depth) {
    if (args.is_object()) return compact(args);
    if (args.is_string()) {
        auto inner = parse_json(args.get_ref<const std::string&>(), max_depth);
        if (inner && inner->is_object()) return compact(*inner);
    }
    return std::nullopt;
}

std::optional<CallText> call_from_object(const ordered_json& call, int max_depth) {
    if (!call.is_object()) return std::nullopt;
    const auto name = call.find("name");
    if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
        return std::nullopt;
    auto args = call.find("arguments");
    if (args == call.end()) args = call.find("parameters");
    std::optional<std::string> arguments =
        args == call.end() ? std::optional<std::string>("{}") : object_arguments(*args, max_depth);
    if (!arguments) return std::nullopt;
    return CallText{name->get<std::string>(), std::move(*arguments)};
}

// A parameter's text: the text itself when the tool declares it text (the
// schema says string), else JSON when it parses as JSON (numbers, booleans,
// objects, quoted strings), else the text as a string.
ordered_json parameter_value(std::string_view text, int max_depth,
                             const std::set<std::string, std::less<>>* text_names,
                             std::string_view key) {
    if (text_names && text_names->find(key) != text_names->end())
        return ordered_json(std::string(text));
    auto value = parse_json(text, max_depth);
    return value ? std::move(*value) : ordered_json(std::string(text));
}

const std::set<std::string, std::less<>>* text_names_of(const TextParameters& all,
                                                        std::string_view tool) {
    const auto it = all.find(tool);
    return it == all.end() ? nullptr : &it->second;
}

bool consume(std::string_view& s, std::string_view prefix) {
    if (!s.starts_with(prefix)) return false;
    s.remove_prefix(prefix.size());
    return true;
}

// The text up to `end`, consumed with it; nullopt when `end` is missing.
std::optional<std::string_view> take_until(std::string_view& s, std::string_view end) {
    const size_t at = s.find(end);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view head = s.substr(0, at);
    s.remove_prefix(at + end.size());
    return head;
}

std::string_view drop_one_newline(std::string_view s) {
    if (s.starts_with('\n')) s.remove_prefix(1);
    if (s.ends_with('\n')) s.remove_suffix(1);
    return s;
}

}  // namespace

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim_blanks(std::string_view s) {
    while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
    return s;
}

JsonExtent::Result JsonExtent::scan(std::string_view text, int max_depth) {
    for (; pos_ < text.size(); ++pos_) {
        const char c = text[pos_];
        if (!started_) {
            if (is_blank(c)) continue;
            if (c != '{' && c != '[') return Result::Invalid;
            started_ = true;
        }
        if (in_string_) {
            if (escape_)
                escape_ = false;
            else if (c == '\\')
                escape_ = true;
            else if (c == '"')
                in_string_ = false;
            continue;
        }
        if (c == '"') {
            in_string_ = true;
        } else if (c == '{' || c == '[') {
            if (++depth_ > max_depth) return Result::Invalid;
        } else if (c == '}' || c == ']') {
            if (--depth_ == 0) {
                ++pos_;
                return Result::Done;
            }
        }
    }
    return Result::NeedMore;
}

std::optional<Calls> json_calls(std::string_view text, bool list_ok, int max_depth) {
    auto doc = parse_json(trim_blanks(text), max_depth);
    if (!doc) return std::nullopt;
    Calls calls;
    if (doc->is_array() && list_ok) {
        if (doc->empty()) return std::nullopt;
        for (const auto& item : *doc) {
            auto call = call_from_object(item, max_depth);
            if (!call) return std::nullopt;
            calls.push_back(std::move(*call));
        }
        return calls;
    }
    auto call = call_from_object(*doc, max_depth);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    return calls;
}

std::optional<Calls> json_call_sequence(std::string_view text, int max_depth) {
    Calls calls;
    std::string_view rest = text;
    while (true) {
        while (!rest.empty() && (is_blank(rest.front()) || rest.front() == ';'))
            rest.remove_prefix(1);
        if (rest.empty()) break;
        JsonExtent extent;
        if (extent.scan(rest, max_depth) != JsonExtent::Result::Done) return std::nullopt;
        auto one = json_calls(rest.substr(0, extent.end()), false, max_depth);
        if (!one) return std::nullopt;
        calls.insert(calls.end(), one->begin(), one->end());
        rest.remove_prefix(extent.end());
    }
    if (calls.empty()) return std::nullopt;
    return calls;
}

std::optional<CallText> xml_function_call(std::string_view text, int max_depth,
                                          const TextParameters& text_parameters) {
    std::string_view s = trim_blanks(text);
    if (!consume(s, "<function=")) return std::nullopt;
    auto name = take_until(s, ">");
    if (!name || name->empty()) return std::nullopt;
    const auto* text_names = text_names_of(text_parameters, *name);
    ordered_json args = ordered_json::object();
    while (true) {
        s = trim_blanks(s);
        if (consume(s, "</function>")) break;
        if (!consume(s, "<parameter=")) return std::nullopt;
        auto key = take_until(s, ">");
        auto value = take_until(s, "</parameter>");
        if (!key || key->empty() || !value) return std::nullopt;
        args[std::string(*key)] =
            parameter_value(drop_one_newline(*value), max_depth, text_names, *key);
    }
    if (!trim_blanks(s).empty()) return std::nullopt;
    return CallText{std::string(*name), compact(args)};
}

std::optional<CallText> arg_key_call(std::string_view text, int max_depth,
                                     const TextParameters& text_parameters) {
    std::string_view s = text;
    const size_t first_key = s.find("<arg_key>");
    const std::string_view name = trim_blanks(s.substr(0, first_key));
    if (name.empty() || name.find('<') != std::string_view::npos) return std::nullopt;
    const auto* text_names = text_names_of(text_parameters, name);
    s.remove_prefix(first_key == std::string_view::npos ? s.size() : first_key);
    ordered_json args = ordered_json::object();
    while (!(s = trim_blanks(s)).empty()) {
        if (!consume(s, "<arg_key>")) return std::nullopt;
        auto key = take_until(s, "</arg_key>");
        if (!key) return std::nullopt;
        s = trim_blanks(s);
        if (!consume(s, "<arg_value>")) return std::nullopt;
        auto value = take_until(s, "</arg_value>");
        if (!value) return std::nullopt;
        args[std::string(*key)] = parameter_value(*value, max_depth, text_names, *key);
    }
    return CallText{std::string(name), compact(args)};
}

std::optional<Calls> deepseek_calls(std::string_view text, int max_depth) {
    constexpr std::string_view kBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>",
                               kEnd = "<｜tool▁call▁end｜>";
    Calls calls;
    std::string_view s = text;
    while (!(s = trim_blanks(s)).empty()) {
        if (!consume(s, kBegin)) return std::nullopt;
        auto head = take_until(s, kSep);
        auto body = take_until(s, kEnd);
        if (!head || !body) return std::nullopt;
        std::string_view name = trim_blanks(*head), args = *body;
        if (name == "function") {  // R1: function<sep>NAME\n```json\nARGS\n```
            const size_t newline = args.find('\n');
            if (newline == std::string_view::npos) return std::nullopt;
            name = trim_blanks(args.substr(0, newline));
            args = trim_blanks(args.substr(newline + 1));
            if (!consume(args, "```json") || !args.ends_with("```")) return std::nullopt;
            args.remove_suffix(3);
        }
        if (name.empty()) return std::nullopt;
        auto call = named_json_call(std::string(name), args, max_depth);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
    }
    if (calls.empty()) return std::nullopt;
    return calls;
}

std::optional<Calls> python_tag_calls(std::string_view text, int max_depth) {
    std::string_view code = trim_blanks(text);
    for (std::string_view end : {"<|eom_id|>", "<|eot_id|>"})
        if (code.ends_with(end)) code = trim_blanks(code.substr(0, code.size() - end.size()));
    if (code.empty()) return std::nullopt;
    if (code.front() == '{') return json_call_sequence(code, max_depth);
    // Llama 3.1's code interpreter: the text is Python for the "python" tool.
    return Calls{CallText{"python", compact(ordered_json{{"code", std::string(code)}})}};
}

std::optional<CallText> named_json_call(std::string name, std::string_view text, int max_depth) {
    auto args = parse_json(trim_blanks(text), max_depth);
    if (!args) return std::nullopt;
    auto arguments = object_arguments(*args, max_depth);
    if (!arguments) return std::nullopt;
    return CallText{std::move(name), std::move(*arguments)};
}

}  // namespace ferrox::chat_format
