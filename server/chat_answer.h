// A chat answer the way OpenAI's Chat Completions returns one: the model's
// text split by its template's family (chat_format/stream_parser.h) into
// `content`, `reasoning_content` and `tool_calls`, as stream deltas or one
// message. The split is the same either way: the whole message is the
// deltas folded together.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/chat_format/stream_parser.h"

namespace ferrox::server {

// How an answer's text is read. Tool calls are read only when the request
// gave tools and allows a call; otherwise a family whose reasoning is
// `<think>` reads reasoning alone (ThinkOnly) and others their own way.
ChatFamily answer_family(ChatFamily family, bool reads_calls);

class ChatAnswer {
  public:
    ChatAnswer(ChatFamily family, ChatParseOptions options);

    // The deltas (each one chunk's `delta` object) that `text` completes;
    // text that may still be the start of a marker is held back.
    std::vector<nlohmann::ordered_json> feed(std::string_view text);
    // The answer ended: what was held back, as deltas.
    std::vector<nlohmann::ordered_json> finish();
    // The same, as the parser's events, for dialects with their own shape of
    // an answer (/v1/responses items, /v1/messages blocks). One answer is
    // read either by deltas or by events, not both.
    std::vector<ChatEvent> feed_events(std::string_view text);
    std::vector<ChatEvent> finish_events();
    // The answer goes on from `prefill`, the start of it a client wrote
    // (Anthropic's last assistant turn): the parser reads it first, so that
    // what follows is read in its place, and none of it is the answer's.
    // Before any feed.
    void continue_after(std::string_view prefill);

    // The whole message: role, content (null when there are calls and no
    // text), reasoning_content when there is any, tool_calls when any.
    nlohmann::ordered_json message() const;
    bool has_tool_calls() const { return !answer_.tool_calls.empty(); }
    const std::string& reasoning() const { return answer_.reasoning; }
    const ParsedAnswer& parsed() const { return answer_; }

  private:
    // Events less the prefill's held-back content, folded into answer_.
    std::vector<ChatEvent> kept(std::vector<ChatEvent> events);
    std::vector<nlohmann::ordered_json> deltas(const std::vector<ChatEvent>& events);

    ChatFamily family_;
    ChatParseOptions options_;
    ChatStreamParser parser_;
    ParsedAnswer answer_;
    bool failed_ = false;  // the parser refused more text: the rest is content
    // Bytes of content still to drop: the prefill's end, which the parser
    // held back (it may start a marker) and releases with the answer.
    size_t prefill_held_ = 0;
};

}  // namespace ferrox::server
