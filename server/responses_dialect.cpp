#include "responses_dialect.h"

#include <fmt/format.h>

#include <ctime>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "chat_tools.h"
#include "chat_turn.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "structured_output.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// OpenAI's tools other than functions (most of them hosted): ferrox runs
// none of them, and says so by name.
const std::set<std::string, std::less<>> kHostedTools{"web_search",
                                                      "web_search_preview",
                                                      "web_search_2025_08_26",
                                                      "web_search_preview_2025_03_11",
                                                      "file_search",
                                                      "computer_use_preview",
                                                      "computer",
                                                      "code_interpreter",
                                                      "image_generation",
                                                      "mcp",
                                                      "local_shell",
                                                      "shell",
                                                      "apply_patch",
                                                      "custom",
                                                      "tool_search"};
// Input items of those tools, likewise.
const std::set<std::string, std::less<>> kHostedItems{
    "custom_tool_call", "custom_tool_call_output", "web_search_call",       "file_search_call",
    "computer_call",    "computer_call_output",    "code_interpreter_call", "image_generation_call",
    "mcp_call",         "mcp_list_tools",          "mcp_approval_request",  "mcp_approval_response",
    "local_shell_call", "local_shell_call_output", "item_reference"};

// Calls of one assistant turn (checked_messages' bound, named here by item).
constexpr size_t kMaxCallsInARow = 128;

// OpenAI's limits on metadata, which the response echoes.
constexpr size_t kMaxMetadataPairs = 16, kMaxMetadataKey = 64, kMaxMetadataValue = 512;

std::string sse(const ordered_json& event) {
    return "event: " + event["type"].get<std::string>() + "\ndata: " + json_text(event) + "\n\n";
}

// The Responses API's word for a whole answer's end: incomplete when the
// output budget (max_output_tokens, or the positions left) ran out.
bool ran_out(FinishReason why) { return why == FinishReason::Length; }

// A default as the response echoes it: 0.8, not 0.800000011920929.
double shown(float v) { return std::stod(fmt::format("{}", v)); }

ordered_json output_text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", ordered_json::array()}};
}

ordered_json usage(const Event& done, size_t reasoning_tokens) {
    return {{"input_tokens", done.prompt_tokens},
            // ferrox does not count what it writes to its prefix cache.
            {"input_tokens_details",
             {{"cached_tokens", done.cached_tokens}, {"cache_write_tokens", 0}}},
            {"output_tokens", done.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
            {"total_tokens", done.prompt_tokens + done.completion_tokens}};
}

// One input message's text (`key`: its content): a string, or a list of text parts.
std::string content_text(Fields& item, const std::string& where, const char* key = "content") {
    if (!item.has(key)) item.fail(key, "is required");
    const ordered_json& c = item.raw(key);
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) item.fail(key, "must be a string or a list of content parts");
    std::string text;
    for (size_t j = 0; j < c.size(); ++j) {
        Fields part(c[j], fmt::format("{}.{}[{}]", where, key, j));
        const std::string type = part.string("type", "");
        if (type != "input_text" && type != "output_text")
            part.fail("type", fmt::format("'{}' is not supported by ferrox (only input_text and "
                                          "output_text)",
                                          type));
        if (!part.has("text") || !part.raw("text").is_string())
            part.fail("text", "must be a string");
        text += part.raw("text").get<std::string>();
        if (type == "output_text") {
            // An earlier answer sent back as it came: its citations and
            // log-probabilities describe that answer and change nothing here.
            if (part.has("annotations") && !part.raw("annotations").is_array())
                part.fail("annotations", "must be a list");
            if (part.has("logprobs") && !part.raw("logprobs").is_array())
                part.fail("logprobs", "must be a list");
        }
        part.refuse_the_rest();
    }
    return text;
}

