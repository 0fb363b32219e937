// The Jinja engine against Python semantics: every case in python_semantics.json
// carries the output jinja2 gives (make_semantics_cases.py), and the bad-input
// cases must fail with an error naming the template line and construct.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferrox/template/chat_template.h"

using ferrox::ChatTemplate;
using Json = nlohmann::ordered_json;

namespace {

Json load_cases() {
    std::ifstream in(FERROX_TEMPLATE_CASES);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    return Json::parse(s.str());
}

std::string render(const std::string& source, const Json& ctx = Json::object()) {
    auto t = ChatTemplate::parse(source, "t.jinja");
    if (!t) FAIL(t.error().message());
    auto r = t->render(ctx);
    if (!r) FAIL(r.error().message());
    return *r;
}

// The error a template gives, parse or render; "" when it renders.
std::string error_of(const std::string& source, const Json& ctx = Json::object(),
                     ferrox::ChatTemplateLimits limits = {}) {
    auto t = ChatTemplate::parse(source, "bad.jinja");
    if (!t) return t.error().message();
    t->set_limits(limits);
    auto r = t->render(ctx);
    return r ? std::string() : r.error().message();
}

}  // namespace

TEST_CASE("templates render as jinja2 renders them (python_semantics.json)") {
    const Json cases = load_cases();
    REQUIRE(cases.size() >= 20);
    for (const auto& c : cases) {
        const std::string source = c["template"];
        INFO(source);
        CHECK(render(source, c["context"]) == c["expected"].get<std::string>());
    }
}

TEST_CASE("a file's key order is kept, as a Python dict keeps it") {
    const Json ctx = Json::parse(R"({"d": {"zeta": 1, "alpha": 2, "mid": {"y": 1, "b": 2}}})");
    CHECK(
        render("{{ d|tojson }} {{ d }}", ctx) ==
        R"({"zeta": 1, "alpha": 2, "mid": {"y": 1, "b": 2}} {'zeta': 1, 'alpha': 2, 'mid': {'y': 1, 'b': 2}})");
}

TEST_CASE("an unknown filter or test is refused at parse time with its line") {
    CHECK(error_of("line one\n{{ x|frobnicate }}") ==
          "bad.jinja:2: filter 'frobnicate': no filter named 'frobnicate'");
    CHECK(error_of("\n\n{% if x is shiny %}{% endif %}") ==
          "bad.jinja:3: test 'shiny': no test named 'shiny'");
}

TEST_CASE("raise_exception fails the render with the template's message and line") {
    const std::string src =
        "{% if messages|length == 0 %}\n{{ raise_exception('need a message') }}\n{% endif %}";
    CHECK(error_of(src, Json::parse(R"({"messages": []})")) ==
          "bad.jinja:2: call to 'raise_exception': raise_exception: need a message");
    CHECK(error_of(src, Json::parse(R"({"messages": [1]})")).empty());
}

TEST_CASE("an endless loop stops at the step budget") {
    ferrox::ChatTemplateLimits limits;
    limits.max_steps = 100000;
    const std::string err = error_of(
        "{% for i in range(100000) %}\n{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
        Json::object(), limits);
    CHECK_THAT(err, Catch::Contains("steps (an endless loop?)"));
    CHECK_THAT(err, Catch::StartsWith("bad.jinja:"));
}

TEST_CASE("runaway recursion stops at the call-depth budget") {
    const std::string err = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}");
    CHECK_THAT(err, Catch::Contains("call to 'f'"));
    CHECK_THAT(err, Catch::Contains("nested deeper than 100"));
}

TEST_CASE("deeply nested syntax is refused, not a stack overflow") {
    const std::string src = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
    CHECK_THAT(error_of(src), Catch::Contains("nesting deeper than"));
    const std::string lists = "{{ " + std::string(5000, '[') + " }}";
    CHECK_THAT(error_of(lists), Catch::Contains("bad.jinja:1:"));
}

TEST_CASE("values nested without bound through a namespace stop at the depth limit") {
    // Each iteration wraps the last value: 600 levels is past kMaxValueDepth
    // (512); printing or freeing such a value would recurse that deep.
    const std::string err = error_of(
        "{% set ns = namespace(x=0) %}\n{% for i in range(600) %}{% set ns.x = [ns.x] %}{% endfor "
        "%}"
        "{{ ns.x }}");
    CHECK_THAT(err, Catch::Contains("bad.jinja:2:"));
    CHECK_THAT(err, Catch::Contains("ns.x: the value nests deeper than 512 levels"));
    // Sharing is not nesting: 40 doublings of one value stay 40 deep, walked once each.
    CHECK(error_of("{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, "
                   "ns.x] %}{% endfor %}{{ ns.x|length }}")
              .empty());
}

TEST_CASE("huge outputs and ranges are refused") {
    CHECK_THAT(error_of("{{ 'x' * 1000000000 }}"), Catch::Contains("output limit"));
    CHECK_THAT(error_of("{% for i in range(1000000000) %}{% endfor %}"),
               Catch::Contains("MAX_RANGE"));
}

