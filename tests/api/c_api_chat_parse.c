/* ferrox.h 0.5's ferrox_chat_parse from plain C99: answers
 * in three families' formats (by name and detected from a template's text),
 * the content / reasoning / tool calls they give, and refusals by name;
 * given a model file, the family read from its template.
 * Exit 0 when every check passes; each failure is printed. */
#include <stdio.h>
#include <string.h>

#include "ferrox/ferrox.h"

static int failures = 0;

static void expect(int ok, const char* what, const ferrox_call_status* st) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s (%s)\n", what, st ? st->message : "");
        ++failures;
    }
}

static ferrox_chat_parsed* parse(const char* family, const char* tmpl, const char* text,
                                 ferrox_call_status* st) {
    ferrox_chat_parse_params p;
    ferrox_chat_parsed* out = NULL;
    ferrox_chat_parse_params_default(&p);
    p.family = family;
    p.chat_template = tmpl;
    p.id_seed = 42;
    if (ferrox_chat_parse(NULL, &p, text, strlen(text), &out, st) != FERROX_CODE_OK) return NULL;
    return out;
}

static int same(const char* got, size_t len, const char* want) {
    return len == strlen(want) && memcmp(got, want, len) == 0;
}

/* With a model: the family comes from its template (the tiny models carry a
 * plain ChatML one, which writes no tool calls: "generic"). */
static void from_model(const char* path) {
    ferrox_call_status st;
    ferrox_model_params mp;
    ferrox_model* model = NULL;
    ferrox_chat_parse_params p;
    ferrox_chat_parsed* r = NULL;
    const char* text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    size_t len = 0;
    FILE* probe = fopen(path, "rb");
    if (!probe) {
        printf("note: %s is absent; the model's-template case is not run\n", path);
        return;
    }
    fclose(probe);
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    ferrox_model_params_default(&mp);
    mp.n_ctx_max = 64;
    if (ferrox_model_load(path, &mp, &model, &st) != FERROX_CODE_OK) {
        expect(0, "the model loads", &st);
        return;
    }
    ferrox_chat_parse_params_default(&p);
    expect(ferrox_chat_parse(model, &p, text, strlen(text), &r, &st) == FERROX_CODE_OK,
           "an answer parses with the model's family", &st);
    if (r) {
        const char* c = ferrox_chat_parsed_content(r, &len);
        expect(strcmp(ferrox_chat_parsed_family(r), "generic") == 0,
               "the tiny model's ChatML template is generic", NULL);
        expect(same(c, len, text) && ferrox_chat_parsed_n_tool_calls(r) == 0,
               "a generic family keeps everything as content", NULL);
        ferrox_chat_parsed_free(r);
    }
    ferrox_model_free(model);
}

int main(int argc, char** argv) {
    ferrox_call_status st;
    ferrox_chat_parsed* r;
    const ferrox_chat_tool_call* call;
    size_t len = 0;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;

    expect(ferrox_api_version() == (FERROX_API_VERSION_MAJOR << 16 | FERROX_API_VERSION_MINOR),
           "the library's API version is the header's", NULL);

    /* Hermes by name: reasoning, content, a call. */
    r = parse("hermes", NULL,
              "<think>plan</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", "
              "\"arguments\": {\"location\": \"Paris\"}}\n</tool_call>",
              &st);
    expect(r != NULL, "a Hermes answer parses", &st);
    if (r) {
        const char* c = ferrox_chat_parsed_content(r, &len);
        expect(same(c, len, "Checking."), "Hermes content", NULL);
        c = ferrox_chat_parsed_reasoning(r, &len);
        expect(same(c, len, "plan"), "Hermes reasoning", NULL);
        expect(ferrox_chat_parsed_n_tool_calls(r) == 1, "one Hermes call", NULL);
        call = ferrox_chat_parsed_tool_call(r, 0);
        expect(call && strcmp(call->name, "get_weather") == 0, "the call's name", NULL);
        expect(call && same(call->arguments, call->arguments_len, "{\"location\":\"Paris\"}"),
               "the call's arguments, compact", NULL);
        expect(call && strncmp(call->id, "call_", 5) == 0 && strlen(call->id) == 21,
               "the call's id", NULL);
        expect(ferrox_chat_parsed_tool_call(r, 1) == NULL, "no call past the last", NULL);
        expect(strcmp(ferrox_chat_parsed_family(r), "hermes") == 0, "the family's name", NULL);
        ferrox_chat_parsed_free(r);
    }

    /* Mistral detected from a template's text. */
    r = parse(NULL, "{% for m in messages %}[TOOL_CALLS]{{ m.content }}{% endfor %}",
              "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": "
              "{\"x\": 1}}]",
              &st);
    expect(r != NULL, "a Mistral answer parses", &st);
    if (r) {
        expect(strcmp(ferrox_chat_parsed_family(r), "mistral") == 0, "mistral detected", NULL);
        expect(ferrox_chat_parsed_n_tool_calls(r) == 2, "two Mistral calls", NULL);
        call = ferrox_chat_parsed_tool_call(r, 1);
        expect(call && strcmp(call->name, "b") == 0 && strcmp(call->arguments, "{\"x\":1}") == 0,
               "the second call", NULL);
        ferrox_chat_parsed_free(r);
    }

    /* A malformed harmony call stays content. */
    r = parse("harmony", NULL, "<|channel|>commentary to=functions.f<|message|>{oops<|call|>", &st);
    expect(r != NULL, "a harmony answer parses", &st);
    if (r) {
        const char* c = ferrox_chat_parsed_content(r, &len);
        expect(same(c, len, "<|channel|>commentary to=functions.f<|message|>{oops<|call|>"),
               "a malformed call is content, verbatim", NULL);
        expect(ferrox_chat_parsed_n_tool_calls(r) == 0, "no call from a malformed one", NULL);
        ferrox_chat_parsed_free(r);
    }

    /* Refusals, each naming what is wrong. */
    expect(parse("nope", NULL, "x", &st) == NULL && strstr(st.message, "nope") != NULL,
           "an unknown family is refused by name", &st);
    expect(parse("hermes", "{{ x }}", "x", &st) == NULL && strstr(st.message, "not both") != NULL,
           "family and chat_template together are refused", &st);
    expect(parse(NULL, NULL, "x", &st) == NULL && strstr(st.message, "no model") != NULL,
           "no model, family or template is refused", &st);
    {
        ferrox_chat_parsed* out = NULL;
        expect(ferrox_chat_parse(NULL, NULL, "x", 1, &out, &st) == FERROX_CODE_INVALID_ARGUMENT,
               "NULL params are refused", &st);
    }
    ferrox_chat_parsed_free(NULL);
    expect(ferrox_chat_parsed_n_tool_calls(NULL) == 0, "NULL has no calls", NULL);

    if (argc > 1) from_model(argv[1]);

    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("c_api_chat_parse: all checks passed\n");
    return failures ? 1 : 0;
}