// A reasoning item sent back: its reasoning text (or, without one, its summary).
std::string reasoning_item_text(Fields& item, const std::string& where) {
    (void)item.string("id", "");
    (void)item.string("status", "");
    if (item.has("encrypted_content"))
        item.fail("encrypted_content", "is not supported by ferrox (it writes none)");
    const auto texts = [&](const char* key, const char* type) {
        std::string out;
        if (!item.has(key)) return out;
        const ordered_json& list = item.raw(key);
        if (!list.is_array()) item.fail(key, "must be a list");
        for (size_t j = 0; j < list.size(); ++j) {
            Fields part(list[j], fmt::format("{}.{}[{}]", where, key, j));
            if (part.string("type", "") != type)
                part.fail("type", fmt::format("must be '{}'", type));
            out += part.string("text", "");
            part.refuse_the_rest();
        }
        return out;
    };
    std::string summary = texts("summary", "summary_text");
    std::string content = texts("content", "reasoning_text");
    item.refuse_the_rest();
    return content.empty() ? summary : content;
}

// `input` (and `instructions`, first, as a system message) as Chat
// Completions messages, which checked_messages then checks like any chat
// request: function_call items become the tool_calls of an assistant
// message (joined to the assistant message right before them),
// function_call_output items tool messages, and a reasoning item the
// reasoning_content of the assistant message after it.
ordered_json input_messages(Fields& f, const RequestLimits& limits) {
    ordered_json messages = ordered_json::array();
    if (f.has("instructions"))
        messages.push_back({{"role", "system"}, {"content", f.string("instructions", "")}});
    if (!f.has("input")) f.fail("input", "is required");
    const ordered_json& input = f.raw("input");
    if (input.is_string()) {
        messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
        return messages;
    }
    if (!input.is_array() || input.empty())
        f.fail("input", "must be a string or a non-empty list of input items");
    if (input.size() > limits.max_messages)
        f.fail("input", fmt::format("has {} items; at most {}", input.size(), limits.max_messages));
    std::string reasoning;  // of the next assistant message
    const auto assistant = [&](ordered_json m) {
        if (!reasoning.empty()) m["reasoning_content"] = std::move(reasoning);
        reasoning.clear();
        messages.push_back(std::move(m));
    };
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string where = fmt::format("input[{}]", i);
        Fields item(input[i], where);
        const std::string type = item.string("type", "message");
        if (kHostedItems.count(type))
            item.fail("type", fmt::format("'{}' is not supported by ferrox (it runs function "
                                          "tools only)",
                                          type));
        if (type == "reasoning") {
            reasoning += reasoning_item_text(item, where);
            continue;
        }
        if (type == "function_call") {
            (void)item.string("id", "");
            (void)item.string("status", "");
            const std::string call_id = item.string("call_id", "");
            if (call_id.empty()) item.fail("call_id", "is required");
            const std::string name = item.string("name", "");
            if (name.empty()) item.fail("name", "is required");
            ordered_json call{
                {"id", call_id},
                {"type", "function"},
                {"function", {{"name", name}, {"arguments", item.string("arguments", "{}")}}}};
            item.refuse_the_rest();
            if (!messages.empty() && messages.back()["role"] == "assistant" && reasoning.empty()) {
                ordered_json& calls = messages.back()["tool_calls"];
                if (calls.size() >= kMaxCallsInARow)
                    item.fail("type", fmt::format("makes more than {} function_call items in a row",
                                                  kMaxCallsInARow));
                calls.push_back(std::move(call));
            } else {
                assistant({{"role", "assistant"},
                           {"content", ""},
                           {"tool_calls", ordered_json::array({std::move(call)})}});
            }
            continue;
        }
        if (type == "function_call_output") {
            (void)item.string("id", "");
            (void)item.string("status", "");
            const std::string call_id = item.string("call_id", "");
            if (call_id.empty()) item.fail("call_id", "is required");
            std::string output = content_text(item, where, "output");
            item.refuse_the_rest();
            messages.push_back(
                {{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(output)}});
            continue;
        }
        if (type != "message")
            item.fail("type", fmt::format("'{}' is not supported by ferrox (only message, "
                                          "function_call, function_call_output, reasoning)",
                                          type));
        std::string role = item.string("role", "");
        if (role != "user" && role != "assistant" && role != "system" && role != "developer")
            item.fail("role", "must be one of user, assistant, system, developer");
        // Templates know no developer role; OpenAI gives it a system message's place.
        if (role == "developer") role = "system";
        // An earlier output item sent back carries its id and status.
        (void)item.string("id", "");
        (void)item.string("status", "");
        std::string text = content_text(item, where);
        item.refuse_the_rest();
        if (role == "assistant")
            assistant({{"role", role}, {"content", std::move(text)}});
        else
            messages.push_back({{"role", role}, {"content", std::move(text)}});
    }
    // Bounded already: `input` by count (instructions add one message).
    return checked_messages(messages, static_cast<uint32_t>(messages.size()));
}

