// One API's shape of a generation: how its request body becomes the
// GenerationRequest the scheduler runs, and how the job's events become its
// answer, streamed or whole. Api::generate runs every generation endpoint as
// parse -> submit -> stream | collect over one of these, so an API is one
// subclass and one row of Api's endpoint table (server/openai_dialects.h
// holds Chat Completions and Completions, server/responses_dialect.h OpenAI's
// Responses, server/messages_dialect.h Anthropic's Messages). An object
// serves one request and keeps what it needs between events (the text so
// far, a logprob offset).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bounded_json.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/expected.h"
#include "ferrox/grammar/matcher.h"
#include "grammar_vocab.h"
#include "request_fields.h"
#include "scheduler.h"

namespace ferrox {
class Tokenizer;
}

namespace ferrox::server {

struct RenderedChat {
    std::string text;
    std::vector<int32_t> tokens;
};

// How a chat request becomes its prompt: the template's render of the
// messages (already checked: request_fields.h), the tools (null or checked:
// chat_tools.h) and extra template variables (null or an object), and the
// tool-call and reasoning family that template writes (chat_format/family.h).
class ChatRenderFn {
  public:
    using Render = std::function<Expected<RenderedChat>(const nlohmann::ordered_json& messages,
                                                        const nlohmann::ordered_json& tools,
                                                        const nlohmann::ordered_json& kwargs)>;
    ChatRenderFn() = default;
    ChatRenderFn(Render render, DetectedChatFamily family)
        : render_(std::move(render)), family_(family) {}
    // A render of messages alone (tests): tools or kwargs are an error.
    template <class F>
    requires std::is_invocable_r_v < Expected<RenderedChat>, F,
    const nlohmann::ordered_json& >
        ChatRenderFn(F render)  // NOLINT(google-explicit-constructor): a lambda stands for one
        : render_([render = std::move(render)](
                      const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                      const nlohmann::ordered_json& kwargs) -> Expected<RenderedChat> {
              if (!tools.is_null() || !kwargs.is_null())
                  return make_error("this template renders no tools or template variables");
              return render(messages);
          }) {}

    Expected<RenderedChat> operator()(const nlohmann::ordered_json& messages,
                                      const nlohmann::ordered_json& tools = nullptr,
                                      const nlohmann::ordered_json& kwargs = nullptr) const {
        return render_(messages, tools, kwargs);
    }
    const DetectedChatFamily& family() const { return family_; }

  private:
    Render render_;
    DetectedChatFamily family_;
};

// Limits on what one request may ask for, fixed (docs/security.md states
// each): every array and object a client controls is bounded by count, and
// the per-step work it causes by that count.
struct RequestLimits {
    JsonLimits json = kRequestJsonLimits;  // depth, values, members of one object
    uint32_t max_messages = 1024;
    uint32_t max_stop_strings = 16;
    uint32_t max_stop_bytes = 1024;  // each
    uint32_t max_logit_bias = 1024;  // entries, applied to every sampled token
    uint32_t max_cache_salt_bytes = 256;
    uint32_t max_tools = 128;  // function tools, each rendered into the prompt
};

// What a dialect reads a request against.
struct ParseInput {
    const Tokenizer& tokenizer;
    const ChatRenderFn& render_chat;
    uint32_t max_positions;  // prompt + max_tokens of one request
    const RequestLimits& limits;
    const std::string& tenant;  // whose prefix-cache entries the request may share
    // The vocabulary's byte trie for grammar stages, built once per model on
    // first use; none: requests with a grammar are refused.
    GrammarVocab grammar_vocab = {};
    // The thinking budget of a request that names none (--reasoning-budget): -1 unlimited.
    int32_t reasoning_budget = -1;
};

// Who answers: the response's id and the model's name.
struct ReplyIds {
    std::string request_id;  // the X-Request-Id
    std::string model;
};

class Dialect {
  public:
    virtual ~Dialect() = default;

    // Reads and checks the whole body into `request` (whose arrival and
    // deadline are set), throwing ApiError naming the field at fault.
    virtual void parse(const nlohmann::ordered_json& body, const ParseInput& in,
                       GenerationRequest& request) = 0;
    virtual bool streamed() const = 0;  // after parse

    // A stream, as its chunks (one event each): what is sent before any
    // text, for one Text event, and for the Done event of a whole answer
    // (the last chunks of the stream).
    using Chunks = std::vector<std::string>;
    virtual Chunks stream_start() = 0;
    virtual Chunks stream_text(const Event& text) = 0;
    virtual Chunks stream_end(const Event& done) = 0;
    // A whole answer: each Text event, then the JSON body for the Done one.
    virtual void collect(const Event& text) = 0;
    virtual std::string answer(const Event& done) = 0;
    // The last chunks of a stream cut short after its 200 went out (a
    // timeout, the drain). OpenAI's Chat Completions and Completions send one
    // `data: {"error": ...}` chunk and no [DONE].
    virtual Chunks stream_error(const ApiError& e);
};

// What the dialects read alike.

// A seed for a request that names none.
uint64_t random_seed();

// The output budget read from `key`: `prompt` tokens must leave room in
// `limit` positions (else a 400 naming `prompt_field`), and the budget
// (default: all the room left, unless `required`) must fit that room.
uint32_t checked_max_tokens(Fields& f, const char* key, bool required, size_t prompt,
                            uint32_t limit, const char* prompt_field);

// Stop strings from `value` (a string or a list of strings; `name` is its
// field), within the limits' count and length.
std::vector<std::string> checked_stop_strings(const nlohmann::ordered_json& value,
                                              const std::string& name, const RequestLimits& limits);

}  // namespace ferrox::server
