#include "openai_dialects.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "chat_answer.h"
#include "chat_tools.h"
#include "chat_turn.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "reasoning_budget.h"
#include "structured_output.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

std::string sse(const ordered_json& j) { return "data: " + json_text(j) + "\n\n"; }

// OpenAI's words for a whole answer's end.
const char* finish_reason(FinishReason why) {
    return why == FinishReason::Length ? "length" : "stop";
}

ordered_json logprob_entry(const TokenLogprob& lp) {
    const auto bytes = [](const std::string& s) {
        ordered_json b = ordered_json::array();
        for (unsigned char c : s) b.push_back(int(c));
        return b;
    };
    ordered_json top = ordered_json::array();
    for (const auto& [piece, value] : lp.top)
        top.push_back({{"token", piece}, {"logprob", value}, {"bytes", bytes(piece)}});
    return {{"token", lp.piece},
            {"logprob", lp.logprob},
            {"bytes", bytes(lp.piece)},
            {"top_logprobs", top}};
}

void read_sampling(Fields& f, const ParseInput& in, ChainParams& s) {
    s.base.temperature = static_cast<float>(f.number("temperature", 0, 2, s.base.temperature));
    s.base.top_p = static_cast<float>(f.number("top_p", 0, 1, s.base.top_p));
    if (f.has("top_p") && s.base.top_p <= 0) f.fail("top_p", "must be greater than 0");
    s.base.top_k = static_cast<uint32_t>(f.integer("top_k", 0, 1 << 20, s.base.top_k));
    s.base.min_p = static_cast<float>(f.number("min_p", 0, 1, s.base.min_p));
    s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2, 0));
    s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2, 0));
    s.base.seed = f.has("seed") ? static_cast<uint64_t>(f.integer("seed", INT64_MIN, INT64_MAX, 0))
                                : random_seed();
    if (!f.has("logit_bias")) return;
    const ordered_json& lb = f.raw("logit_bias");
    if (!lb.is_object()) f.fail("logit_bias", "must be an object of token id to bias");
    // Applied to every token sampled: bounded so one request cannot stall the step.
    if (lb.size() > in.limits.max_logit_bias)
        f.fail("logit_bias",
               fmt::format("has {} entries; at most {}", lb.size(), in.limits.max_logit_bias));
    const size_t vocab = in.tokenizer.vocab_size();
    for (auto it = lb.begin(); it != lb.end(); ++it) {
        const std::string name = "logit_bias." + it.key();
        char* end = nullptr;
        const long long id = std::strtoll(it.key().c_str(), &end, 10);
        if (it.key().empty() || *end != '\0' || id < 0 || size_t(id) >= vocab)
            throw ApiError{400, fmt::format("'{}': not a token id below {}", name, vocab), name};
        if (!it.value().is_number() || !(std::abs(it.value().get<double>()) <= 100))
            throw ApiError{400, fmt::format("'{}' must be a number in -100..100", name), name};
        s.logit_bias.emplace_back(static_cast<int32_t>(id), it.value().get<float>());
    }
}

// `grammar` (GBNF) or `response_format`: at most one; the grammar stage
// shares the server's one token trie. Returns whether it is a GBNF grammar.
bool read_constraint(Fields& f, const ParseInput& in, ChainParams& s) {
    if (f.has("response_format"))
        s.grammar = grammar_for_response_format(f.raw("response_format"), "response_format");
    if (f.has("grammar")) {
        if (s.grammar) f.fail("grammar", "and a JSON response_format exclude each other");
        s.grammar = grammar_for_gbnf(f.string("grammar", ""), "grammar");
    }
    if (!s.grammar) return false;
    if (!in.grammar_vocab)
        throw ApiError{400, "this server takes no grammars (no token trie)", "grammar"};
    s.grammar_vocab = in.grammar_vocab.get();
    return f.has("grammar");
}