// `tools`: function tools in the Responses shape ({"type": "function",
// "name", "description", "parameters", "strict"}), into the template's; the
// other kinds (kHostedTools) are refused by name. `echo`: the tools as the
// response shows them.
ordered_json read_tools(Fields& f, const RequestLimits& limits, ordered_json& echo) {
    echo = ordered_json::array();
    const ordered_json* checked =
        checked_tool_list(f, limits.max_tools, "must be a list of function tools");
    if (!checked) return nullptr;
    const ordered_json& list = *checked;
    ordered_json tools = ordered_json::array();
    std::set<std::string, std::less<>> names;
    for (size_t i = 0; i < list.size(); ++i) {
        Fields tool(list[i], fmt::format("tools[{}]", i));
        const std::string type = tool.string("type", "");
        if (kHostedTools.count(type))
            tool.fail("type", fmt::format("'{}' tools are not supported by ferrox (only "
                                          "function tools)",
                                          type));
        if (type != "function") tool.fail("type", "must be 'function'");
        ordered_json one = read_function_tool(tool, "parameters", names);
        tool.refuse_the_rest();
        ordered_json shown{{"type", "function"}};
        for (auto it = one["function"].begin(); it != one["function"].end(); ++it)
            shown[it.key()] = *it;
        if (!shown.contains("strict")) shown["strict"] = nullptr;
        echo.push_back(std::move(shown));
        tools.push_back(std::move(one));
    }
    return tools;
}

// `tool_choice`: "auto", "none", "required" or {"type": "function", "name"}.
ToolChoice read_tool_choice(Fields& f, const ordered_json& tools, ordered_json& echo) {
    ToolChoice c;
    echo = "auto";
    if (!f.has("tool_choice")) return c;
    const ordered_json& raw = f.raw("tool_choice");
    if (raw.is_string()) {
        const std::string mode = raw.get<std::string>();
        if (mode == "none")
            c.mode = ToolChoice::Mode::None;
        else if (mode == "required")
            c.mode = ToolChoice::Mode::Required;
        else if (mode != "auto")
            f.fail("tool_choice", "must be 'auto', 'none', 'required' or a function");
        echo = mode;
    } else {
        Fields choice(raw, "tool_choice");
        const std::string type = choice.string("type", "");
        if (kHostedTools.count(type))
            choice.fail("type", fmt::format("'{}' tools are not supported by ferrox (only "
                                            "function tools)",
                                            type));
        if (type != "function") choice.fail("type", "must be 'function'");
        c.mode = ToolChoice::Mode::Named;
        c.name = choice.string("name", "");
        choice.refuse_the_rest();
        if (!names_tool(tools, c.name))
            throw ApiError{400,
                           fmt::format("'tool_choice.name' '{}' names no tool of 'tools'", c.name),
                           "tool_choice.name"};
        echo = {{"type", "function"}, {"name", c.name}};
    }
    if (tools.is_null() && (c.mode == ToolChoice::Mode::Required))
        f.fail("tool_choice", "needs 'tools'");
    return c;
}

// `reasoning`: {"effort", "summary"}. An effort asks for reasoning: it
// reaches the template as `reasoning_effort` (gpt-oss's reads it, as on Chat
// Completions) and `enable_thinking: true` (Qwen3's and QwQ's switch);
// "none" is `enable_thinking: false`.
ordered_json read_reasoning(Fields& f, ordered_json& kwargs) {
    ordered_json echo{{"effort", nullptr}, {"summary", nullptr}};
    if (!f.has("reasoning")) return echo;
    Fields r(f.raw("reasoning"), "reasoning");
    if (r.has("effort")) {
        const std::string effort = r.string("effort", "");
        if (effort != "none" && !valid_reasoning_effort(effort))
            r.fail("effort", "must be 'none', 'minimal', 'low', 'medium' or 'high'");
        if (kwargs.is_null()) kwargs = ordered_json::object();
        if (effort != "none") kwargs["reasoning_effort"] = effort;
        kwargs["enable_thinking"] = effort != "none";
        echo["effort"] = effort;
    }
    // The summary ferrox gives is the reasoning itself (the item's content).
    if (r.has("summary")) {
        const std::string summary = r.string("summary", "");
        if (summary != "auto" && summary != "concise" && summary != "detailed")
            r.fail("summary", "must be 'auto', 'concise' or 'detailed'");
        echo["summary"] = summary;
    }
    if (r.has("generate_summary")) (void)r.string("generate_summary", "");  // its old name
    r.refuse_the_rest();
    return echo;
}

