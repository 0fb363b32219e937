#include "request_fields.h"

#include <fmt/format.h>

#include <algorithm>

#include "bounded_json.h"

namespace ferrox::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// Fields OpenAI defines that ferrox does not implement: refused by name.
const std::set<std::string, std::less<>> kUnsupported{
    "functions", "function_call", "modalities",   "audio", "prediction", "web_search_options",
    "store",     "metadata",      "service_tier", "echo",  "suffix",     "best_of"};

}  // namespace

std::string json_text(const ordered_json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Fields::Fields(const ordered_json& object, std::string where)
    : o_(object), where_(std::move(where)) {
    if (!o_.is_object()) {  // named as itself, not as a key inside itself
        const std::string name = where_.empty() ? "the body" : where_;
        throw ApiError{400, fmt::format("'{}' must be a JSON object", name), name};
    }
}

bool Fields::has(const char* key) {
    seen_.insert(key);
    return o_.contains(key) && !o_.at(key).is_null();
}

const ordered_json& Fields::raw(const char* key) {
    seen_.insert(key);
    if (!o_.contains(key)) fail(key, "is required");
    return o_.at(key);
}

double Fields::number(const char* key, double lo, double hi, double fallback) {
    if (!has(key)) return fallback;
    const auto& v = o_.at(key);
    if (!v.is_number()) fail(key, "must be a number");
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi)) fail(key, fmt::format("must be between {} and {}", lo, hi));
    return d;
}

int64_t Fields::integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    if (!has(key)) return fallback;
    const auto& v = o_.at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    const int64_t i =
        v.is_number_unsigned()
            ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(INT64_MAX)))
            : v.get<int64_t>();
    if (i < lo || i > hi) fail(key, fmt::format("must be between {} and {}", lo, hi));
    return i;
}

bool Fields::boolean(const char* key, bool fallback) {
    if (!has(key)) return fallback;
    if (!o_.at(key).is_boolean()) fail(key, "must be true or false");
    return o_.at(key).get<bool>();
}

std::string Fields::string(const char* key, std::string fallback) {
    if (!has(key)) return fallback;
    if (!o_.at(key).is_string()) fail(key, "must be a string");
    return o_.at(key).get<std::string>();
}

void Fields::refuse_the_rest() {
    for (auto it = o_.begin(); it != o_.end(); ++it) {
        if (seen_.count(it.key())) continue;
        if (kUnsupported.count(it.key())) fail(it.key(), "is not supported by ferrox");
        fail(it.key(), "is not a field this endpoint knows");
    }
}

void refuse_field(const std::string& name, const std::string& why) {
    throw ApiError{400, fmt::format("'{}' {}", name, why), name};
}

void Fields::fail(const std::string& key, const std::string& why) const {
    refuse_field(where_.empty() ? key : where_ + "." + key, why);
}

namespace {

constexpr size_t kMaxCallsPerMessage = 128;

// An assistant message's earlier calls, for the template: arguments as a
// JSON object when they parse as one (transformers' convention, which
// templates are written for), else the text as sent.
ordered_json checked_tool_calls(const ordered_json& calls, const std::string& where) {
    if (!calls.is_array()) throw ApiError{400, fmt::format("'{}' must be an array", where), where};
    if (calls.size() > kMaxCallsPerMessage)
        throw ApiError{400,
                       fmt::format("'{}' has {} entries; at most {}", where, calls.size(),
                                   kMaxCallsPerMessage),
                       where};
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", where, i);
        Fields call(calls[i], at);
        const std::string id = call.string("id", "");
        if (call.string("type", "function") != "function") call.fail("type", "must be 'function'");
        if (!call.has("function")) call.fail("function", "is required");
        Fields fn(call.raw("function"), at + ".function");
        const std::string name = fn.string("name", "");
        if (name.empty()) fn.fail("name", "is required");
        const std::string text = fn.string("arguments", "{}");
        fn.refuse_the_rest();
        call.refuse_the_rest();
        // Bounded as the body was: the text is the client's.
        auto parsed = parse_bounded_json(text, kRequestJsonLimits);
        ordered_json arguments =
            parsed && parsed->is_object() ? std::move(*parsed) : ordered_json(text);
        out.push_back({{"id", id},
                       {"type", "function"},
                       {"function", {{"name", name}, {"arguments", std::move(arguments)}}}});
    }
    return out;
}

}  // namespace

ordered_json checked_messages(const ordered_json& messages, uint32_t max_messages) {
    if (!messages.is_array() || messages.empty())
        throw ApiError{400, "'messages' must be a non-empty array", "messages"};
    if (messages.size() > max_messages)
        throw ApiError{
            400,
            fmt::format("'messages' has {} entries; at most {}", messages.size(), max_messages),
            "messages"};
    static const std::set<std::string, std::less<>> kRoles{"system", "user", "assistant", "tool"};
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string where = fmt::format("messages[{}]", i);
        Fields f(messages[i], where);
        const std::string role = f.string("role", "");
        if (!kRoles.count(role)) f.fail("role", "must be one of system, user, assistant, tool");
        std::string content;
        if (f.has("content")) {
            const ordered_json& c = f.raw("content");
            if (c.is_string()) {
                content = c.get<std::string>();
            } else if (c.is_array()) {
                for (size_t j = 0; j < c.size(); ++j) {
                    Fields part(c[j], fmt::format("{}.content[{}]", where, j));
                    const std::string type = part.string("type", "");
                    if (type != "text")
                        part.fail("type",
                                  fmt::format("'{}' is not supported by ferrox (only text)", type));
                    if (!part.has("text") || !part.raw("text").is_string())
                        part.fail("text", "must be a string");
                    content += part.raw("text").get<std::string>();
                    part.refuse_the_rest();
                }
            } else {
                f.fail("content", "must be a string or an array of text parts");
            }
        } else if (role != "assistant") {
            f.fail("content", "is required");
        }
        ordered_json m{{"role", role}, {"content", content}};
        if (f.has("name")) m["name"] = f.string("name", "");
        if (f.has("tool_call_id")) {
            if (role != "tool") f.fail("tool_call_id", "belongs to a message of role 'tool'");
            m["tool_call_id"] = f.string("tool_call_id", "");
        }
        if (role == "assistant" && f.has("tool_calls"))
            m["tool_calls"] = checked_tool_calls(f.raw("tool_calls"), where + ".tool_calls");
        if (role == "assistant" && f.has("reasoning_content"))
            m["reasoning_content"] = f.string("reasoning_content", "");  // templates read it
        f.refuse_the_rest();
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace ferrox::server
