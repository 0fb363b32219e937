// libFuzzer target: arbitrary bytes as a model's answer. The first byte picks
// the family and the stream's cut pattern; the rest is the text. parse_answer
// must not crash, and the stream fed the text in pieces must give the same
// parse (a difference traps).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ferrox/chat_format/answer.h"
#include "ferrox/chat_format/stream_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const auto families = ferrox::all_chat_families();
    const ferrox::ChatFamily family = families[data[0] % families.size()].family;
    const unsigned stride = 1 + (data[0] >> 4);  // 1..16 bytes per piece
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    ferrox::ChatParseOptions options;
    options.starts_in_reasoning = (data[0] & 8) != 0;
    options.limits.max_call_bytes = 512;  // small, so the bound's paths run too
    options.limits.max_calls = 4;
    options.limits.max_json_depth = 16;
    const auto whole = ferrox::parse_answer(family, text, options);
    if (!whole) __builtin_trap();  // under max_text, parsing never fails

    ferrox::ChatStreamParser parser(family, options);
    std::vector<ferrox::ChatEvent> events;
    for (size_t at = 0; at < text.size(); at += stride)
        if (!parser.feed(text.substr(at, stride), events)) __builtin_trap();
    if (!parser.finish(events)) __builtin_trap();
    ferrox::ParsedAnswer streamed;
    for (const auto& e : events) ferrox::apply_chat_event(streamed, e);
    if (streamed.content != whole->content || streamed.reasoning != whole->reasoning ||
        streamed.tool_calls.size() != whole->tool_calls.size())
        __builtin_trap();
    for (size_t i = 0; i < streamed.tool_calls.size(); ++i)
        if (streamed.tool_calls[i].id != whole->tool_calls[i].id ||
            streamed.tool_calls[i].name != whole->tool_calls[i].name ||
            streamed.tool_calls[i].arguments != whole->tool_calls[i].arguments)
            __builtin_trap();
    return 0;
}