// `text.format`: text, json_object, or {"type": "json_schema", "name",
// "schema", "strict", "description"} -- the grammar that holds the answer to
// it (structured_output.h, as response_format on Chat Completions). `echo`:
// the format as the response shows it.
std::shared_ptr<const grammar::Grammar> read_text_format(Fields& f, ordered_json& echo) {
    echo = {{"type", "text"}};
    if (!f.has("text")) return nullptr;
    Fields text(f.raw("text"), "text");
    std::shared_ptr<const grammar::Grammar> g;
    if (text.has("format")) {
        Fields format(text.raw("format"), "text.format");
        const std::string type = format.string("type", "");
        if (type == "json_object") {
            g = grammar_for_json_object();
            echo = {{"type", "json_object"}};
        } else if (type == "json_schema") {
            const std::string name = format.string("name", "");
            if (name.empty() || name.size() > 64)
                format.fail("name", "must be a string of 1 to 64 characters");
            if (!format.has("schema")) format.fail("schema", "is required with type json_schema");
            const ordered_json& schema = format.raw("schema");
            // strict: false lets OpenAI's models stray from the schema; ferrox
            // enforces every schema it accepts, so both values mean the same.
            const bool strict = format.boolean("strict", false);
            echo = {
                {"type", "json_schema"}, {"name", name}, {"schema", schema}, {"strict", strict}};
            if (format.has("description")) echo["description"] = format.string("description", "");
            g = grammar_for_schema(schema, "text.format.schema");
        } else if (type != "text") {
            format.fail("type", "must be text, json_schema or json_object");
        }
        format.refuse_the_rest();
    }
    text.refuse_the_rest();
    return g;
}

ordered_json read_metadata(Fields& f) {
    if (!f.has("metadata")) return ordered_json::object();
    const ordered_json& m = f.raw("metadata");
    if (!m.is_object()) f.fail("metadata", "must be an object of strings");
    if (m.size() > kMaxMetadataPairs)
        f.fail("metadata", fmt::format("has {} pairs; at most {}", m.size(), kMaxMetadataPairs));
    for (auto it = m.begin(); it != m.end(); ++it) {
        if (it.key().size() > kMaxMetadataKey)
            f.fail("metadata", fmt::format("keys must be at most {} characters", kMaxMetadataKey));
        if (!it.value().is_string() || it.value().get<std::string>().size() > kMaxMetadataValue)
            f.fail("metadata." + it.key(),
                   fmt::format("must be a string of at most {} characters", kMaxMetadataValue));
    }
    return m;
}

class Responses final : public Dialect {
  public:
    explicit Responses(ReplyIds ids)
        : request_id_(ids.request_id),
          id_("resp_" + ids.request_id),
          model_(std::move(ids.model)),
          created_(std::time(nullptr)) {}

