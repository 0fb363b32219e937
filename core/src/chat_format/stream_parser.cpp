#include "ferrox/chat_format/stream_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "call_text.h"
#include "ferrox/seeded_hash.h"

namespace ferrox {
namespace {

namespace cf = chat_format;
using std::string_view;
constexpr size_t npos = string_view::npos;

enum class Mode { Content, Reasoning, TaggedCall, JsonCall, HarmonyHeader };

// What a marker met in content does.
enum class Action {
    TaggedCall,     // a call up to the family's closing marker
    PythonTag,      // Llama 3: a call up to <|eom_id|> or the end
    JsonCall,       // a JSON call (or list of calls) right after the marker
    MistralCall,    // [TOOL_CALLS]: a JSON list, or NAME[ARGS] and a JSON object
    HarmonyHeader,  // a harmony message header up to <|message|>
    Drop,           // a marker that carries nothing (harmony's message ends)
};

struct Marker {
    string_view text;
    Action action;
};

struct Closer {
    string_view text;
    bool consumed;  // false: the marker also starts what follows (harmony's <|start|>)
};

constexpr Marker kToolCallTagMarkers[] = {{"<tool_call>", Action::TaggedCall}};
constexpr Marker kLlama3Markers[] = {{"<|python_tag|>", Action::PythonTag}};
constexpr Marker kMistralMarkers[] = {{"[TOOL_CALLS]", Action::MistralCall}};
constexpr Marker kDeepSeekMarkers[] = {{"<｜tool▁calls▁begin｜>", Action::TaggedCall}};
constexpr Marker kGraniteMarkers[] = {{"<|tool_call|>", Action::JsonCall},
                                      {"<response>", Action::Drop},
                                      {"</response>", Action::Drop}};
constexpr Marker kFunctoolsMarkers[] = {{"functools", Action::JsonCall}};
constexpr Marker kHarmonyMarkers[] = {
    {"<|channel|>", Action::HarmonyHeader},
    {"<|start|>", Action::HarmonyHeader},
    {"<|end|>", Action::Drop},
    {"<|return|>", Action::Drop},
    {"<|call|>", Action::Drop},
    {"<|message|>", Action::Drop},
    {"<|constrain|>", Action::Drop},
};

constexpr Closer kToolCallEnd[] = {{"</tool_call>", true}};
constexpr Closer kDeepSeekEnd[] = {{"<｜tool▁calls▁end｜>", true}};
constexpr Closer kPythonTagEnd[] = {{"<|eom_id|>", true}, {"<|eot_id|>", true}};
constexpr Closer kHarmonyEnd[] = {{"<|call|>", true},
                                  {"<|end|>", true},
                                  {"<|return|>", true},
                                  {"<|start|>", false},
                                  {"<|channel|>", false}};

std::span<const Marker> content_markers(ChatFamily family) {
    switch (family) {
        case ChatFamily::Hermes:
        case ChatFamily::Qwen3Coder:
        case ChatFamily::Glm:
        case ChatFamily::SmolLM3:
            return kToolCallTagMarkers;
        case ChatFamily::Llama3:
            return kLlama3Markers;
        case ChatFamily::Mistral:
            return kMistralMarkers;
        case ChatFamily::DeepSeek:
            return kDeepSeekMarkers;
        case ChatFamily::Granite:
            return kGraniteMarkers;
        case ChatFamily::Functools:
            return kFunctoolsMarkers;
        case ChatFamily::Harmony:
            return kHarmonyMarkers;
        case ChatFamily::Generic:
        case ChatFamily::ThinkOnly:
            break;
    }
    return {};
}

bool is_call(Action a) { return a != Action::Drop; }

// Where a harmony header (the text between <|start|> or <|channel|> and
// <|message|>) may end at the latest: "assistant<|channel|>commentary
// to=functions.NAME <|constrain|>json" is far shorter.
constexpr size_t kMaxHarmonyHeader = 1024;
constexpr size_t kMaxMistralName = 256;

// The longest suffix of `text` that is a proper prefix of some marker: it
// may become that marker once more text comes, so it is held back.
template <class Range>
size_t partial_suffix(string_view text, const Range& markers) {
    size_t longest = 0;
    for (const auto& m : markers) {
        if (m.text.empty()) continue;
        const size_t most = std::min(text.size(), m.text.size() - 1);
        for (size_t n = most; n > longest; --n)
            if (m.text.starts_with(text.substr(text.size() - n))) {
                longest = n;
                break;
            }
    }
    return longest;
}

// The first marker in `text` and where it starts (the longest when several
// start there), in one pass: a long text costs its length, not its length
// times the markers.
template <class Range>
auto first_marker(string_view text, const Range& markers) {
    using M = typename Range::value_type;
    for (size_t i = 0; i < text.size(); ++i) {
        const M* best = nullptr;
        for (const M& m : markers)
            if (!m.text.empty() && text[i] == m.text.front() &&
                text.substr(i).starts_with(m.text) && (!best || m.text.size() > best->text.size()))
                best = &m;
        if (best) return std::pair<size_t, const M*>{i, best};
    }
    return std::pair<size_t, const M*>{npos, nullptr};
}

// The text not yet turned into events: a string read from `head_`, so that
// consuming from the front costs nothing; the consumed part is reclaimed when
// it is at least half of the string (amortised O(1) per byte).
class Pending {
  public:
    operator string_view() const { return string_view(text_).substr(head_); }
    size_t size() const { return text_.size() - head_; }
    bool empty() const { return size() == 0; }
    char operator[](size_t i) const { return text_[head_ + i]; }
    char front() const { return text_[head_]; }
    bool starts_with(string_view s) const { return string_view(*this).starts_with(s); }
    string_view substr(size_t pos, size_t n = npos) const {
        return string_view(*this).substr(pos, n);
    }
    void drop(size_t n) { head_ += std::min(n, size()); }
    void clear() { head_ = text_.size(); }
    void append(string_view more) {
        if (head_ > 0 && head_ >= text_.size() / 2) {
            text_.erase(0, head_);
            head_ = 0;
        }
        text_.append(more);
    }

