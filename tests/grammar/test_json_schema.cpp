// JSON schema -> grammar: each supported keyword through the matcher
// (texts accepted and refused), every refusal naming its JSON pointer, and
// the integer/number bounds against arithmetic on random values. Validation
// against the `jsonschema` package is test_json_schema_conformance.py.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ferrox/grammar/json_schema.h"
#include "ferrox/grammar/matcher.h"

using namespace ferrox;
using namespace ferrox::grammar;
using nlohmann::ordered_json;

namespace {

std::shared_ptr<const Grammar> compiled(const std::string& schema, const JsonSchemaLimits& l = {}) {
    INFO(schema);
    auto g = compile_json_schema(ordered_json::parse(schema), l);
    if (!g) FAIL(g.error().message());
    return *g;
}

std::string refusal(const std::string& schema, const JsonSchemaLimits& l = {}) {
    INFO(schema);
    auto g = compile_json_schema(ordered_json::parse(schema), l);
    REQUIRE_FALSE(g);
    return g.error().message();
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarMatcher m(
        g, std::make_shared<const TokenTrie>(std::vector<std::string>{}, std::vector<bool>{}));
    return m.accept_bytes(text) && m.complete();
}

void check(const std::string& schema, const std::vector<std::string>& good,
           const std::vector<std::string>& bad) {
    const auto g = compiled(schema);
    INFO(schema);
    for (const auto& t : good) {
        INFO("should accept: " << t);
        CHECK(accepts(g, t));
    }
    for (const auto& t : bad) {
        INFO("should refuse: " << t);
        CHECK_FALSE(accepts(g, t));
    }
}

uint64_t seed() {
    const char* s = std::getenv("FERROX_TEST_SEED");
    return s ? std::strtoull(s, nullptr, 10) : 0x15c4e3a;
}

}  // namespace

TEST_CASE("scalar types, and a list of types") {
    check(R"({"type":"string"})",
          {R"("")", R"("a b")", R"("\"\\\n\u00e9")", "\"\xc3\xa9\"", "\"\xf0\x9f\x98\x80\""},
          {R"(a)", R"("\x")", "\"\n\"", R"("\ud800")", "1",
           // Not UTF-8: a surrogate, lead bytes F5..FF (the client would get U+FFFD for each byte).
           "\"\xed\xa0\x80\"", "\"\xf8\x9f\xbf\xbf\"", "\"\xf5\x80\x80\x80\"",
           "\"\xff\x80\x80\x80\""});
    check(R"({"type":"integer"})", {"0", "-7", "123456789012345678"},
          {"01", "1.5", "1e3", "-", "1234567890123456789", "\"1\""});
    check(R"({"type":"number"})", {"0", "-0.25", "3.5e10", "1E-2"}, {".5", "1.", "01", "1e"});
    check(R"({"type":"boolean"})", {"true", "false"}, {"null", "True"});
    check(R"({"type":"null"})", {"null"}, {"false"});
    check(R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"});
    check(R"({})", {"1", R"({"a":[true,null]})", R"("s")"}, {"", "nul"});
}

TEST_CASE("properties come in schema order, required ones always, optional ones may") {
    // b before a: the order of the schema, not the alphabet.
    const std::string schema = R"({"type":"object","properties":{
        "b":{"type":"integer"},"a":{"type":"string"},"c":{"type":"boolean"}},
        "required":["a"]})";
    check(schema,
          {R"({"a":"x"})", R"({"b":1,"a":"x"})", R"({"a":"x","c":true})",
           R"({"b":1,"a":"x","c":false})", R"({ "a" : "x" })"},
          {R"({})", R"({"b":1})", R"({"a":"x","b":1})", R"({"a":1})", R"({"a":"x",})",
           R"({"a":"x","d":1})", R"({,"a":"x"})"});
}

