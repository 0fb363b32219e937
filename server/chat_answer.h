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

    // The whole message: role, content (null when there are calls and no
    // text), reasoning_content when there is any, tool_calls when any.
    nlohmann::ordered_json message() const;
    bool has_tool_calls() const { return !answer_.tool_calls.empty(); }
    const std::string& reasoning() const { return answer_.reasoning; }

  private:
    std::vector<nlohmann::ordered_json> deltas(const std::vector<ChatEvent>& events);

    ChatStreamParser parser_;
    ParsedAnswer answer_;
    bool failed_ = false;  // the parser refused more text: the rest is content
};

}  // namespace ferrox::server
