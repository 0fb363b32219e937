#include "messages_dialect.h"

#include <fmt/format.h>

#include <set>
#include <string>

#include "error_shape.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// What issue 34's other parts bring (tool use, thinking) is refused by name
// until it is wired into this dialect: the request fields here, the content
// block types in kNotYetBlocks, and `thinking` other than disabled.
constexpr const char* kNotYetFields[] = {"tools", "tool_choice"};
const std::set<std::string, std::less<>> kNotYetBlocks{"tool_use", "tool_result", "thinking",
                                                       "redacted_thinking", "server_tool_use"};
constexpr const char* kNotYet = "is not supported by ferrox yet";

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

// A text block list's text (or a string's), each block checked.
std::string blocks_text(const ordered_json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        throw ApiError{400, fmt::format("'{}' must be a string or a list of content blocks", where),
                       where};
    std::string text;
    for (size_t j = 0; j < content.size(); ++j) {
        Fields block(content[j], fmt::format("{}[{}]", where, j));
        const std::string type = block.string("type", "");
        if (kNotYetBlocks.count(type)) block.fail("type", fmt::format("'{}' {}", type, kNotYet));
        if (type != "text")
            block.fail("type", fmt::format("'{}' is not supported by ferrox (only text)", type));
        if (!block.has("text") || !block.raw("text").is_string())
            block.fail("text", "must be a string");
        text += block.raw("text").get<std::string>();
        // A caching hint: ferrox caches prompt prefixes whether asked or not.
        if (block.has("cache_control")) {
            Fields cc(block.raw("cache_control"), fmt::format("{}[{}].cache_control", where, j));
            if (cc.string("type", "") != "ephemeral") cc.fail("type", "must be 'ephemeral'");
            (void)cc.string("ttl", "");
            cc.refuse_the_rest();
        }
        if (block.has("citations") && !block.raw("citations").is_array())
            block.fail("citations", "must be a list");
        if (block.has("citations") && !block.raw("citations").empty())
            block.fail("citations", "is not supported by ferrox (only an empty list)");
        block.refuse_the_rest();
    }
    return text;
}

// The prompt of a Messages (or count_tokens) body: `system`, then
// `messages`; a last assistant message is the start of the answer (Anthropic's
// prefill), appended after the template's generation prompt.
std::vector<int32_t> read_prompt(Fields& f, const ParseInput& in) {
    for (const char* name : kNotYetFields)
        if (f.has(name)) f.fail(name, kNotYet);
    if (f.has("thinking")) {
        Fields thinking(f.raw("thinking"), "thinking");
        const std::string type = thinking.string("type", "");
        if (type != "disabled") thinking.fail("type", fmt::format("'{}' {}", type, kNotYet));
        thinking.refuse_the_rest();
    }
    ordered_json chat = ordered_json::array();
    if (f.has("system"))
        chat.push_back({{"role", "system"}, {"content", blocks_text(f.raw("system"), "system")}});
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
        if (!m.has("content")) m.fail("content", "is required");
        std::string text = blocks_text(m.raw("content"), where + ".content");
        m.refuse_the_rest();
        if (role == "assistant" && i + 1 == messages.size())
            prefill = std::move(text);
        else
            chat.push_back({{"role", role}, {"content", std::move(text)}});
    }
    auto rendered = in.render_chat(chat);
    if (!rendered) throw ApiError{400, rendered.error().message(), "messages"};
    std::vector<int32_t> prompt = std::move(rendered->tokens);
    // Text from a client stays text: no control tokens from the prefill.
    const std::vector<int32_t> more = in.tokenizer.encode(prefill, false, false);
    prompt.insert(prompt.end(), more.begin(), more.end());
    if (prompt.empty()) throw ApiError{400, "the messages encode to no tokens", "messages"};
    return prompt;
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
        g.prompt = read_prompt(f, in);
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
    }
    bool streamed() const override { return stream_; }

    Chunks stream_start() override {
        // The cached part of the prompt is known at the end (message_delta).
        ordered_json opening = message(ordered_json::array(), nullptr, nullptr);
        opening["usage"] = {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}};
        return {sse({{"type", "message_start"}, {"message", std::move(opening)}}),
                sse({{"type", "content_block_start"},
                     {"index", 0},
                     {"content_block", {{"type", "text"}, {"text", ""}}}}),
                sse({{"type", "ping"}})};
    }
    Chunks stream_text(const Event& text) override {
        return {sse({{"type", "content_block_delta"},
                     {"index", 0},
                     {"delta", {{"type", "text_delta"}, {"text", text.text}}}})};
    }
    Chunks stream_end(const Event& done) override {
        return {sse({{"type", "content_block_stop"}, {"index", 0}}),
                sse({{"type", "message_delta"},
                     {"delta",
                      {{"stop_reason", stop_reason(done.finish)},
                       {"stop_sequence", stop_sequence(done)}}},
                     {"usage", usage(done)}}),
                sse({{"type", "message_stop"}})};
    }
    Chunks stream_error(const ApiError& e) override {
        return {"event: error\ndata: " + error_json(ErrorShape::Anthropic, e) + "\n\n"};
    }

    void collect(const Event& text) override { text_ += text.text; }
    std::string answer(const Event& done) override {
        ordered_json whole = message(ordered_json::array({{{"type", "text"}, {"text", text_}}}),
                                     stop_reason(done.finish), stop_sequence(done));
        whole["usage"] = usage(done);
        return json_text(whole);
    }

  private:
    ordered_json message(ordered_json content, ordered_json reason, ordered_json sequence) const {
        return {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", std::move(content)},
                {"stop_reason", std::move(reason)},
                {"stop_sequence", std::move(sequence)}};
    }
    static ordered_json stop_sequence(const Event& done) {
        if (done.finish != FinishReason::StopString) return nullptr;
        return done.stop_string;
    }

    std::string id_, model_;
    bool stream_ = false;
    uint32_t prompt_tokens_ = 0;
    std::string text_;
};

}  // namespace

std::unique_ptr<Dialect> anthropic_messages(ReplyIds ids) {
    return std::make_unique<Messages>(std::move(ids));
}

uint32_t count_message_tokens(const ordered_json& body, const ParseInput& in) {
    Fields f(body, "");
    (void)f.string("model", "");
    const std::vector<int32_t> prompt = read_prompt(f, in);
    f.refuse_the_rest();
    return static_cast<uint32_t>(prompt.size());
}

}  // namespace ferrox::server