    void parse(const ordered_json& body, const ParseInput& in, GenerationRequest& g) override {
        Fields f(body, "");
        (void)f.string("model", "");  // one model is served, whatever the client names
        (void)f.string("user", "");
        (void)f.string("safety_identifier", "");
        // Stateless: nothing is kept between requests.
        if (f.boolean("store", false))
            f.fail("store",
                   "true is not supported by ferrox: responses are not stored "
                   "(send store: false, or leave it out)");
        if (f.has("previous_response_id"))
            f.fail("previous_response_id",
                   "is not supported by ferrox: responses are not "
                   "stored; send the whole conversation as input");
        if (f.has("conversation"))
            f.fail("conversation",
                   "is not supported by ferrox: conversations are not stored; "
                   "send the whole conversation as input");
        if (f.boolean("background", false)) f.fail("background", "true is not supported by ferrox");
        if (f.has("include") && (!f.raw("include").is_array() || !f.raw("include").empty()))
            f.fail("include", "is not supported by ferrox (only an empty list)");
        if (f.string("truncation", "disabled") != "disabled")
            f.fail("truncation", "other than 'disabled' is not supported by ferrox");
        if (f.integer("top_logprobs", 0, 20, 0) != 0)
            f.fail("top_logprobs", "is not supported by ferrox on this endpoint");
        if (f.has("max_tool_calls")) f.fail("max_tool_calls", "is not supported by ferrox");
        std::shared_ptr<const grammar::Grammar> format = read_text_format(f, text_format_);
        stream_ = f.boolean("stream", false);
        if (f.has("stream_options")) {
            if (!stream_) f.fail("stream_options", "is only allowed with stream: true");
            Fields so(f.raw("stream_options"), "stream_options");
            // The padding that hides delta lengths from an observer of the stream.
            if (so.boolean("include_obfuscation", false))
                so.fail("include_obfuscation", "true is not supported by ferrox");
            so.refuse_the_rest();
        }
        metadata_ = read_metadata(f);
        if (f.has("instructions")) instructions_ = f.string("instructions", "");

        ChatToolFields tools;
        tools.tools = read_tools(f, in.limits, tools_);
        if (!tools.tools.is_null()) check_family_takes_tools(in.render_chat.family(), "tools");
        tools.choice = read_tool_choice(f, tools.tools, tool_choice_);
        tools.parallel = parallel_ = f.boolean("parallel_tool_calls", true);
        reasoning_ = read_reasoning(f, tools.kwargs);

        const ordered_json messages = input_messages(f, in.limits);
        ChatTurn turn =
            start_chat_turn(messages, tools, in, std::hash<std::string>{}(id_), "input");
        answer_ = std::move(turn.answer);
        tokenizer_ = &in.tokenizer;
        g.prompt = std::move(turn.prompt);
        if (g.prompt.empty()) throw ApiError{400, "the input encodes to no tokens", "input"};
        g.max_tokens = checked_max_tokens(f, "max_output_tokens", false, g.prompt.size(),
                                          in.max_positions, "input");
        if (f.has("max_output_tokens")) max_output_tokens_ = g.max_tokens;

        auto& s = g.sampling;
        temperature_ = f.number("temperature", 0, 2, shown(s.base.temperature));
        top_p_ = f.number("top_p", 0, 1, shown(s.base.top_p));
        if (f.has("top_p") && top_p_ <= 0) f.fail("top_p", "must be greater than 0");
        s.base.temperature = static_cast<float>(temperature_);
        s.base.top_p = static_cast<float>(top_p_);
        s.base.seed = random_seed();
        // Like cache_salt on the other endpoints: prefix-cache entries are
        // shared only within one API key and one prompt_cache_key.
        const std::string salt = f.string("prompt_cache_key", "");
        if (salt.size() > in.limits.max_cache_salt_bytes)
            f.fail("prompt_cache_key",
                   fmt::format("must be at most {} bytes", in.limits.max_cache_salt_bytes));
        g.cache_scope = in.tenant + '\n' + salt;
        f.refuse_the_rest();
        if (format) {
            if (!in.grammar_vocab)
                throw ApiError{400, "this server takes no grammars (no token trie)", "text.format"};
            s.grammar = std::move(format);
            s.grammar_vocab = in.grammar_vocab.get();
        }
        arm_lazy_tool_call(std::move(turn.lazy_call), in, g);
        force_tool_call(std::move(turn.forced_call), in, g, "tool_choice", true);
    }
    bool streamed() const override { return stream_; }

    Chunks stream_start() override {
        return {event("response.created", {{"response", response("in_progress", nullptr)}}),
                event("response.in_progress", {{"response", response("in_progress", nullptr)}})};
    }
    Chunks stream_text(const Event& text) override {
        Chunks out;
        for (const ChatEvent& e : answer_->feed_events(text.text)) on_event(e, out);
        return out;
    }
    Chunks stream_end(const Event& done) override {
        Chunks out = finish(done);
        out.push_back(event(ran_out(done.finish) ? "response.incomplete" : "response.completed",
                            {{"response", whole(done)}}));
        return out;
    }
    Chunks stream_error(const ApiError& e) override {
        ordered_json output = items_;
        if (open_.kind != Open::None) output.push_back(open_item("incomplete"));
        ordered_json failed = response("failed", std::move(output));
        failed["error"] = {{"code", "server_error"}, {"message", e.message}};
        return {event("response.failed", {{"response", std::move(failed)}})};
    }

