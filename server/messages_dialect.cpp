#include "messages_dialect.h"

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "chat_tools.h"
#include "chat_turn.h"
#include "error_shape.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "reasoning_budget.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// Content blocks ferrox neither reads nor writes.
const std::set<std::string, std::less<>> kUnsupportedBlocks{
    "redacted_thinking", "server_tool_use",  "web_search_tool_result", "image",          "document",
    "search_result",     "container_upload", "mcp_tool_use",           "mcp_tool_result"};

// tool_use blocks of one assistant turn (checked_messages' bound, named here by block).
constexpr size_t kMaxCallsPerTurn = 128;

// Anthropic's words for a whole answer's end.
const char* stop_reason(FinishReason why) {
    switch (why) {
        case FinishReason::StopString:
            return "stop_sequence";
        case FinishReason::Length:
            return "max_tokens";
        default:
            return "end_turn";
    }
}

std::string sse(const ordered_json& event) {
    return "event: " + event["type"].get<std::string>() + "\ndata: " + json_text(event) + "\n\n";
}

// Anthropic counts the prompt tokens read from its cache apart from input_tokens.
ordered_json usage(const Event& done) {
    return {{"input_tokens", done.prompt_tokens - done.cached_tokens},
            {"cache_read_input_tokens", done.cached_tokens},
            {"output_tokens", done.completion_tokens}};
}

// A caching hint: ferrox caches prompt prefixes whether asked or not.
void read_cache_control(Fields& block, const std::string& where) {
    if (!block.has("cache_control")) return;
    Fields cc(block.raw("cache_control"), where + ".cache_control");
    if (cc.string("type", "") != "ephemeral") cc.fail("type", "must be 'ephemeral'");
    (void)cc.string("ttl", "");
    cc.refuse_the_rest();
}

// The list of content blocks at `where` (a string stands for one text
// block), each handed to `each` with its type read; a type not in `allowed`
// is refused naming it.
void for_each_block(
    const ordered_json& content, const std::string& where,
    const std::set<std::string, std::less<>>& allowed,
    const std::function<void(Fields&, const std::string&, const std::string&)>& each) {
    if (content.is_string()) {
        const ordered_json block{{"type", "text"}, {"text", content}};
        Fields f(block, where);
        each(f, "text", where);
        return;
    }
    if (!content.is_array())
        throw ApiError{400, fmt::format("'{}' must be a string or a list of content blocks", where),
                       where};
    for (size_t j = 0; j < content.size(); ++j) {
        const std::string at = fmt::format("{}[{}]", where, j);
        Fields block(content[j], at);
        const std::string type = block.string("type", "");
        if (!allowed.count(type)) {
            std::string names;
            for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
            block.fail("type", fmt::format("'{}' is not supported by ferrox {}(only {})", type,
                                           kUnsupportedBlocks.count(type) ? "" : "here ", names));
        }
        each(block, type, at);
        read_cache_control(block, at);
        block.refuse_the_rest();
    }
}

// A text block's text.
std::string text_of(Fields& block) {
    if (!block.has("text") || !block.raw("text").is_string())
        block.fail("text", "must be a string");
    if (block.has("citations") && !block.raw("citations").is_array())
        block.fail("citations", "must be a list");
    if (block.has("citations") && !block.raw("citations").empty())
        block.fail("citations", "is not supported by ferrox (only an empty list)");
    return block.raw("text").get<std::string>();
}

// A list of text blocks' text (or a string's): `system`, a tool_result's content.
std::string blocks_text(const ordered_json& content, const std::string& where) {
    std::string text;
    for_each_block(
        content, where, {"text"},
        [&](Fields& block, const std::string&, const std::string&) { text += text_of(block); });
    return text;
}

