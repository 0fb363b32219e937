// An answer parsed as it streams: fed detokenized text in pieces of any size,
// it sends content and reasoning as soon as they cannot be the start of a
// marker, and each tool call once its text is complete and parsed (a call is
// never announced and then taken back as content). Whatever the pieces, the
// events concatenate to parse_answer() of the whole text.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/chat_format/answer.h"
#include "ferrox/expected.h"

namespace ferrox {

struct ChatEvent {
    enum class Kind {
        Content,            // text: more content
        Reasoning,          // text: more reasoning
        ToolCallStart,      // index, id, name: a call begins (its arguments follow)
        ToolCallArguments,  // index, text: more of that call's arguments (JSON text)
    };
    Kind kind = Kind::Content;
    std::string text;
    size_t index = 0;  // the call's position in the answer, from 0
    std::string id, name;
};

class FERROX_API ChatStreamParser {
  public:
    explicit ChatStreamParser(ChatFamily family, ChatParseOptions options = {});
    ~ChatStreamParser();
    ChatStreamParser(ChatStreamParser&&) noexcept;
    ChatStreamParser& operator=(ChatStreamParser&&) noexcept;

    // Appends the events `delta` completes to `out`. Past limits.max_text in
    // all, an error naming it (and the parser takes nothing more).
    Expected<void> feed(std::string_view delta, std::vector<ChatEvent>& out);
    // The answer ended: releases what was held back (an unfinished call
    // becomes content). Feeding after finish() is an error.
    Expected<void> finish(std::vector<ChatEvent>& out);

  private:
    struct State;
    std::unique_ptr<State> state_;
};

// Events folded into an answer (what a client does with the deltas).
FERROX_API void apply_chat_event(ParsedAnswer& answer, const ChatEvent& event);

}  // namespace ferrox