TEST_CASE("filters and methods that multiply a string's length stop at the output limit") {
    // Each would build far more than the 100 kB allowed here, most of it
    // before returning (a join of 2000 characters with a 1000-byte separator
    // is 2 MB; chained joins grow geometrically; found by fuzz_template).
    ferrox::ChatTemplateLimits limits;
    limits.max_output = 100000;
    for (const char* source : {
             "{{ ('ab' * 1000)|join('x' * 1000) }}",
             "{{ ('x' * 1000).join('ab' * 1000) }}",
             "{{ ('ab' * 1000)|replace('a', 'y' * 1000) }}",
             "{{ ('ab' * 1000).replace('', 'z' * 1000) }}",
             "{{ 'a'|center(1000000000000) }}",
             "{{ ('l\n' * 1000)|indent(1000) }}",
             "{{ 'a'|indent(1000000000000, true) }}",
             "{{ '%s%s%s'|format('q' * 40000, 'q' * 40000, 'q' * 40000) }}",
             "{{ '{}{}{}'.format('q' * 40000, 'q' * 40000, 'q' * 40000) }}",
         }) {
        INFO(source);
        CHECK_THAT(error_of(source, Json::object(), limits), Catch::Contains("output limit"));
    }
    // tojson's indent is clamped to 64, but 60 nested lists still indent 3840 deep.
    const std::string nested =
        "{% set ns = namespace(x=1) %}{% for i in range(60) %}{% set ns.x = [ns.x] %}{% endfor "
        "%}{{ ns.x|tojson(indent=64) }}";
    CHECK_THAT(error_of(nested, Json::object(), limits), Catch::Contains("output limit"));
    // Under the limit the same filters still work.
    CHECK(error_of("{{ ('ab' * 10)|join('x' * 10) }}", Json::object(), limits).empty());
}

TEST_CASE("a string is cut into at most 2^20 characters, parts or lines") {
    // A list element is a ~100-byte value: 2^21 characters would take 200 MB.
    const std::string err = error_of("{{ ('a' * 2097152)|list|length }}");
    CHECK_THAT(err, Catch::Contains("more than 1048576 pieces"));
    CHECK_THAT(error_of("{{ (',' * 2097152).split(',')|length }}"),
               Catch::Contains("more than 1048576 pieces"));
    CHECK(error_of("{{ ('a' * 1000)|list|length }}").empty());
}

TEST_CASE("syntax errors and unsupported tags name line and construct") {
    CHECK(error_of("a\n{% if x %}unclosed") ==
          "bad.jinja:2: if: missing '{% endif %}' (reached the end of the template)");
    CHECK(error_of("{{ 'open") == "bad.jinja:1: string: unterminated string literal");
    CHECK(error_of("x\ny\n{% include 'other.jinja' %}") ==
          "bad.jinja:3: tag 'include': unknown or unsupported tag 'include'");
    CHECK(error_of("{{ x }") == "bad.jinja:1: expression: unclosed tag: no '}}'");
    CHECK(error_of("{% endfor %}").find("bad.jinja:1:") == 0);
}

TEST_CASE("using undefined values the way Python refuses them is an error") {
    CHECK(error_of("{{ x.y.z }}", Json::parse(R"({"x": {}})")) ==
          "bad.jinja:1: attribute 'z': 'dict object' has no attribute 'y'");
    CHECK(error_of("{{ missing.attr }}") ==
          "bad.jinja:1: attribute 'attr': 'missing' is undefined");
    CHECK(error_of("{{ 1 + 'a' }}") ==
          "bad.jinja:1: operator '+': unsupported operand type(s) for +: 'int' and 'str'");
    CHECK_THAT(error_of("{% set x = [] %}{{ x.append(1) }}"), Catch::Contains("unsafe"));
}

TEST_CASE("every built-in template parses and renders a conversation") {
    const Json messages =
        Json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])");
    for (const auto& b : ferrox::builtin_chat_templates()) {
        INFO(b.name);
        auto t = ChatTemplate::parse(std::string(b.source), "builtin");
        REQUIRE(t);
        auto r = t->render(ferrox::chat_context(messages, true, "<s>", "</s>"));
        REQUIRE(r);
        CHECK(r->find('U') != std::string::npos);
    }
    auto chatml =
        ChatTemplate::parse(std::string(ferrox::find_builtin_chat_template("chatml")->source), "b");
    CHECK(
        *chatml->render(ferrox::chat_context(messages, true, "", "")) ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    auto gemma =
        ChatTemplate::parse(std::string(ferrox::find_builtin_chat_template("gemma")->source), "b");
    CHECK(*gemma->render(ferrox::chat_context(messages, true, "", "")) ==
          "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n");
    CHECK(ferrox::builtin_chat_template_for_arch("qwen3")->name == "chatml");
    CHECK(ferrox::builtin_chat_template_for_arch("nope") == nullptr);
}