// `tools`: Anthropic's client tools ({name, description, input_schema}, type
// "custom" or none) into the chat template's shape; Anthropic's own tools
// (bash, text_editor, web_search, computer...) are refused by name.
ordered_json read_tools(Fields& f, const RequestLimits& limits) {
    const ordered_json* checked = checked_tool_list(f, limits.max_tools, "must be a list of tools");
    if (!checked) return nullptr;
    const ordered_json& list = *checked;
    ordered_json tools = ordered_json::array();
    std::set<std::string, std::less<>> names;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string where = fmt::format("tools[{}]", i);
        Fields tool(list[i], where);
        const std::string type = tool.string("type", "custom");
        if (type != "custom")
            tool.fail("type", fmt::format("'{}' is one of Anthropic's own tools, which ferrox "
                                          "does not run (only client tools with an input_schema)",
                                          type));
        if (!tool.has("input_schema")) tool.fail("input_schema", "is required");
        tools.push_back(read_function_tool(tool, "input_schema", names));
        read_cache_control(tool, where);
        tool.refuse_the_rest();
    }
    return tools;
}

// `tool_choice`: {"type": "auto" | "any" | "tool" (with "name") | "none",
// "disable_parallel_tool_use"}.
void read_tool_choice(Fields& f, ChatToolFields& tools) {
    if (!f.has("tool_choice")) return;
    Fields choice(f.raw("tool_choice"), "tool_choice");
    const std::string type = choice.string("type", "");
    if (type == "any") {
        tools.choice.mode = ToolChoice::Mode::Required;
    } else if (type == "tool") {
        tools.choice.mode = ToolChoice::Mode::Named;
        tools.choice.name = choice.string("name", "");
        if (!names_tool(tools.tools, tools.choice.name))
            choice.fail("name", fmt::format("'{}' names no tool of 'tools'", tools.choice.name));
    } else if (type == "none") {
        tools.choice.mode = ToolChoice::Mode::None;
    } else if (type != "auto") {
        choice.fail("type", "must be 'auto', 'any', 'tool' or 'none'");
    }
    if (type != "none") tools.parallel = !choice.boolean("disable_parallel_tool_use", false);
    choice.refuse_the_rest();
    if (tools.tools.is_null() && tools.choice.mode == ToolChoice::Mode::Required)
        f.fail("tool_choice", "needs 'tools'");
}

// `thinking`: {"type": "enabled", "budget_tokens"} or {"type": "disabled"},
// as the template's `enable_thinking` (Qwen3's and its kin's switch); the
// budget becomes the request's thinking budget (reasoning_budget.h).
uint32_t read_thinking(Fields& f, ordered_json& kwargs) {
    if (!f.has("thinking")) return 0;
    Fields thinking(f.raw("thinking"), "thinking");
    const std::string type = thinking.string("type", "");
    uint32_t budget = 0;
    if (type == "enabled") {
        if (!thinking.has("budget_tokens")) thinking.fail("budget_tokens", "is required");
        budget = static_cast<uint32_t>(thinking.integer("budget_tokens", 1, 1 << 30, 0));
        (void)thinking.string("display", "");
    } else if (type != "disabled") {
        thinking.fail("type", "must be 'enabled' or 'disabled'");
    }
    thinking.refuse_the_rest();
    if (kwargs.is_null()) kwargs = ordered_json::object();
    kwargs["enable_thinking"] = type == "enabled";
    return budget;
}