    void collect(const Event& text) override {
        Chunks unused;
        for (const ChatEvent& e : answer_->feed_events(text.text)) on_event(e, unused);
    }
    std::string answer(const Event& done) override {
        (void)finish(done);
        return json_text(whole(done));
    }

  private:
    // The output item being written: an assistant message, a reasoning item
    // or a function call. Its events are sent as the parser's events come
    // (response.output_item.added, the deltas, the .done events).
    struct Open {
        enum Kind { None, Message, Reasoning, Call } kind = None;
        std::string id, text, name, call_id;
    };

    // One parser event as the Responses stream's events (into `out`): a
    // change of kind closes the open item and opens the next.
    void on_event(const ChatEvent& e, Chunks& out) {
        switch (e.kind) {
            case ChatEvent::Kind::Content:
                if (open_.kind != Open::Message) open(Open::Message, out);
                text_delta("response.output_text.delta", e.text, out);
                break;
            case ChatEvent::Kind::Reasoning:
                if (open_.kind != Open::Reasoning) open(Open::Reasoning, out);
                text_delta("response.reasoning_text.delta", e.text, out);
                break;
            case ChatEvent::Kind::ToolCallStart:
                open_call(e, out);
                break;
            case ChatEvent::Kind::ToolCallArguments:
                open_.text += e.text;
                out.push_back(event(
                    "response.function_call_arguments.delta",
                    {{"item_id", open_.id}, {"output_index", items_.size()}, {"delta", e.text}}));
                break;
        }
    }
    // The end of the answer: what the parser held back, the open item closed
    // (incomplete when the budget ran out); an answer with no output at all
    // is one empty message.
    Chunks finish(const Event& done) {
        Chunks out;
        for (const ChatEvent& e : answer_->finish_events()) on_event(e, out);
        if (open_.kind == Open::None && items_.empty()) open(Open::Message, out);
        close(ran_out(done.finish) ? "incomplete" : "completed", out);
        return out;
    }

    std::string next_id(const char* prefix) {
        const size_t n = ids_used_++;
        return n == 0 ? prefix + request_id_ : fmt::format("{}{}_{}", prefix, request_id_, n);
    }
    void open(Open::Kind kind, Chunks& out) {
        close("completed", out);
        open_ = {};
        open_.kind = kind;
        open_.id = next_id(kind == Open::Message ? "msg_" : "rs_");
        out.push_back(event("response.output_item.added",
                            {{"output_index", items_.size()}, {"item", open_item("in_progress")}}));
        out.push_back(event("response.content_part.added", part_fields(part(""))));
    }
    void open_call(const ChatEvent& e, Chunks& out) {
        close("completed", out);
        open_ = {};
        open_.kind = Open::Call;
        open_.id = next_id("fc_");
        open_.name = e.name;
        open_.call_id = e.id;
        out.push_back(event("response.output_item.added",
                            {{"output_index", items_.size()}, {"item", open_item("in_progress")}}));
    }
    void close(const char* status, Chunks& out) {
        switch (open_.kind) {
            case Open::None:
                return;
            case Open::Message: {
                ordered_json done = text_fields();
                done["text"] = open_.text;
                done["logprobs"] = ordered_json::array();
                out.push_back(event("response.output_text.done", std::move(done)));
                out.push_back(event("response.content_part.done", part_fields(part(open_.text))));
                break;
            }
            case Open::Reasoning: {
                ordered_json done = text_fields();
                done["text"] = open_.text;
                out.push_back(event("response.reasoning_text.done", std::move(done)));
                out.push_back(event("response.content_part.done", part_fields(part(open_.text))));
                break;
            }
            case Open::Call:
                out.push_back(
                    event("response.function_call_arguments.done", {{"item_id", open_.id},
                                                                    {"output_index", items_.size()},
                                                                    {"arguments", open_.text}}));
                break;
        }
        ordered_json item = open_item(status);
        out.push_back(
            event("response.output_item.done", {{"output_index", items_.size()}, {"item", item}}));
        items_.push_back(std::move(item));
        open_ = {};
    }
    void text_delta(const char* type, const std::string& text, Chunks& out) {
        open_.text += text;
        ordered_json delta = text_fields();
        delta["delta"] = text;
        if (open_.kind == Open::Message) delta["logprobs"] = ordered_json::array();
        out.push_back(event(type, std::move(delta)));
    }
    // The open message's or reasoning item's one content part.
    ordered_json part(const std::string& text) const {
        if (open_.kind == Open::Reasoning) return {{"type", "reasoning_text"}, {"text", text}};
        return output_text_part(text);
    }
    // The open item as output_item events and the response show it.
    ordered_json open_item(const char* status) const {
        switch (open_.kind) {
            case Open::Reasoning: {
                ordered_json content = ordered_json::array();
                if (std::string_view(status) != "in_progress") content.push_back(part(open_.text));
                return {{"type", "reasoning"},
                        {"id", open_.id},
                        {"status", status},
                        {"summary", ordered_json::array()},
                        {"content", std::move(content)}};
            }
            case Open::Call:
                return {{"type", "function_call"},  {"id", open_.id},
                        {"call_id", open_.call_id}, {"name", open_.name},
                        {"arguments", open_.text},  {"status", status}};
            default: {
                ordered_json content = ordered_json::array();
                if (std::string_view(status) != "in_progress") content.push_back(part(open_.text));
                return {{"type", "message"},
                        {"id", open_.id},
                        {"status", status},
                        {"role", "assistant"},
                        {"content", std::move(content)}};
            }
        }
    }

