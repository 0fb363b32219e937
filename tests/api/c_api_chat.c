/* ferrox.h 0.4's chat templates (0.5's kwargs) from plain C99, as a binding would call them.
 *
 *   c_api_chat MODEL render OUT ADD_GEN ROLE CONTENT [ROLE CONTENT ...]
 *   c_api_chat MODEL json OUT ADD_GEN MESSAGES.json [TOOLS.json]
 *       render the conversation with the model's template: the text into OUT,
 *       then on stdout "template ORIGIN", one "segment OFFSET LENGTH SPECIAL"
 *       per segment, "tokens ..." (ferrox_chat_prompt_tokens) and
 *       "segment_tokens ..." (ferrox_tokenize_segments over the segments, BOS
 *       added); a refusal prints "error CODE MESSAGE" and exits 3.
 *       $CHAT_TEMPLATE_FILE, when set, is passed as chat_template (its path
 *       as template_origin) instead of the model's own template.
 *   c_api_chat MODEL errors
 *       each malformed call refused with INVALID_ARGUMENT and a message
 *       naming the field; exit 1 on any that is not.
 * tests/api/test_c_api_chat.py drives it and holds the text to jinja2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrox/ferrox.h"

static ferrox_call_status fresh(void) {
    ferrox_call_status st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    return st;
}

static char* read_file(const char* path, size_t* len) {
    FILE* f = fopen(path, "rb");
    char* data = NULL;
    long size;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = (char*)malloc((size_t)size + 1);
        if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
            free(data);
            data = NULL;
        }
        if (data) *len = (size_t)size;
    }
    fclose(f);
    return data;
}

static void print_ids(const char* label, const int32_t* ids, size_t n) {
    size_t i;
    printf("%s", label);
    for (i = 0; i < n; ++i) printf(" %d", (int)ids[i]);
    printf("\n");
}

static int render(const ferrox_model* model, const ferrox_chat_params* params, const char* out) {
    ferrox_call_status st = fresh();
    ferrox_chat_prompt* prompt = NULL;
    const ferrox_code code = ferrox_chat_apply_template(model, params, &prompt, &st);
    size_t len = 0, n_segments = 0, n_tokens = 0, i, n_seg_tokens = 0;
    const char* text;
    const ferrox_text_segment* segments;
    const int32_t* tokens;
    int32_t* seg_tokens;
    FILE* f;
    if (code != FERROX_CODE_OK) {
        printf("error %d %s\n", (int)code, st.message);
        return 3;
    }
    text = ferrox_chat_prompt_text(prompt, &len);
    segments = ferrox_chat_prompt_segments(prompt, &n_segments);
    tokens = ferrox_chat_prompt_tokens(prompt, &n_tokens);
    f = fopen(out, "wb");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write\n", out);
        return 1;
    }
    printf("template %s\n", ferrox_chat_prompt_template(prompt));
    for (i = 0; i < n_segments; ++i)
        printf("segment %lu %lu %d\n", (unsigned long)(segments[i].text - text),
               (unsigned long)segments[i].len, segments[i].parse_special);
    print_ids("tokens", tokens, n_tokens);
    seg_tokens = (int32_t*)malloc((len + 8) * sizeof *seg_tokens);
    if (!seg_tokens || ferrox_tokenize_segments(model, segments, n_segments, 1, seg_tokens, len + 8,
                                                &n_seg_tokens, &st) != FERROX_CODE_OK) {
        fprintf(stderr, "ferrox_tokenize_segments: %s\n", st.message);
        return 1;
    }
    print_ids("segment_tokens", seg_tokens, n_seg_tokens);
    free(seg_tokens);
    ferrox_chat_prompt_free(prompt);
    return 0;
}

static int failures = 0;

/* One malformed call: refused with INVALID_ARGUMENT, *out left NULL, and a
 * message holding `names`. */