std::vector<std::string> read_stop(Fields& f, const RequestLimits& l) {
    std::vector<std::string> stops;
    if (!f.has("stop")) return stops;
    const ordered_json& st = f.raw("stop");
    if (st.is_string())
        stops.push_back(st.get<std::string>());
    else if (st.is_array())
        for (const auto& one : st) {
            if (!one.is_string()) f.fail("stop", "must be a string or a list of strings");
            stops.push_back(one.get<std::string>());
        }
    else
        f.fail("stop", "must be a string or a list of strings");
    if (stops.size() > l.max_stop_strings)
        f.fail("stop", fmt::format("has more than {} strings", l.max_stop_strings));
    for (const auto& one : stops)
        if (one.size() > l.max_stop_bytes)
            f.fail("stop", fmt::format("strings must be at most {} bytes", l.max_stop_bytes));
    return stops;
}

// What the two OpenAI APIs share: the request fields but the prompt, the
// maximum and the logprobs; the envelope of chunks and answers; usage.
class OpenAIDialect : public Dialect {
  public:
    OpenAIDialect(ReplyIds ids, std::string id_prefix)
        : id_(std::move(id_prefix) + ids.request_id),
          model_(std::move(ids.model)),
          created_(std::time(nullptr)) {}

    void parse(const ordered_json& body, const ParseInput& in, GenerationRequest& g) override {
        Fields f(body, "");
        (void)f.string("model", "");  // one model is served, whatever the client names
        (void)f.string("user", "");
        if (f.integer("n", 1, 1000, 1) != 1) f.fail("n", "other than 1 is not supported by ferrox");
        stream_ = f.boolean("stream", false);
        if (f.has("stream_options")) {
            if (!stream_) f.fail("stream_options", "is only allowed with stream: true");
            Fields so(f.raw("stream_options"), "stream_options");
            include_usage_ = so.boolean("include_usage", false);
            so.refuse_the_rest();
        }
        gbnf_ = read_constraint(f, in, g.sampling);
        g.prompt = read_prompt(f, in);
        if (g.prompt.empty()) throw ApiError{400, "the prompt encodes to no tokens", "prompt"};
        const uint32_t limit = in.max_positions;
        if (g.prompt.size() >= limit)
            throw ApiError{400,
                           fmt::format("the prompt is {} tokens; this server takes at most {} "
                                       "positions per request (prompt + max_tokens)",
                                       g.prompt.size(), limit),
                           prompt_field()};
        const int64_t room = int64_t(limit) - int64_t(g.prompt.size());
        const int64_t max_tokens = read_max_tokens(f, limit, room);
        if (max_tokens > room)
            throw ApiError{400,
                           fmt::format("{} prompt tokens + max_tokens {} = {} exceed the {} "
                                       "positions a request may use",
                                       g.prompt.size(), max_tokens,
                                       int64_t(g.prompt.size()) + max_tokens, limit),
                           "max_tokens"};
        g.max_tokens = static_cast<uint32_t>(max_tokens);
        read_sampling(f, in, g.sampling);
        g.stop = read_stop(f, in.limits);
        if (f.has("speculative")) {  // docs/speculation.md
            Fields spec(f.raw("speculative"), "speculative");
            g.draft_max = static_cast<uint32_t>(spec.integer("n_max", 0, Scheduler::kMaxDraft, 0));
            spec.refuse_the_rest();
        }
        // Prefix-cache entries are shared only within one API key and salt, so
        // that cached_tokens never tells one tenant what another sent.
        const std::string salt = f.string("cache_salt", "");
        if (salt.size() > in.limits.max_cache_salt_bytes)
            f.fail("cache_salt",
                   fmt::format("must be at most {} bytes", in.limits.max_cache_salt_bytes));
        g.cache_scope = in.tenant + '\n' + salt;
        read_logprobs(f, g);
        f.refuse_the_rest();
        want_logprobs_ = g.logprobs;
        logprobs_ = empty_logprobs();
    }
    bool streamed() const override { return stream_; }