    // One stream event: its type, its fields, and the next sequence number.
    std::string event(const char* type, ordered_json fields) {
        ordered_json e{{"type", type}};
        for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = std::move(*it);
        e["sequence_number"] = sequence_++;
        return sse(e);
    }
    ordered_json text_fields() const {
        return {{"item_id", open_.id}, {"output_index", items_.size()}, {"content_index", 0}};
    }
    ordered_json part_fields(ordered_json p) const {
        ordered_json f = text_fields();
        f["part"] = std::move(p);
        return f;
    }
    // The response object; `output` null: none yet.
    ordered_json response(const char* status, ordered_json output) const {
        return {{"id", id_},
                {"object", "response"},
                {"created_at", created_},
                {"status", status},
                {"background", false},
                {"error", nullptr},
                {"incomplete_details", nullptr},
                {"instructions", instructions_},
                {"max_output_tokens", max_output_tokens_},
                {"metadata", metadata_},
                {"model", model_},
                {"output", output.is_null() ? ordered_json::array() : std::move(output)},
                {"parallel_tool_calls", parallel_},
                {"previous_response_id", nullptr},
                {"reasoning", reasoning_},
                {"store", false},
                {"temperature", temperature_},
                {"text", {{"format", text_format_}}},
                {"tool_choice", tool_choice_},
                {"tools", tools_},
                {"top_p", top_p_},
                {"truncation", "disabled"},
                {"usage", nullptr}};
    }
    ordered_json whole(const Event& done) const {
        const bool incomplete = ran_out(done.finish);
        ordered_json r = response(incomplete ? "incomplete" : "completed", items_);
        if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
        r["usage"] = usage(done, reasoning_tokens(*answer_, *tokenizer_));
        return r;
    }

    std::string request_id_, id_, model_;
    int64_t created_;
    bool stream_ = false, parallel_ = true;
    ordered_json instructions_ = nullptr, max_output_tokens_ = nullptr, metadata_;
    ordered_json tools_ = ordered_json::array(), tool_choice_ = "auto", text_format_, reasoning_;
    double temperature_ = 0, top_p_ = 0;
    std::optional<ChatAnswer> answer_;  // set by parse
    const Tokenizer* tokenizer_ = nullptr;
    Open open_;
    ordered_json items_ = ordered_json::array();  // the finished output items
    size_t ids_used_ = 0;
    uint64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<Dialect> responses(ReplyIds ids) {
    return std::make_unique<Responses>(std::move(ids));
}

}  // namespace ferrox::server