namespace {

// The bytes of a render that are marked as client text, as "[...]" around them.
std::string marked(const std::string& source, const Json& ctx) {
    auto t = ChatTemplate::parse(source, "t.jinja");
    if (!t) FAIL(t.error().message());
    static const std::string_view trusted[] = {"bos_token"};
    auto r = t->render_marked(ctx, trusted);
    if (!r) FAIL(r.error().message());
    std::string out;
    size_t at = 0;
    for (const auto& range : r->client) {
        REQUIRE(range.begin >= at);
        REQUIRE(range.end <= r->text.size());
        out += r->text.substr(at, range.begin - at) + "[" +
               r->text.substr(range.begin, range.end - range.begin) + "]";
        at = range.end;
    }
    return out + r->text.substr(at);
}

}  // namespace

TEST_CASE(
    "client text is marked where the engine writes it, through concatenation, joins, "
    "trims, macros and block sets") {
    const Json ctx = Json::parse(R"({"bos_token": "<s>", "messages": [
        {"role": "user", "content": "<T>", "name": "n<T>"},
        {"role": "assistant", "content": "  pad  "}]})");
    // The template writes "<T>" before the content; the content "<T>" is marked, not the literal.
    CHECK(
        marked("{{ bos_token }}<T>{% for m in messages %}{{ '<T>' + m.content + '|' }}{% endfor %}",
               ctx) == "<s><T><T>[<T>]|<T>[  pad  ]|");
    CHECK(marked("{{ '<A>' ~ messages[0].name ~ '<B>' }}", ctx) == "<A>[n<T>]<B>");
    CHECK(marked("{{ ['<A>', messages[0].content, '<B>']|join('/') }}", ctx) == "<A>/[<T>]/<B>");
    CHECK(marked("{{ ('<A>' + messages[1].content)|trim }}", ctx) == "<A>[  pad]");
    CHECK(marked("{% macro m(x) %}<M>{{ x }}</M>{% endmacro %}{{ m(messages[0].content) }}", ctx) ==
          "<M>[<T>]</M>");
    CHECK(marked("{% set s %}<S>{{ messages[0].role }}{% endset %}{{ s }}", ctx) == "<S>[user]");
    // What a builtin computes from client text is client text as a whole.
    CHECK(marked("{{ messages[0].content|upper }}|{{ messages[0].content[1:] }}", ctx) ==
          "[<T>]|[T>]");
    CHECK(marked("{{ messages|length }}{{ messages[0].content.replace('T', '<T>') }}", ctx) ==
          "[2<<T>>]");  // adjacent client bytes make one range
    CHECK(marked("{% for c in messages[0].content %}{{ c }}{% endfor %}", ctx) == "[<T>]");
    // Keys of client dicts are client text too; the template's own text never is.
    CHECK(marked("{% for k in messages[0] %}<{{ k }}>{% endfor %}", ctx) ==
          "<[role]><[content]><[name]>");
}

TEST_CASE("builtins are charged the work they do against the step budget") {
    ferrox::ChatTemplateLimits limits;
    limits.max_steps = 1'000'000;
    // 3000 distinct values: about 4.5 million comparisons in one filter call.
    const std::string err =
        error_of("\n{{ range(3000)|list|unique|list|length }}", Json::object(), limits);
    CHECK_THAT(err, Catch::Contains("bad.jinja:2:"));
    CHECK_THAT(err, Catch::Contains("max_steps 1000000"));
    CHECK(error_of("{{ range(300)|list|unique|list|length }}", Json::object(), limits).empty());
}

TEST_CASE("the memory budget counts every string and list a render builds") {
    ferrox::ChatTemplateLimits limits;
    limits.max_memory = 64u << 20;
    // Each string is 1 MiB, well under max_output; 100 of them are not.
    const std::string err = error_of(
        "{% set s = 'x' * 1048576 %}\n{% for i in range(100) %}{% set t = s ~ i %}{% endfor %}",
        Json::object(), limits);
    CHECK_THAT(err, Catch::Contains("bad.jinja:2:"));
    CHECK_THAT(err, Catch::Contains("max_memory 67108864"));
    // Reading a variable shares its string: a read loop allocates nothing new.
    CHECK(error_of("{% set s = 'x' * 1048576 %}{% for i in range(1000) %}{% set t = s %}"
                   "{% set u = [t, s] %}{% endfor %}",
                   Json::object(), limits)
              .empty());
}

TEST_CASE("a template source over 4 MiB is refused before it is read") {
    auto t = ChatTemplate::parse(std::string(ferrox::kMaxChatTemplateSource + 1, 'x'), "big.jinja");
    REQUIRE_FALSE(t);
    CHECK_THAT(t.error().message(), Catch::Contains("big.jinja: the template is 4194305 bytes"));
    CHECK(ChatTemplate::parse(std::string(ferrox::kMaxChatTemplateSource, 'x'), "ok.jinja"));
}