    Chunks stream_start() override {
        ordered_json opening = choice(Part::Opening, "", nullptr, nullptr);
        if (opening.is_null()) return {};
        return {sse(chunk(std::move(opening)))};
    }
    Chunks stream_text(const Event& text) override {
        ordered_json lp = nullptr;
        if (!text.logprobs.empty()) {
            lp = empty_logprobs();
            add_logprobs(lp, text.logprobs);
        }
        return {sse(chunk(choice(Part::Delta, text.text, std::move(lp), nullptr)))};
    }
    Chunks stream_end(const Event& done) override {
        Chunks out;
        ordered_json last = chunk(choice(Part::End, "", nullptr, finish_word(done)));
        if (include_usage_) last["usage"] = nullptr;
        out.push_back(sse(last));
        if (include_usage_) {
            ordered_json u = chunk({});
            u["choices"] = ordered_json::array();
            u["usage"] = usage(done);
            out.push_back(sse(u));
        }
        out.push_back("data: [DONE]\n\n");
        return out;
    }

    void collect(const Event& text) override {
        text_ += text.text;
        add_logprobs(logprobs_, text.logprobs);
    }
    std::string answer(const Event& done) override {
        ordered_json whole =
            choice(Part::Whole, text_, want_logprobs_ ? logprobs_ : ordered_json(nullptr),
                   finish_word(done));
        return json_text({{"id", id_},
                          {"object", object()},
                          {"created", created_},
                          {"model", model_},
                          {"choices", ordered_json::array({std::move(whole)})},
                          {"usage", usage(done)}});
    }

  protected:
    bool gbnf_ = false;  // the request's grammar is a GBNF `grammar` (not a response_format)

    // Where a choice stands: the stream's opening, a text delta, the stream's
    // end, or the whole answer.
    enum class Part { Opening, Delta, End, Whole };

    // This API's prompt, read from the body.
    virtual std::vector<int32_t> read_prompt(Fields& f, const ParseInput& in) = 0;
    virtual const char* prompt_field() const = 0;
    virtual int64_t read_max_tokens(Fields& f, int64_t limit, int64_t fallback) {
        return f.integer("max_tokens", 1, limit, fallback);
    }
    virtual void read_logprobs(Fields& f, GenerationRequest& g) = 0;
    virtual const char* object() const = 0;        // of the whole answer
    virtual const char* chunk_object() const = 0;  // of a stream's chunk
    virtual ordered_json empty_logprobs() const = 0;
    virtual void add_logprobs(ordered_json& to, const std::vector<TokenLogprob>& lps) = 0;
    // One choice; null when this API sends none for `part` (an opening).
    virtual ordered_json choice(Part part, const std::string& text, ordered_json logprobs,
                                ordered_json finish) const = 0;
    // OpenAI's word for how a whole answer ended.
    virtual const char* finish_word(const Event& done) const { return finish_reason(done.finish); }
    virtual ordered_json usage(const Event& done) const {
        ordered_json u = {{"prompt_tokens", done.prompt_tokens},
                          {"completion_tokens", done.completion_tokens},
                          {"total_tokens", done.prompt_tokens + done.completion_tokens},
                          {"prompt_tokens_details", {{"cached_tokens", done.cached_tokens}}}};
        // OpenAI's names for predicted-output tokens, here n-gram drafts
        // (docs/speculation.md); only when the request speculated.
        if (done.drafted_tokens > 0)
            u["completion_tokens_details"] = {
                {"accepted_prediction_tokens", done.accepted_tokens},
                {"rejected_prediction_tokens", done.drafted_tokens - done.accepted_tokens}};
        return u;
    }

    const std::string& id() const { return id_; }
    ordered_json chunk(ordered_json choice) const {
        return {{"id", id_},
                {"object", chunk_object()},
                {"created", created_},
                {"model", model_},
                {"choices", ordered_json::array({std::move(choice)})}};
    }

  private:
    std::string id_, model_;
    int64_t created_;
    bool stream_ = false, include_usage_ = false, want_logprobs_ = false;
    std::string text_;       // collected
    ordered_json logprobs_;  // collected
};

class ChatCompletions final : public OpenAIDialect {
  public:
    explicit ChatCompletions(ReplyIds ids) : OpenAIDialect(std::move(ids), "chatcmpl-") {}

