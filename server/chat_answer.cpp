#include "chat_answer.h"

#include <algorithm>

namespace ferrox::server {

using nlohmann::ordered_json;

ChatFamily answer_family(ChatFamily family, bool reads_calls) {
    if (reads_calls) return family;
    const ChatFamilyInfo& info = family_info(family);
    if (info.reasoning_start == "<think>") return ChatFamily::ThinkOnly;
    // Harmony's channels hold the reasoning whatever the tools; the rest
    // write no reasoning ferrox reads without their call markers.
    return family == ChatFamily::Harmony ? family : ChatFamily::Generic;
}

ChatAnswer::ChatAnswer(ChatFamily family, ChatParseOptions options)
    : family_(family), options_(options), parser_(family, std::move(options)) {}

void ChatAnswer::continue_after(std::string_view prefill) {
    if (prefill.empty()) return;
    std::vector<ChatEvent> events;
    if (!parser_.feed(prefill, events)) {
        failed_ = true;
        return;
    }
    // What the prefill parses to alone, less what the parser let out: the
    // content it holds back, which comes out again at the answer's start.
    auto whole = parse_answer(family_, prefill, options_);
    size_t let_out = 0;
    for (const ChatEvent& e : events)
        if (e.kind == ChatEvent::Kind::Content) let_out += e.text.size();
    if (whole && whole->tool_calls.empty() && whole->content.size() > let_out)
        prefill_held_ = whole->content.size() - let_out;
}

std::vector<ordered_json> ChatAnswer::deltas(const std::vector<ChatEvent>& events) {
    std::vector<ordered_json> out;
    for (const ChatEvent& e : events) {
        switch (e.kind) {
            case ChatEvent::Kind::Content:
                out.push_back({{"content", e.text}});
                break;
            case ChatEvent::Kind::Reasoning:
                out.push_back({{"reasoning_content", e.text}});
                break;
            case ChatEvent::Kind::ToolCallStart:
                out.push_back(
                    {{"tool_calls", ordered_json::array(
                                        {{{"index", e.index},
                                          {"id", e.id},
                                          {"type", "function"},
                                          {"function", {{"name", e.name}, {"arguments", ""}}}}})}});
                break;
            case ChatEvent::Kind::ToolCallArguments:
                out.push_back({{"tool_calls",
                                ordered_json::array({{{"index", e.index},
                                                      {"function", {{"arguments", e.text}}}}})}});
                break;
        }
    }
    return out;
}

std::vector<ChatEvent> ChatAnswer::feed_events(std::string_view text) {
    std::vector<ChatEvent> events;
    if (failed_ || !parser_.feed(text, events)) {
        // Past the parser's bounds: the text is still the answer's, as content.
        failed_ = true;
        events.push_back({ChatEvent::Kind::Content, std::string(text), 0, {}, {}});
    }
    return kept(std::move(events));
}

std::vector<ChatEvent> ChatAnswer::finish_events() {
    std::vector<ChatEvent> events;
    if (!failed_) (void)parser_.finish(events);
    return kept(std::move(events));
}

std::vector<ChatEvent> ChatAnswer::kept(std::vector<ChatEvent> events) {
    std::vector<ChatEvent> out;
    for (ChatEvent& e : events) {
        if (prefill_held_ > 0) {
            if (e.kind != ChatEvent::Kind::Content) {
                prefill_held_ = 0;  // the held text became a marker, not content
            } else {
                const size_t drop = std::min(prefill_held_, e.text.size());
                e.text.erase(0, drop);
                prefill_held_ -= drop;
                if (e.text.empty()) continue;
            }
        }
        apply_chat_event(answer_, e);
        out.push_back(std::move(e));
    }
    return out;
}

std::vector<ordered_json> ChatAnswer::feed(std::string_view text) {
    return deltas(feed_events(text));
}

std::vector<ordered_json> ChatAnswer::finish() { return deltas(finish_events()); }

ordered_json ChatAnswer::message() const {
    ordered_json m{{"role", "assistant"}};
    m["content"] = answer_.content.empty() && has_tool_calls() ? ordered_json(nullptr)
                                                               : ordered_json(answer_.content);
    if (!answer_.reasoning.empty()) m["reasoning_content"] = answer_.reasoning;
    if (has_tool_calls()) {
        ordered_json calls = ordered_json::array();
        for (const ChatToolCall& c : answer_.tool_calls)
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        m["tool_calls"] = std::move(calls);
    }
    return m;
}

}  // namespace ferrox::server