TEST_CASE("all optional properties: the commas still come out right") {
    check(
        R"({"properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
        {"{}", R"({"c":3})", R"({"a":1,"c":3})", R"({"b":2})", R"({"a":1,"b":2,"c":3})"},
        {R"({,})", R"({"a":1,})", R"({"a":1"b":2})", R"({"c":3,"a":1})"});
}

TEST_CASE("additionalProperties: false, true, a schema, and extra keys never repeat a listed one") {
    check(R"({"properties":{"a":{"type":"integer"}},"additionalProperties":false})",
          {R"({"a":1})", "{}"}, {R"({"b":1})"});
    check(R"({"properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
          {R"({"a":1,"b":"x"})", R"({"ab":"x"})", R"({"":"x"})", R"({"a":1,"b":"x","c":"y"})"},
          {R"({"a":1,"a":"x"})", R"({"a":"x"})", R"({"a":1,"b":2})", R"({"\u0061":"x"})"});
    check(R"({"type":"object"})", {"{}", R"({"k":[1,{"x":null}]})"}, {"[]"});
    // Required but not listed: it must come, with additionalProperties' schema.
    check(R"({"required":["id"],"additionalProperties":{"type":"integer"}})", {R"({"id":4})"},
          {"{}", R"({"id":"4"})"});
}

TEST_CASE("arrays: items, minItems and maxItems, prefixItems") {
    check(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
          {"[1]", "[1,2]", "[ 1 , 2 , 3 ]"}, {"[]", "[1,2,3,4]", R"(["a"])", "[1,]"});
    check(R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1,2,3,4,5,6,7]"}, {"[,]"});
    check(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
    check(R"({"prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})", {R"(["a",1])"},
          {R"(["a"])", R"(["a",1,2])", R"([1,"a"])"});
    check(R"({"prefixItems":[{"type":"string"}],"items":{"type":"null"},"maxItems":3})",
          {R"(["a"])", R"(["a",null,null])"}, {R"(["a",null,null,null])", R"(["a",1])"});
}

TEST_CASE("enum and const, filtered by a type beside them") {
    check(R"({"enum":["red","green",3,null,{"k":[1]}]})", {R"("red")", "3", "null", R"({"k":[1]})"},
          {R"("blue")", R"({"k": [1]})"});
    check(R"({"const":"x"})", {R"("x")"}, {R"("y")"});
    check(R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"});
    CHECK_THAT(refusal(R"({"type":"integer","enum":["a"]})"),
               Catch::Contains("/enum: no value has the schema's type"));
}

TEST_CASE("anyOf, and oneOf when its branches cannot overlap") {
    check(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"5", R"("a")"},
          {R"("ab")", "true"});
    check(R"({"oneOf":[{"type":"integer"},{"type":"string"}]})", {"5", R"("a")"}, {"null"});
    check(R"({"oneOf":[
        {"properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"]},
        {"properties":{"kind":{"const":"b"},"y":{"type":"integer"}},"required":["kind","y"]}]})",
          {R"({"kind":"a","x":1})", R"({"kind":"b","y":2})"}, {R"({"kind":"a","y":1})"});
    CHECK_THAT(refusal(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})"),
               Catch::Contains("/oneOf: branches 0 and 1 may both match"));
    check(R"({"allOf":[{"type":"integer"}],"title":"t"})", {"1"}, {"\"1\""});
}