    void parse(const ordered_json& body, const ParseInput& in, GenerationRequest& g) override {
        OpenAIDialect::parse(body, in, g);
        if (budget_.budget >= 0) {  // read_reasoning_budget checked that the trie is there
            g.sampling.reasoning_budget = std::move(budget_);
            g.sampling.grammar_vocab = in.grammar_vocab.get();
        }
        arm_lazy_tool_call(std::move(lazy_call_), in, g);
        force_tool_call(std::move(forced_call_), in, g, "tool_choice", !gbnf_);
    }

    // The answer's text goes through the family's parser (chat_answer.h):
    // each delta it completes is one chunk, and the logprobs of text it
    // holds back ride on the next chunk that goes out.
    Chunks stream_text(const Event& text) override {
        add_logprobs(pending_logprobs_, text.logprobs);
        return delta_chunks(answer_->feed(text.text), false);
    }
    Chunks stream_end(const Event& done) override {
        Chunks out = delta_chunks(answer_->finish(), true);
        for (std::string& c : OpenAIDialect::stream_end(done)) out.push_back(std::move(c));
        return out;
    }
    void collect(const Event& text) override {
        OpenAIDialect::collect(text);
        (void)answer_->feed(text.text);
    }
    std::string answer(const Event& done) override {
        (void)answer_->finish();
        return OpenAIDialect::answer(done);
    }

  private:
    std::vector<int32_t> read_prompt(Fields& f, const ParseInput& in) override {
        const ordered_json messages = checked_messages(f.raw("messages"), in.limits.max_messages);
        const ChatToolFields tools =
            read_chat_tools(f, in.render_chat.family(), in.limits.max_tools);
        ChatTurn turn =
            start_chat_turn(messages, tools, in, std::hash<std::string>{}(id()), "messages");
        answer_ = std::move(turn.answer);
        forced_call_ = std::move(turn.forced_call);
        lazy_call_ = std::move(turn.lazy_call);
        budget_ =
            read_reasoning_budget(f, in, in.render_chat.family().family, turn.starts_in_reasoning);
        tokenizer_ = &in.tokenizer;
        return std::move(turn.prompt);
    }
    const char* finish_word(const Event& done) const override {
        if (done.finish != FinishReason::Length && answer_ && answer_->has_tool_calls())
            return "tool_calls";
        return OpenAIDialect::finish_word(done);
    }
    ordered_json usage(const Event& done) const override {
        ordered_json u = OpenAIDialect::usage(done);
        const size_t reasoning =
            answer_ && tokenizer_ ? reasoning_tokens(*answer_, *tokenizer_) : 0;
        u["completion_tokens_details"]["reasoning_tokens"] = reasoning;
        return u;
    }
    Chunks delta_chunks(std::vector<ordered_json> deltas, bool last) {
        Chunks out;
        const bool have_logprobs = !pending_logprobs_["content"].empty();
        if (deltas.empty() && last && have_logprobs) deltas.push_back({{"content", ""}});
        for (size_t i = 0; i < deltas.size(); ++i) {
            ordered_json lp = nullptr;
            if (i == 0 && have_logprobs) {
                lp = std::move(pending_logprobs_);
                pending_logprobs_ = empty_logprobs();
            }
            ordered_json c{{"index", 0},
                           {"delta", std::move(deltas[i])},
                           {"logprobs", std::move(lp)},
                           {"finish_reason", nullptr}};
            out.push_back(sse(chunk(std::move(c))));
        }
        return out;
    }
    const char* prompt_field() const override { return "messages"; }
    int64_t read_max_tokens(Fields& f, int64_t limit, int64_t fallback) override {
        const int64_t max_tokens = f.integer("max_tokens", 1, limit, fallback);
        return f.integer("max_completion_tokens", 1, limit, max_tokens);  // wins
    }
    void read_logprobs(Fields& f, GenerationRequest& g) override {
        g.logprobs = f.boolean("logprobs", false);
        g.top_logprobs = static_cast<uint32_t>(f.integer("top_logprobs", 0, 20, 0));
        if (g.top_logprobs > 0 && !g.logprobs) f.fail("top_logprobs", "needs logprobs: true");
    }
    const char* object() const override { return "chat.completion"; }
    const char* chunk_object() const override { return "chat.completion.chunk"; }
    ordered_json empty_logprobs() const override { return {{"content", ordered_json::array()}}; }
    void add_logprobs(ordered_json& to, const std::vector<TokenLogprob>& lps) override {
        for (const TokenLogprob& lp : lps) to["content"].push_back(logprob_entry(lp));
    }
    ordered_json choice(Part part, const std::string& text, ordered_json logprobs,
                        ordered_json finish) const override {
        ordered_json c{{"index", 0}};
        switch (part) {
            case Part::Opening:
                c["delta"] = {{"role", "assistant"}, {"content", ""}};
                break;
            case Part::Delta:
                c["delta"] = {{"content", text}};
                break;
            case Part::End:
                c["delta"] = ordered_json::object();
                break;
            case Part::Whole:
                c["message"] = answer_ ? answer_->message()
                                       : ordered_json{{"role", "assistant"}, {"content", text}};
                break;
        }
        c["logprobs"] = std::move(logprobs);
        c["finish_reason"] = std::move(finish);
        return c;
    }