static void refused(const ferrox_model* model, const ferrox_chat_params* params,
                    const char* names) {
    ferrox_call_status st = fresh();
    ferrox_chat_prompt* prompt = (ferrox_chat_prompt*)&st; /* must come back NULL */
    const ferrox_code code = ferrox_chat_apply_template(model, params, &prompt, &st);
    if (code != FERROX_CODE_INVALID_ARGUMENT || prompt != NULL || !strstr(st.message, names)) {
        fprintf(stderr, "FAIL: expected a refusal naming '%s'; got code %d, message '%s'\n", names,
                (int)code, st.message);
        ++failures;
    } else {
        printf("refused: %s\n", st.message);
    }
}

static int errors(const ferrox_model* model) {
    ferrox_chat_params p;
    ferrox_chat_message m[3];
    static char long_role[FERROX_CHAT_MAX_ROLE + 2];
    ferrox_call_status st = fresh();
    ferrox_chat_prompt* prompt = NULL;
    char* huge;
    const char* deep_json;
    char deep[2 * FERROX_CHAT_MAX_JSON_DEPTH + 64];
    size_t i;

    m[0].role = "system";
    m[0].content = "Be brief.";
    m[0].content_len = 9;
    m[1].role = "user";
    m[1].content = "Hi";
    m[1].content_len = 2;
    m[2] = m[1];

    if (ferrox_api_version() != (FERROX_API_VERSION_MAJOR << 16 | FERROX_API_VERSION_MINOR)) {
        fprintf(stderr, "FAIL: the library's API version is not the header's\n");
        ++failures;
    }
    if (ferrox_chat_apply_template(NULL, NULL, &prompt, &st) != FERROX_CODE_INVALID_ARGUMENT ||
        !strstr(st.message, "NULL")) {
        fprintf(stderr, "FAIL: a NULL model is not refused\n");
        ++failures;
    }

    ferrox_chat_params_default(&p);
    refused(model, &p, "no messages");

    p.struct_size = sizeof p + 8;
    p.messages = m;
    p.n_messages = 2;
    refused(model, &p, "struct_size");

    ferrox_chat_params_default(&p);
    p.messages = NULL;
    p.n_messages = 2;
    refused(model, &p, "messages is NULL with n_messages 2");

    p.messages = m;
    p.n_messages = (size_t)FERROX_CHAT_MAX_MESSAGES + 1;
    refused(model, &p, "n_messages 65537; at most 65536");

    m[2].role = NULL;
    p.n_messages = 3;
    refused(model, &p, "messages[2].role is NULL");

    m[2].role = "";
    refused(model, &p, "messages[2].role is empty");

    memset(long_role, 'r', sizeof long_role - 1);
    m[2].role = long_role;
    refused(model, &p, "messages[2].role: more than 64 bytes");

    m[2].role = "user";
    m[2].content = NULL;
    m[2].content_len = 5;
    refused(model, &p, "messages[2].content is NULL with content_len 5");

    /* Sizes are checked before the bytes are read: a length past the bound
     * over a short buffer is refused without touching it. */
    m[2].content = "x";
    m[2].content_len = (size_t)FERROX_CHAT_MAX_CONTENT + 1;
    refused(model, &p, "messages[2].content: 16777217 bytes; at most 16777216");

    huge = (char*)malloc(FERROX_CHAT_MAX_CONTENT);
    if (huge) {
        memset(huge, 'a', FERROX_CHAT_MAX_CONTENT);
        m[1].content = huge;
        m[1].content_len = FERROX_CHAT_MAX_CONTENT - 9; /* with m[0]'s 9: the bound exactly */
        m[2].content = huge;
        m[2].content_len = 1;
        refused(model, &p, "messages[0..2].content: 16777217 bytes in all; at most 16777216");
        free(huge);
    }
    m[1].content = "Hi";
    m[1].content_len = 2;
    m[2] = m[1];

    p.messages_json = "[]";
    p.messages_json_len = 2;
    refused(model, &p, "give messages or messages_json, not both");

    ferrox_chat_params_default(&p);
    p.messages_json = NULL;
    p.messages_json_len = 4;
    refused(model, &p, "messages_json is NULL with messages_json_len 4");

    p.messages_json = "[{\"role\": \"user\", \"content\": \"hi\"}";
    p.messages_json_len = strlen(p.messages_json);
    refused(model, &p, "messages_json: [json.exception.parse_error");

    p.messages_json = "{\"role\": \"user\"}";
    p.messages_json_len = strlen(p.messages_json);
    refused(model, &p, "messages_json: an array of messages, not object");

    p.messages_json = "[{\"role\": \"user\", \"content\": \"hi\"}, 7]";
    p.messages_json_len = strlen(p.messages_json);
    refused(model, &p, "messages_json[1]: a message is an object, not number");

    p.messages_json = "[{\"content\": \"hi\"}]";
    p.messages_json_len = strlen(p.messages_json);
    refused(model, &p, "messages_json[0].role: missing or not a string");

    /* One level deeper than the bound, well-formed. */
    for (i = 0; i <= FERROX_CHAT_MAX_JSON_DEPTH; ++i) deep[i] = '[';
    for (i = 0; i <= FERROX_CHAT_MAX_JSON_DEPTH; ++i)
        deep[FERROX_CHAT_MAX_JSON_DEPTH + 1 + i] = ']';
    deep[2 * (FERROX_CHAT_MAX_JSON_DEPTH + 1)] = '\0';
    deep_json = deep;
    p.messages_json = deep_json;
    p.messages_json_len = strlen(deep_json);
    refused(model, &p, "messages_json: nested deeper than 64 levels");

    huge = (char*)malloc(FERROX_CHAT_MAX_JSON * 2);
    if (huge) {
        /* An object of 257 members, then one past the size bound. */
        size_t at = 0;
        memset(huge, ' ', FERROX_CHAT_MAX_JSON * 2);
        at += (size_t)sprintf(huge + at, "[{\"role\": \"user\"");
        for (i = 0; i < FERROX_CHAT_MAX_JSON_MEMBERS; ++i)
            at += (size_t)sprintf(huge + at, ", \"k%lu\": 0", (unsigned long)i);
        at += (size_t)sprintf(huge + at, "}]");
        p.messages_json = huge;
        p.messages_json_len = at;
        refused(model, &p, "messages_json: an object with more than 256 members");
        p.messages_json_len = (size_t)FERROX_CHAT_MAX_JSON + 1;
        refused(model, &p, "messages_json: 4194305 bytes; at most 4194304");
        free(huge);
    }

    p.messages_json = "[{\"role\": \"user\", \"content\": \"hi\"}]";
    p.messages_json_len = strlen(p.messages_json);
    p.tools_json = "{\"type\": \"function\"}";
    p.tools_json_len = strlen(p.tools_json);
    refused(model, &p, "tools_json: an array of tools, not object");
    p.tools_json = NULL;
    p.tools_json_len = 3;
    refused(model, &p, "tools_json is NULL with tools_json_len 3");
    p.tools_json_len = 0;

    /* 0.5: template kwargs are an object, and may not replace the renderer's keys. */
    p.kwargs_json = "[true]";
    p.kwargs_json_len = strlen(p.kwargs_json);
    refused(model, &p, "kwargs_json: an object of template variables, not array");
    p.kwargs_json = "{\"bos_token\": \"<start_of_turn>\"}";
    p.kwargs_json_len = strlen(p.kwargs_json);
    refused(model, &p, "template kwargs: 'bos_token' is set by the renderer, not a kwarg");
    p.kwargs_json = NULL;
    p.kwargs_json_len = 2;
    refused(model, &p, "kwargs_json is NULL with kwargs_json_len 2");
    p.kwargs_json_len = 0;

    p.chat_template = "{{ messages[0].content }}";
    p.template_name = "chatml";
    refused(model, &p, "give chat_template or template_name, not both");
    p.chat_template = NULL;
    p.template_name = "no-such";
    refused(model, &p, "template_name 'no-such': no built-in template of that name (chatml");
    p.template_name = NULL;

    /* The template's own errors name its origin and line. */
    p.chat_template = "{% for m in messages %}\n{{ raise_exception('no ' + m.role) }}{% endfor %}";
    p.template_origin = "mine.jinja";
    refused(model, &p, "mine.jinja:2: call to 'raise_exception': raise_exception: no user");
    p.template_origin = NULL;
    p.chat_template = "{% if %}";
    refused(model, &p, "chat_template:1:");

    /* The getters take NULL. */
    if (ferrox_chat_prompt_text(NULL, &i) == NULL || i != 0 ||
        ferrox_chat_prompt_segments(NULL, &i) != NULL ||
        ferrox_chat_prompt_tokens(NULL, &i) != NULL ||
        strcmp(ferrox_chat_prompt_template(NULL), "") != 0) {
        fprintf(stderr, "FAIL: a getter mishandles NULL\n");
        ++failures;
    }
    ferrox_chat_prompt_free(NULL);
    return failures ? 1 : 0;
}