  private:
    std::string text_;
    size_t head_ = 0;
};

size_t first_non_blank(string_view s) {
    for (size_t i = 0; i < s.size(); ++i)
        if (!cf::is_blank(s[i])) return i;
    return npos;
}

bool mistral_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

}  // namespace

struct ChatStreamParser::State {
    ChatFamily family;
    ChatParseOptions options;
    std::span<const Marker> markers;
    Pending buf;  // text not yet turned into events
    Mode mode = Mode::Content;
    bool at_start = true;     // nothing sent yet: reasoning may open (or a Llama 3 JSON call)
    bool trim = true;         // blanks before the next content are dropped
    bool after_call = false;  // blanks are dropped if a call or the end follows
    size_t total = 0, calls = 0;
    bool finished = false, failed = false;

    // The call (or harmony header) being read: its opening text, verbatim,
    // for when it turns out not to be a call.
    std::string opener;
    Action call = Action::TaggedCall;
    std::span<const Closer> closers;
    size_t scanned = 0;  // bytes of buf searched for a closer already
    cf::JsonExtent extent;
    bool mistral_head = false;  // [TOOL_CALLS]'s NAME[ARGS] not read yet
    size_t json_from = 0;       // where the JSON starts in buf
    std::string call_name;      // named by the header (harmony, Mistral NAME[ARGS])

    State(ChatFamily f, ChatParseOptions o)
        : family(f), options(std::move(o)), markers(content_markers(f)) {
        if (options.starts_in_reasoning && !family_info(f).reasoning_end.empty()) {
            mode = Mode::Reasoning;
            at_start = false;
        }
    }

    void send(std::vector<ChatEvent>& out, ChatEvent::Kind kind, string_view text) {
        if (text.empty()) return;
        out.push_back({kind, std::string(text), 0, {}, {}});
        at_start = false;
    }

    // The call's text failed to parse (or crossed a bound): it is content.
    void not_a_call(std::vector<ChatEvent>& out, size_t consumed) {
        send(out, ChatEvent::Kind::Content, opener);
        send(out, ChatEvent::Kind::Content, string_view(buf).substr(0, consumed));
        buf.drop(consumed);
        mode = Mode::Content;
    }

    // Calls parsed from `consumed` bytes of buf: sent, or content when they
    // did not parse or would pass limits.max_calls.
    void calls_read(std::vector<ChatEvent>& out, const std::optional<cf::Calls>& parsed,
                    size_t consumed) {
        if (!parsed || parsed->empty() || calls + parsed->size() > options.limits.max_calls) {
            not_a_call(out, consumed);
            return;
        }
        for (const cf::CallText& c : *parsed) {
            const size_t index = calls++;
            const SipKey key = {options.id_seed, index};
            const uint64_t hash = siphash24(key, c.name + '\0' + c.arguments);
            ChatEvent start{ChatEvent::Kind::ToolCallStart,
                            {},
                            index,
                            fmt::format("call_{:016x}", hash),
                            c.name};
            out.push_back(std::move(start));
            out.push_back({ChatEvent::Kind::ToolCallArguments, c.arguments, index, {}, {}});
        }
        at_start = false;
        buf.drop(consumed);
        mode = Mode::Content;
        after_call = true;
    }