    std::optional<ChatAnswer> answer_;                     // set by read_prompt
    std::shared_ptr<const grammar::Grammar> forced_call_;  // tool_choice required or named
    LazyGrammarParams lazy_call_;                          // tool_choice auto
    ReasoningBudgetParams budget_;                         // thinking_token_budget
    const Tokenizer* tokenizer_ = nullptr;
    ordered_json pending_logprobs_ = empty_logprobs();
};

class Completions final : public OpenAIDialect {
  public:
    explicit Completions(ReplyIds ids) : OpenAIDialect(std::move(ids), "cmpl-") {}

  private:
    std::vector<int32_t> read_prompt(Fields& f, const ParseInput& in) override {
        if (!f.has("prompt")) f.fail("prompt", "is required");
        const ordered_json& p = f.raw("prompt");
        std::string text;
        if (p.is_string())
            text = p.get<std::string>();
        else if (p.is_array() && p.size() == 1 && p[0].is_string())
            text = p[0].get<std::string>();
        else
            f.fail("prompt", "must be a string (or a list of one string)");
        text_offset_ = text.size();  // the answer's offsets count from the prompt's end
        // Text from a client stays text: "<start_of_turn>" in it is not that token.
        return in.tokenizer.encode(text, true, false);
    }
    const char* prompt_field() const override { return "prompt"; }
    void read_logprobs(Fields& f, GenerationRequest& g) override {
        const int64_t n = f.integer("logprobs", 0, 5, -1);
        g.logprobs = n >= 0;
        g.top_logprobs = static_cast<uint32_t>(std::max<int64_t>(n, 0));
    }
    const char* object() const override { return "text_completion"; }
    const char* chunk_object() const override { return "text_completion"; }
    // The legacy form: parallel arrays.
    ordered_json empty_logprobs() const override {
        return {{"tokens", ordered_json::array()},
                {"token_logprobs", ordered_json::array()},
                {"top_logprobs", ordered_json::array()},
                {"text_offset", ordered_json::array()}};
    }
    void add_logprobs(ordered_json& to, const std::vector<TokenLogprob>& lps) override {
        for (const TokenLogprob& lp : lps) {
            to["tokens"].push_back(lp.piece);
            to["token_logprobs"].push_back(lp.logprob);
            ordered_json top = ordered_json::object();
            for (const auto& [piece, value] : lp.top) top[piece] = value;
            to["top_logprobs"].push_back(top);
            to["text_offset"].push_back(text_offset_);
            text_offset_ += lp.piece.size();
        }
    }
    ordered_json choice(Part part, const std::string& text, ordered_json logprobs,
                        ordered_json finish) const override {
        if (part == Part::Opening) return nullptr;
        return {{"text", part == Part::End ? std::string() : text},
                {"index", 0},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", std::move(finish)}};
    }

    size_t text_offset_ = 0;
};

}  // namespace

std::unique_ptr<Dialect> chat_completions(ReplyIds ids) {
    return std::make_unique<ChatCompletions>(std::move(ids));
}

std::unique_ptr<Dialect> completions(ReplyIds ids) {
    return std::make_unique<Completions>(std::move(ids));
}

}  // namespace ferrox::server