// One message's blocks as Chat Completions messages (appended to `chat`): a
// user turn's tool_result blocks are tool messages, its text one user
// message; an assistant turn's text, thinking and tool_use blocks are one
// assistant message with reasoning_content and tool_calls. Returns the text
// of a text-only assistant turn (a possible prefill), else nothing.
std::optional<std::string> read_message(Fields& m, const std::string& where,
                                        const std::string& role, ordered_json& chat) {
    if (!m.has("content")) m.fail("content", "is required");
    const std::string at = where + ".content";
    if (role == "user") {
        std::string text;
        bool texts = false;
        for_each_block(
            m.raw("content"), at, {"text", "tool_result"},
            [&](Fields& block, const std::string& type, const std::string& w) {
                if (type == "text") {
                    text += text_of(block);
                    texts = true;
                    return;
                }
                const std::string id = block.string("tool_use_id", "");
                if (id.empty()) block.fail("tool_use_id", "is required");
                (void)block.boolean("is_error", false);
                std::string result = block.has("content")
                                         ? blocks_text(block.raw("content"), w + ".content")
                                         : std::string();
                chat.push_back(
                    {{"role", "tool"}, {"tool_call_id", id}, {"content", std::move(result)}});
            });
        if (texts || chat.empty() || chat.back()["role"] != "tool")
            chat.push_back({{"role", "user"}, {"content", std::move(text)}});
        return std::nullopt;
    }
    std::string text, reasoning;
    ordered_json calls = ordered_json::array();
    for_each_block(
        m.raw("content"), at, {"text", "thinking", "tool_use"},
        [&](Fields& block, const std::string& type, const std::string&) {
            if (type == "text") {
                text += text_of(block);
            } else if (type == "thinking") {
                reasoning += block.string("thinking", "");
                (void)block.string("signature", "");
            } else {
                const std::string id = block.string("id", "");
                if (id.empty()) block.fail("id", "is required");
                const std::string name = block.string("name", "");
                if (name.empty()) block.fail("name", "is required");
                if (calls.size() >= kMaxCallsPerTurn)
                    block.fail("type", fmt::format("makes more than {} tool_use "
                                                   "blocks in one message",
                                                   kMaxCallsPerTurn));
                if (!block.has("input") || !block.raw("input").is_object())
                    block.fail("input", "must be an object");
                calls.push_back(
                    {{"id", id},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", json_text(block.raw("input"))}}}});
            }
        });
    ordered_json message{{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) message["reasoning_content"] = std::move(reasoning);
    if (!calls.empty()) message["tool_calls"] = std::move(calls);
    const bool text_only = message.size() == 2;
    chat.push_back(std::move(message));
    if (!text_only) return std::nullopt;
    return text;
}

// What a Messages (or count_tokens) body asks the model: the prompt (a
// last assistant message's text -- Anthropic's prefill -- appended after the
// template's generation prompt), and how the answer is read and held.
struct MessagesPrompt {
    ChatTurn turn;
    uint32_t thinking_budget_tokens = 0;
};

MessagesPrompt read_prompt(Fields& f, const ParseInput& in, uint64_t id_seed) {
    ChatToolFields tools;
    tools.tools = read_tools(f, in.limits);
    if (!tools.tools.is_null()) check_family_takes_tools(in.render_chat.family(), "tools");
    read_tool_choice(f, tools);
    MessagesPrompt out;
    out.thinking_budget_tokens = read_thinking(f, tools.kwargs);
    ordered_json chat = ordered_json::array();
    if (f.has("system"))
        chat.push_back({{"role", "system"}, {"content", blocks_text(f.raw("system"), "system")}});
    if (!f.has("messages")) f.fail("messages", "is required");
    const ordered_json& messages = f.raw("messages");
    if (!messages.is_array() || messages.empty()) f.fail("messages", "must be a non-empty list");
    if (messages.size() > in.limits.max_messages)
        f.fail("messages",
               fmt::format("has {} entries; at most {}", messages.size(), in.limits.max_messages));
    std::string prefill;
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string where = fmt::format("messages[{}]", i);
        Fields m(messages[i], where);
        const std::string role = m.string("role", "");
        if (role != "user" && role != "assistant") m.fail("role", "must be user or assistant");
        std::optional<std::string> text = read_message(m, where, role, chat);
        m.refuse_the_rest();
        if (role == "assistant" && i + 1 == messages.size()) {
            if (!text)
                m.fail("content",
                       "of a last assistant message (a prefill, which the answer continues) "
                       "must be text only");
            prefill = std::move(*text);
            chat.erase(chat.size() - 1);
        }
    }
    if (chat.empty()) f.fail("messages", "must hold a turn before a last assistant message");
    // Bounded already: `messages` by count, each one's blocks by the body's limits.
    const ordered_json checked = checked_messages(chat, static_cast<uint32_t>(chat.size()));
    out.turn = start_chat_turn(checked, tools, in, id_seed, "messages");
    // Text from a client stays text: no control tokens from the prefill.
    const std::vector<int32_t> more = in.tokenizer.encode(prefill, false, false);
    out.turn.prompt.insert(out.turn.prompt.end(), more.begin(), more.end());
    out.turn.answer->continue_after(prefill);
    if (out.turn.prompt.empty())
        throw ApiError{400, "the messages encode to no tokens", "messages"};
    return out;
}

class Messages final : public Dialect {
  public:
    explicit Messages(ReplyIds ids) : id_("msg_" + ids.request_id), model_(std::move(ids.model)) {}

    void parse(const ordered_json& body, const ParseInput& in, GenerationRequest& g) override {
        Fields f(body, "");
        (void)f.string("model", "");  // one model is served, whatever the client names
        if (f.has("metadata")) {
            Fields meta(f.raw("metadata"), "metadata");
            (void)meta.string("user_id", "");  // accepted, unused
            meta.refuse_the_rest();
        }
        stream_ = f.boolean("stream", false);
        MessagesPrompt prompt = read_prompt(f, in, std::hash<std::string>{}(id_));
        answer_ = std::move(prompt.turn.answer);
        g.prompt = std::move(prompt.turn.prompt);
        if (prompt.thinking_budget_tokens > 0) {
            // Anthropic requires budget_tokens with thinking on, so a model
            // whose reasoning markers the stage cannot see (control tokens)
            // or a server without a token trie takes it unenforced, as the
            // soft target Anthropic describes it (docs/server.md).
            std::string not_enforced;
            g.sampling.reasoning_budget = reasoning_budget_params(
                prompt.thinking_budget_tokens, in, in.render_chat.family().family,
                prompt.turn.starts_in_reasoning, not_enforced);
            if (g.sampling.reasoning_budget.budget >= 0)
                g.sampling.grammar_vocab = in.grammar_vocab.get();
        }
        prompt_tokens_ = static_cast<uint32_t>(g.prompt.size());
        g.max_tokens = checked_max_tokens(f, "max_tokens", true, g.prompt.size(), in.max_positions,
                                          "messages");
        if (f.has("stop_sequences")) {
            if (!f.raw("stop_sequences").is_array())
                f.fail("stop_sequences", "must be a list of strings");
            g.stop = checked_stop_strings(f.raw("stop_sequences"), "stop_sequences", in.limits);
        }
        auto& s = g.sampling.base;
        s.temperature = static_cast<float>(f.number("temperature", 0, 1, s.temperature));
        s.top_p = static_cast<float>(f.number("top_p", 0, 1, s.top_p));
        if (f.has("top_p") && s.top_p <= 0) f.fail("top_p", "must be greater than 0");
        s.top_k = static_cast<uint32_t>(f.integer("top_k", 0, 1 << 20, s.top_k));
        s.seed = random_seed();
        g.cache_scope = in.tenant + '\n';  // no salt: one scope per API key
        f.refuse_the_rest();
        arm_lazy_tool_call(std::move(prompt.turn.lazy_call), in, g);
        force_tool_call(std::move(prompt.turn.forced_call), in, g, "tool_choice", true);
    }
    bool streamed() const override { return stream_; }

    Chunks stream_start() override {
        // The cached part of the prompt is known at the end (message_delta).
        ordered_json opening = message(ordered_json::array(), nullptr, nullptr);
        opening["usage"] = {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}};
        return {sse({{"type", "message_start"}, {"message", std::move(opening)}}),
                sse({{"type", "ping"}})};
    }
    Chunks stream_text(const Event& text) override {
        Chunks out;
        for (const ChatEvent& e : answer_->feed_events(text.text)) on_event(e, out);
        return out;
    }
    Chunks stream_end(const Event& done) override {
        Chunks out = finish();
        out.push_back(
            sse({{"type", "message_delta"},
                 {"delta", {{"stop_reason", reason(done)}, {"stop_sequence", stop_sequence(done)}}},
                 {"usage", usage(done)}}));
        out.push_back(sse({{"type", "message_stop"}}));
        return out;
    }
    Chunks stream_error(const ApiError& e) override {
        return {"event: error\ndata: " + error_json(ErrorShape::Anthropic, e) + "\n\n"};
    }

    void collect(const Event& text) override {
        Chunks unused;
        for (const ChatEvent& e : answer_->feed_events(text.text)) on_event(e, unused);
    }
    std::string answer(const Event& done) override {
        (void)finish();
        ordered_json whole = message(blocks_, reason(done), stop_sequence(done));
        whole["usage"] = usage(done);
        return json_text(whole);
    }

  private:
    // The content block being written: text, thinking or a tool_use. Its
    // events go out as the parser's events come (content_block_start, the
    // deltas, content_block_stop).
    struct Block {
        enum Kind { None, Text, Thinking, ToolUse } kind = None;
        std::string text, id, name;  // text: the thinking, or a tool_use's input JSON
    };

    void on_event(const ChatEvent& e, Chunks& out) {
        switch (e.kind) {
            case ChatEvent::Kind::Content:
                if (open_.kind != Block::Text) open({Block::Text, "", "", ""}, out);
                delta({{"type", "text_delta"}, {"text", e.text}}, e.text, out);
                break;
            case ChatEvent::Kind::Reasoning:
                if (open_.kind != Block::Thinking) open({Block::Thinking, "", "", ""}, out);
                delta({{"type", "thinking_delta"}, {"thinking", e.text}}, e.text, out);
                break;
            case ChatEvent::Kind::ToolCallStart:
                open({Block::ToolUse, "", e.id, e.name}, out);
                break;
            case ChatEvent::Kind::ToolCallArguments:
                delta({{"type", "input_json_delta"}, {"partial_json", e.text}}, e.text, out);
                break;
        }
    }
    // The end of the answer: what the parser held back, the open block
    // closed; an answer with no blocks at all is one empty text block.
    Chunks finish() {
        Chunks out;
        for (const ChatEvent& e : answer_->finish_events()) on_event(e, out);
        if (open_.kind == Block::None && blocks_.empty()) open({Block::Text, "", "", ""}, out);
        close(out);
        return out;
    }
    void open(Block block, Chunks& out) {
        close(out);
        open_ = std::move(block);
        ordered_json start = shown(open_);
        if (open_.kind == Block::ToolUse) start["input"] = ordered_json::object();
        out.push_back(sse({{"type", "content_block_start"},
                           {"index", blocks_.size()},
                           {"content_block", std::move(start)}}));
    }
    void delta(ordered_json d, const std::string& text, Chunks& out) {
        open_.text += text;
        out.push_back(sse(
            {{"type", "content_block_delta"}, {"index", blocks_.size()}, {"delta", std::move(d)}}));
    }
    void close(Chunks& out) {
        if (open_.kind == Block::None) return;
        out.push_back(sse({{"type", "content_block_stop"}, {"index", blocks_.size()}}));
        blocks_.push_back(shown(open_));
        open_ = {};
    }
    // A block as the answer shows it.
    static ordered_json shown(const Block& b) {
        switch (b.kind) {
            case Block::Thinking:
                // ferrox signs nothing: the signature is empty, and a thinking
                // block sent back is read whatever its signature.
                return {{"type", "thinking"}, {"thinking", b.text}, {"signature", ""}};
            case Block::ToolUse: {
                // The parser gives a call only once its arguments parse as a
                // JSON object.
                ordered_json input = ordered_json::parse(b.text, nullptr, false);
                if (!input.is_object()) input = ordered_json::object();
                return {{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", input}};
            }
            default:
                return {{"type", "text"}, {"text", b.text}};
        }
    }

    ordered_json message(ordered_json content, ordered_json why, ordered_json sequence) const {
        return {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", std::move(content)},
                {"stop_reason", std::move(why)},
                {"stop_sequence", std::move(sequence)}};
    }
    // stop_reason: tool_use when the answer called a tool and was not cut off.
    const char* reason(const Event& done) const {
        if (done.finish != FinishReason::Length && answer_->has_tool_calls()) return "tool_use";
        return stop_reason(done.finish);
    }
    static ordered_json stop_sequence(const Event& done) {
        if (done.finish != FinishReason::StopString) return nullptr;
        return done.stop_string;
    }

    std::string id_, model_;
    bool stream_ = false;
    uint32_t prompt_tokens_ = 0;
    std::optional<ChatAnswer> answer_;  // set by parse
    Block open_;
    ordered_json blocks_ = ordered_json::array();  // the finished content blocks
};

}  // namespace

std::unique_ptr<Dialect> anthropic_messages(ReplyIds ids) {
    return std::make_unique<Messages>(std::move(ids));
}

uint32_t count_message_tokens(const ordered_json& body, const ParseInput& in) {
    Fields f(body, "");
    (void)f.string("model", "");
    const MessagesPrompt prompt = read_prompt(f, in, 0);
    f.refuse_the_rest();
    return static_cast<uint32_t>(prompt.turn.prompt.size());
}

}  // namespace ferrox::server