    void begin(const Marker& m) {
        opener = std::string(m.text);
        call = m.action;
        at_start = false;
        scanned = 0;
        extent = {};
        json_from = 0;
        call_name.clear();
        mistral_head = m.action == Action::MistralCall;
        switch (m.action) {
            case Action::TaggedCall:
                closers = family == ChatFamily::DeepSeek ? std::span<const Closer>(kDeepSeekEnd)
                                                         : std::span<const Closer>(kToolCallEnd);
                mode = Mode::TaggedCall;
                break;
            case Action::PythonTag:
                closers = kPythonTagEnd;
                mode = Mode::TaggedCall;
                break;
            case Action::JsonCall:
            case Action::MistralCall:
                mode = Mode::JsonCall;
                break;
            case Action::HarmonyHeader:
                mode = Mode::HarmonyHeader;
                break;
            case Action::Drop:
                break;
        }
    }

    // One step; false when nothing more can happen until more text comes.
    bool step(bool at_end, std::vector<ChatEvent>& out) {
        switch (mode) {
            case Mode::Content:
                return content(at_end, out);
            case Mode::Reasoning:
                return reasoning(at_end, out);
            case Mode::TaggedCall:
                return tagged_call(at_end, out);
            case Mode::JsonCall:
                return json_call(at_end, out);
            case Mode::HarmonyHeader:
                return harmony_header(at_end, out);
        }
        return false;
    }

    bool content(bool at_end, std::vector<ChatEvent>& out) {
        if (buf.empty()) return false;
        if (trim) {
            const size_t k = first_non_blank(buf);
            buf.drop(k);
            if (buf.empty()) return false;
            trim = false;
        }
        if (at_start) {
            const string_view opening = family_info(family).reasoning_start;
            if (!opening.empty() && family != ChatFamily::Harmony) {
                if (buf.starts_with(opening)) {
                    buf.drop(opening.size());
                    mode = Mode::Reasoning;
                    at_start = false;
                    return true;
                }
                if (opening.starts_with(buf) && !at_end) return false;
            }
            if (family == ChatFamily::Llama3 && buf.front() == '{') {
                begin({"", Action::JsonCall});
                return true;
            }
            at_start = false;
        }
        if (after_call) {
            // Llama 3 separates its JSON calls with ';'.
            size_t k = 0;
            while (k < buf.size() &&
                   (cf::is_blank(buf[k]) || (family == ChatFamily::Llama3 && buf[k] == ';')))
                ++k;
            if (k == buf.size()) k = npos;
            if (k == npos) {
                if (at_end) buf.clear();
                return false;
            }
            const string_view rest = string_view(buf).substr(k);
            bool call_follows = family == ChatFamily::Llama3 && rest.front() == '{';
            for (const Marker& m : markers) {
                if (!is_call(m.action)) continue;
                if (rest.starts_with(m.text)) call_follows = true;
                if (m.text.size() > rest.size() && m.text.starts_with(rest) && !at_end)
                    return false;
            }
            after_call = false;
            if (call_follows) {
                buf.drop(k);
                if (family == ChatFamily::Llama3 && buf.front() == '{') {
                    begin({"", Action::JsonCall});
                    return true;
                }
            }
        }
        const auto [at, found] = first_marker(buf, markers);
        if (found) {
            send(out, ChatEvent::Kind::Content, string_view(buf).substr(0, at));
            buf.drop(at + found->text.size());
            if (found->action != Action::Drop) begin(*found);
            return true;
        }
        const size_t hold = at_end ? 0 : partial_suffix(buf, markers);
        send(out, ChatEvent::Kind::Content, string_view(buf).substr(0, buf.size() - hold));
        buf.drop(buf.size() - hold);
        return false;
    }

    bool reasoning(bool at_end, std::vector<ChatEvent>& out) {
        if (buf.empty()) return false;
        // Harmony's analysis message ends where the next one begins; the
        // content step then reads that marker.
        const Closer think{family_info(family).reasoning_end, true};
        const std::span<const Closer> ends = family == ChatFamily::Harmony
                                                 ? std::span<const Closer>(kHarmonyEnd)
                                                 : std::span<const Closer>(&think, 1);
        const auto [at, found] = first_marker(buf, ends);
        if (found) {
            send(out, ChatEvent::Kind::Reasoning, string_view(buf).substr(0, at));
            buf.drop(at + (found->consumed ? found->text.size() : 0));
            mode = Mode::Content;
            trim = true;
            return true;
        }
        const size_t hold = at_end ? 0 : partial_suffix(buf, ends);
        send(out, ChatEvent::Kind::Reasoning, string_view(buf).substr(0, buf.size() - hold));
        buf.drop(buf.size() - hold);
        return false;
    }