int main(int argc, char** argv) {
    ferrox_call_status st = fresh();
    ferrox_model_params mp;
    ferrox_model* model = NULL;
    ferrox_chat_params p;
    FILE* probe;
    const char* template_path;
    char* template_source = NULL;
    int rc = 2;
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL render|json|errors ...\n", argv[0]);
        return 2;
    }
    probe = fopen(argv[1], "rb");
    if (!probe) {
        printf("SKIP: %s is absent\n", argv[1]);
        return 77;
    }
    fclose(probe);
    ferrox_model_params_default(&mp);
    mp.n_ctx_max = 256;
    if (ferrox_model_load(argv[1], &mp, &model, &st) != FERROX_CODE_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], st.message);
        return 1;
    }
    ferrox_chat_params_default(&p);
    template_path = getenv("CHAT_TEMPLATE_FILE");
    if (template_path && *template_path) {
        size_t len = 0;
        template_source = read_file(template_path, &len);
        if (!template_source) {
            fprintf(stderr, "%s: cannot read\n", template_path);
            return 1;
        }
        template_source[len] = '\0';
        p.chat_template = template_source;
        p.template_origin = template_path;
    }
    if (strcmp(argv[2], "errors") == 0) {
        rc = errors(model);
    } else if (strcmp(argv[2], "render") == 0 && argc >= 5 && argc % 2 == 1) {
        const size_t n = (size_t)(argc - 5) / 2;
        ferrox_chat_message* m = (ferrox_chat_message*)calloc(n ? n : 1, sizeof *m);
        size_t i;
        for (i = 0; m && i < n; ++i) {
            m[i].role = argv[5 + 2 * i];
            m[i].content = argv[6 + 2 * i];
            m[i].content_len = strlen(argv[6 + 2 * i]);
        }
        p.messages = m;
        p.n_messages = n;
        p.add_generation_prompt = atoi(argv[4]);
        rc = m ? render(model, &p, argv[3]) : 1;
        free(m);
    } else if (strcmp(argv[2], "json") == 0 && argc >= 6) {
        size_t len = 0, tools_len = 0;
        char* json = read_file(argv[5], &len);
        char* tools = argc >= 7 ? read_file(argv[6], &tools_len) : NULL;
        p.messages_json = json;
        p.messages_json_len = len;
        p.tools_json = tools;
        p.tools_json_len = tools_len;
        p.add_generation_prompt = atoi(argv[4]);
        rc = json ? render(model, &p, argv[3]) : 1;
        free(json);
        free(tools);
    } else {
        fprintf(stderr, "usage: %s MODEL render|json|errors ...\n", argv[0]);
    }
    ferrox_model_free(model);
    free(template_source);
    return rc;
}
