#include "responses_dialect.h"

#include <fmt/format.h>

#include <ctime>
#include <set>
#include <string>

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// What issue 34's other parts bring (tool calls, JSON-schema output,
// reasoning) is refused by name until it is wired into this dialect: the
// request fields here, the input item types in kNotYetItems, and
// text.format's json types in read_text_format.
constexpr const char* kNotYetFields[] = {"tools", "tool_choice", "parallel_tool_calls",
                                         "max_tool_calls", "reasoning"};
const std::set<std::string, std::less<>> kNotYetItems{"function_call", "function_call_output",
                                                      "reasoning", "custom_tool_call",
                                                      "custom_tool_call_output"};
constexpr const char* kNotYet = "is not supported by ferrox yet";

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

ordered_json usage(const Event& done) {
    return {{"input_tokens", done.prompt_tokens},
            // ferrox does not count what it writes to its prefix cache.
            {"input_tokens_details",
             {{"cached_tokens", done.cached_tokens}, {"cache_write_tokens", 0}}},
            {"output_tokens", done.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", done.prompt_tokens + done.completion_tokens}};
}

// One input message's text: a string, or a list of text parts.
std::string content_text(Fields& item, const std::string& where) {
    if (!item.has("content")) item.fail("content", "is required");
    const ordered_json& c = item.raw("content");
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) item.fail("content", "must be a string or a list of content parts");
    std::string text;
    for (size_t j = 0; j < c.size(); ++j) {
        Fields part(c[j], fmt::format("{}.content[{}]", where, j));
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

// `input` (and `instructions`, first, as a system message) as the chat
// template's messages.
ordered_json input_messages(Fields& f, const RequestLimits& limits) {
    ordered_json messages = ordered_json::array();
    if (f.has("instructions"))
        messages.push_back({{"role", "system"}, {"content", f.string("instructions", "")}});
    const ordered_json& input = f.raw("input");
    if (input.is_string()) {
        messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
        return messages;
    }
    if (!input.is_array() || input.empty())
        f.fail("input", "must be a string or a non-empty list of input items");
    if (input.size() > limits.max_messages)
        f.fail("input", fmt::format("has {} items; at most {}", input.size(), limits.max_messages));
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string where = fmt::format("input[{}]", i);
        Fields item(input[i], where);
        const std::string type = item.string("type", "message");
        if (kNotYetItems.count(type)) item.fail("type", fmt::format("'{}' {}", type, kNotYet));
        if (type != "message")
            item.fail("type", fmt::format("'{}' is not supported by ferrox (only message)", type));
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
        messages.push_back({{"role", role}, {"content", std::move(text)}});
    }
    return messages;
}

void read_text_format(Fields& f) {
    if (!f.has("text")) return;
    Fields text(f.raw("text"), "text");
    if (text.has("format")) {
        Fields format(text.raw("format"), "text.format");
        const std::string type = format.string("type", "");
        if (type == "json_schema" || type == "json_object")
            format.fail("type", fmt::format("'{}' {}", type, kNotYet));
        if (type != "text") format.fail("type", "must be text, json_schema or json_object");
        format.refuse_the_rest();
    }
    text.refuse_the_rest();
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
        : id_("resp_" + ids.request_id),
          item_id_("msg_" + ids.request_id),
          model_(std::move(ids.model)),
          created_(std::time(nullptr)) {}

    void parse(const ordered_json& body, const ParseInput& in, GenerationRequest& g) override {
        Fields f(body, "");
        (void)f.string("model", "");  // one model is served, whatever the client names
        (void)f.string("user", "");
        (void)f.string("safety_identifier", "");
        for (const char* name : kNotYetFields)
            if (f.has(name)) f.fail(name, kNotYet);
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
        read_text_format(f);
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

        const ordered_json messages = input_messages(f, in.limits);
        auto rendered = in.render_chat(messages);
        if (!rendered) throw ApiError{400, rendered.error().message(), "input"};
        g.prompt = std::move(rendered->tokens);
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
    }
    bool streamed() const override { return stream_; }

    Chunks stream_start() override {
        return {event("response.created", {{"response", response("in_progress", nullptr)}}),
                event("response.in_progress", {{"response", response("in_progress", nullptr)}}),
                event("response.output_item.added",
                      {{"output_index", 0}, {"item", message_item("in_progress", nullptr)}}),
                event("response.content_part.added", part_fields(output_text_part("")))};
    }
    Chunks stream_text(const Event& text) override {
        text_ += text.text;
        ordered_json delta = text_fields();
        delta["delta"] = text.text;
        delta["logprobs"] = ordered_json::array();
        return {event("response.output_text.delta", std::move(delta))};
    }
    Chunks stream_end(const Event& done) override {
        const char* status = ran_out(done.finish) ? "incomplete" : "completed";
        ordered_json text_done = text_fields();
        text_done["text"] = text_;
        text_done["logprobs"] = ordered_json::array();
        return {event("response.output_text.done", std::move(text_done)),
                event("response.content_part.done", part_fields(output_text_part(text_))),
                event("response.output_item.done",
                      {{"output_index", 0}, {"item", message_item(status, text_)}}),
                event(ran_out(done.finish) ? "response.incomplete" : "response.completed",
                      {{"response", whole(done)}})};
    }
    Chunks stream_error(const ApiError& e) override {
        ordered_json failed =
            response("failed", ordered_json::array({message_item("incomplete", text_)}));
        failed["error"] = {{"code", "server_error"}, {"message", e.message}};
        return {event("response.failed", {{"response", std::move(failed)}})};
    }

    void collect(const Event& text) override { text_ += text.text; }
    std::string answer(const Event& done) override { return json_text(whole(done)); }

  private:
    // One stream event: its type, its fields, and the next sequence number.
    std::string event(const char* type, ordered_json fields) {
        ordered_json e{{"type", type}};
        for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = std::move(*it);
        e["sequence_number"] = sequence_++;
        return sse(e);
    }
    ordered_json text_fields() const {
        return {{"item_id", item_id_}, {"output_index", 0}, {"content_index", 0}};
    }
    ordered_json part_fields(ordered_json part) const {
        ordered_json f = text_fields();
        f["part"] = std::move(part);
        return f;
    }
    // The one output item: the assistant's message; `text` null while it has no content.
    ordered_json message_item(const char* status, const ordered_json& text) const {
        ordered_json content = ordered_json::array();
        if (!text.is_null()) content.push_back(output_text_part(text.get<std::string>()));
        return {{"type", "message"},
                {"id", item_id_},
                {"status", status},
                {"role", "assistant"},
                {"content", std::move(content)}};
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
                {"parallel_tool_calls", false},
                {"previous_response_id", nullptr},
                {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
                {"store", false},
                {"temperature", temperature_},
                {"text", {{"format", {{"type", "text"}}}}},
                {"tool_choice", "none"},
                {"tools", ordered_json::array()},
                {"top_p", top_p_},
                {"truncation", "disabled"},
                {"usage", nullptr}};
    }
    ordered_json whole(const Event& done) const {
        const bool incomplete = ran_out(done.finish);
        ordered_json r = response(
            incomplete ? "incomplete" : "completed",
            ordered_json::array({message_item(incomplete ? "incomplete" : "completed", text_)}));
        if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
        r["usage"] = usage(done);
        return r;
    }

    std::string id_, item_id_, model_;
    int64_t created_;
    bool stream_ = false;
    ordered_json instructions_ = nullptr, max_output_tokens_ = nullptr, metadata_;
    double temperature_ = 0, top_p_ = 0;
    std::string text_;
    uint64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<Dialect> responses(ReplyIds ids) {
    return std::make_unique<Responses>(std::move(ids));
}

}  // namespace ferrox::server