    std::optional<cf::Calls> parse_tagged(string_view body) const {
        const int depth = options.limits.max_json_depth;
        const auto one = [](std::optional<cf::CallText> c) -> std::optional<cf::Calls> {
            if (!c) return std::nullopt;
            return cf::Calls{std::move(*c)};
        };
        if (call == Action::PythonTag) return cf::python_tag_calls(body, depth);
        switch (family) {
            case ChatFamily::Qwen3Coder:
                return one(cf::xml_function_call(body, depth, options.text_parameters));
            case ChatFamily::Glm:
                return one(cf::arg_key_call(body, depth, options.text_parameters));
            case ChatFamily::DeepSeek:
                return cf::deepseek_calls(body, depth);
            case ChatFamily::Harmony:
                return one(cf::named_json_call(call_name, body, depth));
            default:
                return cf::json_calls(body, false, depth);
        }
    }

    bool tagged_call(bool at_end, std::vector<ChatEvent>& out) {
        size_t longest = 0;
        for (const Closer& c : closers) longest = std::max(longest, c.text.size());
        // Only the first max_call_bytes (and a closer) are searched, so where
        // a long call is cut never depends on how the text arrived.
        const size_t window = std::min(buf.size(), options.limits.max_call_bytes + longest);
        const string_view view = string_view(buf).substr(0, window);
        const size_t from = scanned >= longest ? scanned - longest + 1 : 0;
        size_t at = npos;
        const Closer* found = nullptr;
        for (const Closer& c : closers) {
            const size_t p = view.find(c.text, from);
            if (p < at) {
                at = p;
                found = &c;
            }
        }
        if (found && at <= options.limits.max_call_bytes) {
            const size_t consumed = at + (found->consumed ? found->text.size() : 0);
            calls_read(out, parse_tagged(view.substr(0, at)), consumed);
            return true;
        }
        if (window == options.limits.max_call_bytes + longest || found) {
            not_a_call(out, options.limits.max_call_bytes);
            return true;
        }
        scanned = buf.size();
        if (!at_end) return false;
        // The answer ended inside the call (its closer may have been a stop token).
        calls_read(out, parse_tagged(buf), buf.size());
        return true;
    }

    bool json_call(bool at_end, std::vector<ChatEvent>& out) {
        if (mistral_head) {
            const size_t k = first_non_blank(buf);
            if (k == npos) {
                if (!at_end) return false;
                not_a_call(out, buf.size());
                return true;
            }
            if (buf[k] != '[' && buf[k] != '{') {
                size_t j = k;
                while (j < buf.size() && j - k <= kMaxMistralName && mistral_name_char(buf[j])) ++j;
                if (j - k > kMaxMistralName || j == k) {
                    not_a_call(out, 0);
                    return true;
                }
                if (j == buf.size()) {
                    if (!at_end) return false;
                    not_a_call(out, buf.size());
                    return true;
                }
                const string_view rest = string_view(buf).substr(j);
                constexpr string_view kArgs = "[ARGS]";
                if (!rest.starts_with(kArgs)) {
                    if (kArgs.starts_with(rest) && !at_end) return false;
                    not_a_call(out, 0);
                    return true;
                }
                call_name = buf.substr(k, j - k);
                json_from = j + kArgs.size();
            }
            mistral_head = false;
        }
        const size_t cap = options.limits.max_call_bytes;
        const string_view json = string_view(buf).substr(json_from, cap);
        switch (extent.scan(json, options.limits.max_json_depth)) {
            case cf::JsonExtent::Result::Done: {
                const size_t end = json_from + extent.end();
                const string_view text = string_view(buf).substr(json_from, extent.end());
                const int depth = options.limits.max_json_depth;
                std::optional<cf::Calls> parsed;
                if (!call_name.empty()) {
                    auto c = cf::named_json_call(call_name, text, depth);
                    if (c) parsed = cf::Calls{std::move(*c)};
                } else {
                    parsed = cf::json_calls(text, family != ChatFamily::Llama3, depth);
                }
                calls_read(out, parsed, end);
                return true;
            }
            case cf::JsonExtent::Result::Invalid:
                not_a_call(out, json_from + extent.end());
                return true;
            case cf::JsonExtent::Result::NeedMore:
                break;
        }
        if (json.size() == cap) {
            not_a_call(out, json_from + cap);
            return true;
        }
        if (!at_end) return false;
        not_a_call(out, buf.size());
        return true;
    }