TEST_CASE("local references to definitions, recursion included") {
    const std::string tree = R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
        "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
        "required":["v"],"additionalProperties":false}}})";
    check(tree, {R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"},
          {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"});
    check(
        R"({"definitions":{"n":{"type":"null"}},"properties":{"a":{"$ref":"#/definitions/n"}},"required":["a"]})",
        {R"({"a":null})"}, {R"({"a":1})"});
    CHECK_THAT(refusal(R"({"$ref":"#/$defs/missing"})"),
               Catch::Contains("/$ref: '#/$defs/missing' points at nothing"));
    CHECK_THAT(refusal(R"({"$ref":"https://example.com/s.json"})"),
               Catch::Contains("/$ref: 'https://example.com/s.json': only references inside"));
    // Recursion that consumes nothing is left recursion: refused by the GBNF check.
    CHECK_THAT(refusal(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"),
               Catch::Contains("left-recursive"));
}

TEST_CASE("pattern: the regex subset, anchored and not, over JSON's encoding") {
    check(R"({"type":"string","pattern":"^[a-z]{2,3}-\\d+$"})", {R"("ab-1")", R"("abc-0042")"},
          {R"("a-1")", R"("abcd-1")", R"("ab-")", R"(" ab-1")"});
    check(R"({"type":"string","pattern":"abc"})", {R"("abc")", R"("xxabcyy")"}, {R"("ab")"});
    check(R"({"type":"string","pattern":"^(cat|dog)s?$"})", {R"("cat")", R"("dogs")"},
          {R"("cow")", R"("cats!")"});
    // A quote and a backslash in the regex are escapes in the JSON text.
    check(R"({"type":"string","pattern":"^a\"b\\\\c$"})", {R"("a\"b\\c")"}, {R"("a"b\c")"});
    check(R"({"type":"string","pattern":"^.$"})", {R"("x")", R"("\t")", "\"\xc3\xa9\""},
          {R"("\n")", R"("\u000a")", R"("")"});
    check(R"({"type":"string","pattern":"^[^a-c]$"})", {R"("d")", R"("\"")", R"("\\")"},
          {R"("b")"});
    check(R"({"type":"string","pattern":"^\\w\\s\\D$"})", {R"("a x")"}, {R"("a 1")", R"("- x")"});
    check(R"({"type":"string","pattern":"^(?:ab)+\\.x{3}$"})", {R"("abab.xxx")"}, {R"("ab.xx")"});
}

TEST_CASE("pattern: what the subset leaves out is refused with the pointer and offset") {
    for (const char* p : {"(?=a)", "(?<n>a)", "\\1", "\\bword", "a^b", "a$b", "*a", "[]", "\\p{L}",
                          "(a", "a{2,1}", "^a|b$"}) {
        const ordered_json schema{{"properties", {{"s", {{"type", "string"}, {"pattern", p}}}}}};
        auto g = compile_json_schema(schema);
        INFO(p);
        REQUIRE_FALSE(g);
        CHECK_THAT(g.error().message(), Catch::StartsWith("/properties/s/pattern: "));
    }
    CHECK_THAT(
        refusal(R"({"pattern":"a{5000}"})"),
        Catch::Contains("/pattern: at offset 6 (code point): repetition count past the limit "
                        "max_repetition (1000)"));
    // (a*)* repeats something that can match nothing: the GBNF check names the pattern.
    CHECK_THAT(refusal(R"({"pattern":"^(a*)*$"})"), Catch::Contains("/pattern: not enforced:"));
}

TEST_CASE("formats: date, time, date-time, uuid, the others refused") {
    check(R"({"type":"string","format":"date"})",
          {R"("2024-02-28")", R"("1999-12-31")", R"("2023-04-30")"},
          {R"("2024-02-30")", R"("2024-04-31")", R"("2024-13-01")", R"("0999-01-01")",
           R"("2024-1-01")"});
    check(R"({"type":"string","format":"time"})", {R"("23:59:59Z")", R"("00:00:00.123+05:30")"},
          {R"("24:00:00Z")", R"("12:00:00")", R"("12:60:00Z")"});
    check(R"({"type":"string","format":"date-time"})", {R"("2024-05-06T07:08:09Z")"},
          {R"("2024-05-06 07:08:09Z")"});
    check(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
          {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
    CHECK(refusal(R"({"properties":{"m":{"type":"string","format":"email"}}})") ==
          "/properties/m/format: 'email' is not enforced (date, time, date-time and uuid are)");
}

TEST_CASE("minLength and maxLength count decoded characters") {
    check(R"({"type":"string","minLength":2,"maxLength":3})",
          {R"("ab")", R"("a\u00e9c")", R"("\n\t")", "\"\xc3\xa9\xc3\xa9\""},
          {R"("a")", R"("abcd")", R"("\n")"});
}

TEST_CASE("a string character is well-formed UTF-8: overlong forms are not one character") {
    // E0 82 80 decodes (as llama.cpp reads bytes) to U+0080, but a client
    // decodes it as three U+FFFD: under maxLength 1 it would be three characters.
    const std::vector<std::string> overlong{"\"\xE0\x82\x80\"", "\"\xE0\x9F\xBF\"",
                                            "\"\xF0\x8F\xBF\xBF\"", "\"\xC1\xBF\""};
    check(R"({"type":"string","maxLength":1})",
          {"\"\xC2\x80\"", "\"\xDF\xBF\"", "\"\xE0\xA0\x80\"", "\"\xF0\x90\x80\x80\"",
           "\"\xF4\x8F\xBF\xBF\""},
          overlong);
    // A GBNF grammar a user writes keeps llama.cpp's reading (its parity test).
    auto loose = parse_gbnf(R"(root ::= "\"" [^"]* "\"")");
    REQUIRE(loose);
    CHECK(accepts(*loose, overlong[0]));
    CHECK(accepts(*loose, overlong[2]));
}

TEST_CASE("integer bounds equal arithmetic on random values") {
    std::mt19937_64 rng(seed());
    INFO("FERROX_TEST_SEED=" << seed());
    std::uniform_int_distribution<int> digits(0, 6);
    const auto random_int = [&] {
        int64_t scale = 1;
        for (int i = digits(rng); i > 0; --i) scale *= 10;
        return std::uniform_int_distribution<int64_t>(-scale, scale)(rng);
    };
    for (int round = 0; round < 40; ++round) {
        int64_t lo = random_int(), hi = random_int();
        if (lo > hi) std::swap(lo, hi);
        const bool exclusive = round % 3 == 0;
        const ordered_json schema =
            exclusive ? ordered_json{{"type", "integer"},
                                     {"exclusiveMinimum", lo},
                                     {"exclusiveMaximum", hi}}
                      : ordered_json{{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
        auto g = compile_json_schema(schema);
        if (exclusive && hi - lo < 2) {
            REQUIRE_FALSE(g);
            continue;
        }
        REQUIRE(g);
        for (int k = 0; k < 60; ++k) {
            // Near the bounds, and anywhere.
            const int64_t v = k % 3 == 0   ? lo + (k % 7) - 3
                              : k % 3 == 1 ? hi + (k % 7) - 3
                                           : random_int();
            const bool in = exclusive ? (v > lo && v < hi) : (v >= lo && v <= hi);
            INFO(schema.dump() << " value " << v);
            CHECK(accepts(*g, std::to_string(v)) == in);
        }
    }
}

TEST_CASE("number bounds: every accepted decimal is within them") {
    std::mt19937_64 rng(seed() + 1);
    INFO("FERROX_TEST_SEED=" << seed());
    const auto g = compiled(R"({"type":"number","minimum":-2.5,"exclusiveMaximum":10})");
    int accepted = 0;
    for (int i = 0; i < 3000; ++i) {
        const double v = std::uniform_real_distribution<double>(-5, 13)(rng);
        char text[64];
        std::snprintf(text, sizeof text, "%.*f", static_cast<int>(i % 5), v);
        const double parsed = std::strtod(text, nullptr);
        if (accepts(g, text)) {
            ++accepted;
            INFO(text);
            CHECK((parsed >= -2.5 && parsed < 10));
        }
    }
    CHECK(accepted > 1000);
    check(R"({"type":"number","minimum":0,"maximum":1})", {"0", "1", "0.5", "0.999"},
          {"1.5", "-0.5", "1.0", "2", "1e0"});
}

TEST_CASE("whitespace between tokens is bounded") {
    const auto g = compiled(R"({"type":"array","items":{"type":"integer"}})");
    CHECK(accepts(g, "[1, 2]"));
    CHECK(accepts(g, "[\n" + std::string(20, ' ') + "1\n]"));
    CHECK_FALSE(accepts(g, "[\n" + std::string(21, ' ') + "1]"));
    CHECK_FALSE(accepts(g, "[1,  2]"));
    CHECK_FALSE(accepts(g, " [1]"));
}

TEST_CASE("every keyword not enforced is refused with its JSON pointer") {
    CHECK(refusal(R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":5}}})") ==
          "/properties/age/multipleOf: not enforced");
    CHECK(refusal(R"({"type":"array","items":{"type":"string"},"maxItems":1000000000})") ==
          "/maxItems: 1000000000 is past the limit max_repetition (1000)");
    CHECK(refusal(R"({"type":"array","uniqueItems":true})") ==
          "/uniqueItems: true is not enforced");
    CHECK(refusal(R"({"patternProperties":{"^x":{}}})") == "/patternProperties: not enforced");
    CHECK(refusal(R"({"$defs":{"a":{"not":{}}},"$ref":"#/$defs/a"})") ==
          "/$defs/a/not: not enforced");
    CHECK_THAT(refusal(R"({"allOf":[{"type":"integer"},{"minimum":1}]})"),
               Catch::Contains("/allOf: only an allOf of exactly one subschema is enforced"));
    CHECK(refusal(R"({"anyOf":[{"type":"integer"}],"type":"integer"})") ==
          "/type: not enforced beside anyOf");
    CHECK(refusal(R"({"properties":{"x":false},"required":["x"]})") ==
          "/properties/x: the schema false admits no value");
    CHECK(refusal(R"({"type":"integer","minimum":5,"maximum":4})") ==
          "(root): no integer of at most 18 digits satisfies the bounds");
    CHECK(refusal(R"({"type":"string","minLength":3,"maxLength":2})") ==
          "/maxLength: is below minLength");
    CHECK(refusal(R"({"properties":{"a/b~":{"minContains":1}}})") ==
          "/properties/a~1b~0/minContains: not enforced");
    // Annotations are accepted.
    compiled(R"({"title":"t","description":"d","examples":[1],"default":1,"$schema":"x","$id":"y",
                 "$comment":"c","type":"integer"})");
}

TEST_CASE("the bounds on depth, references and the grammar's size are errors that name them") {
    std::string deep = R"({"type":"integer"})";
    for (int i = 0; i < 40; ++i) deep = R"({"type":"array","items":)" + deep + "}";
    CHECK_THAT(refusal(deep), Catch::Contains("nested deeper than the limit max_depth (32)"));
    JsonSchemaLimits small;
    small.max_grammar_bytes = 2000;
    ordered_json big{{"enum", ordered_json::array()}};
    for (int i = 0; i < 500; ++i) big["enum"].push_back("value-" + std::to_string(i));
    auto g = compile_json_schema(big, small);
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message(), Catch::Contains("max_grammar_bytes (2000)"));
    JsonSchemaLimits few;
    few.max_refs = 2;
    CHECK_THAT(refusal(R"({"$defs":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}},
        "prefixItems":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/c"}]})",
                       few),
               Catch::Contains(
                   "/prefixItems/2/$ref: more distinct references than the limit max_refs (2)"));
}

TEST_CASE("json_object mode: any object, nothing else") {
    auto g = compile_json_object();
    REQUIRE(g);
    CHECK(accepts(*g, R"({"a":[1,{"b":null}],"c":"d"})"));
    CHECK(accepts(*g, "{}"));
    CHECK_FALSE(accepts(*g, "[]"));
    CHECK_FALSE(accepts(*g, R"("x")"));
}