    bool harmony_header(bool at_end, std::vector<ChatEvent>& out) {
        constexpr string_view kMessage = "<|message|>";
        const string_view view =
            string_view(buf).substr(0, std::min(buf.size(), kMaxHarmonyHeader + kMessage.size()));
        const size_t at = view.find(kMessage);
        if (at == npos) {
            if (view.size() == kMaxHarmonyHeader + kMessage.size() || at_end) {
                not_a_call(out, view.size());
                return true;
            }
            return false;
        }
        const std::string header(buf.substr(0, at));
        constexpr string_view kTo = "to=functions.";
        const size_t to = header.find(kTo);
        if (to != npos) {
            size_t end = to + kTo.size();
            while (end < header.size() && !cf::is_blank(header[end]) && header[end] != '<') ++end;
            call_name = header.substr(to + kTo.size(), end - to - kTo.size());
        }
        if (!call_name.empty()) {
            opener += buf.substr(0, at + kMessage.size());
            buf.drop(at + kMessage.size());
            closers = kHarmonyEnd;
            scanned = 0;
            mode = Mode::TaggedCall;
            return true;
        }
        buf.drop(at + kMessage.size());
        mode = header.find("analysis") != npos ? Mode::Reasoning : Mode::Content;
        trim = true;
        return true;
    }

    void run(bool at_end, std::vector<ChatEvent>& out) {
        // Every step consumes text or changes mode, and no mode is left without
        // consuming; the bound only guards against a mistake in that.
        size_t budget = 8 * (buf.size() + 8);
        while (budget-- > 0 && step(at_end, out)) {
        }
    }
};

ChatStreamParser::ChatStreamParser(ChatFamily family, ChatParseOptions options)
    : state_(std::make_unique<State>(family, std::move(options))) {}
ChatStreamParser::~ChatStreamParser() = default;
ChatStreamParser::ChatStreamParser(ChatStreamParser&&) noexcept = default;
ChatStreamParser& ChatStreamParser::operator=(ChatStreamParser&&) noexcept = default;

Expected<void> ChatStreamParser::feed(string_view delta, std::vector<ChatEvent>& out) {
    State& s = *state_;
    if (s.finished) return make_error("chat parser: text after the answer finished");
    if (s.failed) return make_error("chat parser: the answer already passed its bound");
    if (delta.size() > s.options.limits.max_text - s.total) {
        s.failed = true;
        return make_error("chat parser: the answer passes {} bytes (ChatParseLimits::max_text)",
                          s.options.limits.max_text);
    }
    s.total += delta.size();
    s.buf.append(delta);
    s.run(false, out);
    return {};
}

Expected<void> ChatStreamParser::finish(std::vector<ChatEvent>& out) {
    State& s = *state_;
    if (s.finished) return make_error("chat parser: finish() called twice");
    if (s.failed) return make_error("chat parser: the answer already passed its bound");
    s.finished = true;
    s.run(true, out);
    return {};
}

void apply_chat_event(ParsedAnswer& answer, const ChatEvent& event) {
    switch (event.kind) {
        case ChatEvent::Kind::Content:
            answer.content += event.text;
            break;
        case ChatEvent::Kind::Reasoning:
            answer.reasoning += event.text;
            break;
        case ChatEvent::Kind::ToolCallStart:
            answer.tool_calls.push_back({event.id, event.name, {}});
            break;
        case ChatEvent::Kind::ToolCallArguments:
            if (!answer.tool_calls.empty()) answer.tool_calls.back().arguments += event.text;
            break;
    }
}

Expected<ParsedAnswer> parse_answer(ChatFamily family, string_view text,
                                    const ChatParseOptions& options) {
    if (text.size() > options.limits.max_text)
        return make_error("chat answer: {} bytes; at most {} (ChatParseLimits::max_text)",
                          text.size(), options.limits.max_text);
    ChatStreamParser parser(family, options);
    std::vector<ChatEvent> events;
    if (auto fed = parser.feed(text, events); !fed) return fed.error();
    if (auto done = parser.finish(events); !done) return done.error();
    ParsedAnswer answer;
    for (const ChatEvent& e : events) apply_chat_event(answer, e);
    return answer;
}

}  // namespace ferrox
