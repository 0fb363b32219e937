/* Programs built against an older ferrox.h keep working with this library
 * (ferrox.h 0.6, docs/api.md "Struct sizes"). Each older layout is written out
 * here as that version's header declared it, followed by a canary:
 *  - the exported ferrox_X_params_default functions (what those programs call)
 *    write exactly their struct of that version, never the canary;
 *  - the library reads such a struct only as far as its struct_size (the
 *    canary's bytes, read as pointers, would be refused or crash);
 *  - ferrox_X_params_init(p, size) writes `size` bytes, zeroes what it does not
 *    know, and a struct larger than the library knows is then refused.
 * Plain C99, no model. Exit 0 when every check passes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ferrox/ferrox.h"

static int failures = 0;

static void expect(int ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        ++failures;
    }
}

#define CANARY_BYTES 64
#define CANARY 0xA5

static int canary_intact(const unsigned char* c) {
    int i;
    for (i = 0; i < CANARY_BYTES; ++i)
        if (c[i] != CANARY) return 0;
    return 1;
}

/* ferrox_chat_params as ferrox.h 0.4 declared it (no kwargs_json). */
typedef struct chat_params_0_4 {
    uint32_t struct_size;
    const ferrox_chat_message* messages;
    size_t n_messages;
    const char* messages_json;
    size_t messages_json_len;
    const char* tools_json;
    size_t tools_json_len;
    int add_generation_prompt;
    const char* chat_template;
    const char* template_origin;
    const char* template_name;
} chat_params_0_4;

/* ferrox_context_params as 0.1 declared it (no profile). */
typedef struct context_params_0_1 {
    uint32_t struct_size;
    uint32_t n_ctx, n_seq, n_batch;
} context_params_0_1;

/* ferrox_model_params as 0.1 first declared it (no max_sequences). */
typedef struct model_params_0_1 {
    uint32_t struct_size;
    const char* config_path;
    const char* const* backends;
    uint32_t n_backends;
    const char* const* plugin_dirs;
    uint32_t n_plugin_dirs;
    uint32_t threads;
    ferrox_kv_kind kv_kind;
    uint32_t n_ctx_max;
    uint32_t n_batch_max;
    int allow_resident;
    ferrox_progress_fn progress;
    void* progress_user;
} model_params_0_1;

/* ferrox_sampler_params as 0.1 .. 0.5 declared it (no grammar members). */
typedef struct sampler_params_0_5 {
    uint32_t struct_size;
    float temperature;
    uint32_t top_k;
    float top_p;
    float min_p;
    float repeat_penalty;
    uint32_t repeat_last_n;
    float frequency_penalty, presence_penalty;
    uint64_t seed;
    const ferrox_logit_bias* logit_bias;
    uint32_t n_logit_bias;
} sampler_params_0_5;

/* ferrox_chat_parse_params as 0.5 declared it. */
typedef struct chat_parse_params_0_5 {
    uint32_t struct_size;
    const char* family;
    const char* chat_template;
    int starts_in_reasoning;
    uint64_t id_seed;
} chat_parse_params_0_5;

#define WITH_CANARY(T)                      \
    struct {                                \
        T p;                                \
        unsigned char canary[CANARY_BYTES]; \
    }

static void old_symbols(void) {
    ferrox_call_status st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    {
        WITH_CANARY(chat_params_0_4) old;
        memset(&old, CANARY, sizeof old);
        /* Parenthesised: the exported function, not ferrox.h's macro. */
        (ferrox_chat_params_default)((ferrox_chat_params*)&old.p);
        expect(canary_intact(old.canary), "0.4 chat params: the canary survives");
        expect(old.p.struct_size == sizeof(chat_params_0_4), "0.4 chat params: its size");
        expect(old.p.add_generation_prompt == 1 && old.p.messages == NULL &&
                   old.p.template_name == NULL,
               "0.4 chat params: the defaults");
    }
    {
        WITH_CANARY(context_params_0_1) old;
        memset(&old, CANARY, sizeof old);
        (ferrox_context_params_default)((ferrox_context_params*)&old.p);
        expect(canary_intact(old.canary), "0.1 context params: the canary survives");
        expect(
            old.p.struct_size == sizeof(context_params_0_1) && old.p.n_seq == 1 && old.p.n_ctx == 0,
            "0.1 context params: its size and defaults");
    }
    {
        WITH_CANARY(model_params_0_1) old;
        memset(&old, CANARY, sizeof old);
        (ferrox_model_params_default)((ferrox_model_params*)&old.p);
        expect(canary_intact(old.canary), "0.1 model params: the canary survives");
        expect(old.p.struct_size == sizeof(model_params_0_1) && old.p.allow_resident == 1 &&
                   old.p.kv_kind == FERROX_KV_F32 && old.p.progress == NULL,
               "0.1 model params: its size and defaults");
    }
    {
        WITH_CANARY(sampler_params_0_5) old;
        ferrox_sampler* s = NULL;
        memset(&old, CANARY, sizeof old);
        (ferrox_sampler_params_default)((ferrox_sampler_params*)&old.p);
        expect(canary_intact(old.canary), "0.5 sampler params: the canary survives");
        expect(old.p.struct_size == sizeof(sampler_params_0_5) && old.p.top_k == 40 &&
                   old.p.logit_bias == NULL,
               "0.5 sampler params: its size and defaults");
        /* Read back only as far as struct_size: the canary, read as the 0.6
         * members, would be a model and both texts at 0xA5A5... */
        expect(
            ferrox_sampler_new((const ferrox_sampler_params*)&old.p, &s, &st) == FERROX_CODE_OK &&
                ferrox_sampler_grammar_state(s) == FERROX_GRAMMAR_NONE,
            "a 0.5 sampler struct is read as one");
        ferrox_sampler_free(s);
    }
    {
        WITH_CANARY(chat_parse_params_0_5) old;
        ferrox_chat_parsed* parsed = NULL;
        memset(&old, CANARY, sizeof old);
        (ferrox_chat_parse_params_default)((ferrox_chat_parse_params*)&old.p);
        expect(canary_intact(old.canary), "0.5 chat parse params: the canary survives");
        expect(old.p.struct_size == sizeof(chat_parse_params_0_5) && old.p.family == NULL,
               "0.5 chat parse params: its size and defaults");
        old.p.family = "hermes";
        expect(ferrox_chat_parse(NULL, (const ferrox_chat_parse_params*)&old.p, "hi", 2, &parsed,
                                 &st) == FERROX_CODE_OK,
               "a 0.5 chat parse struct is read as one");
        ferrox_chat_parsed_free(parsed);
    }
}

static void init_by_size(void) {
    ferrox_call_status st;
    ferrox_sampler* s = NULL;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    {
        /* A caller's own (here: the 0.4) size through the new entry. */
        WITH_CANARY(chat_params_0_4) old;
        memset(&old, CANARY, sizeof old);
        ferrox_chat_params_init((ferrox_chat_params*)&old.p, sizeof old.p);
        expect(canary_intact(old.canary) && old.p.struct_size == sizeof old.p &&
                   old.p.add_generation_prompt == 1,
               "init writes the caller's size");
    }
    {
        /* This header's size: the macro. */
        ferrox_sampler_params p;
        memset(&p, CANARY, sizeof p);
        ferrox_sampler_params_default(&p);
        expect(p.struct_size == sizeof p && p.model == NULL && p.grammar == NULL &&
                   p.json_schema_len == 0,
               "the macro writes the whole struct of this header");
    }
    {
        /* A newer, larger struct: the tail it does not know is zeroed, and
         * the struct is refused where it is read (its newer members would
         * otherwise be ignored without a word). */
        struct {
            ferrox_sampler_params p;
            unsigned char newer[16];
        } big;
        size_t i;
        int zero = 1;
        memset(&big, CANARY, sizeof big);
        ferrox_sampler_params_init(&big.p, sizeof big);
        for (i = 0; i < sizeof big.newer; ++i) zero = zero && big.newer[i] == 0;
        expect(zero && big.p.struct_size == sizeof big,
               "init zeroes past what it knows and keeps the caller's size");
        expect(ferrox_sampler_new(&big.p, &s, &st) == FERROX_CODE_INVALID_ARGUMENT && s == NULL &&
                   strstr(st.message, "struct_size") != NULL,
               "a larger struct is refused by struct_size");
    }
    {
        uint32_t tiny = 0xA5A5A5A5u;
        unsigned char two[2] = {CANARY, CANARY};
        ferrox_context_params_init((ferrox_context_params*)(void*)&tiny, sizeof tiny);
        expect(tiny == sizeof tiny, "a 4-byte struct gets its struct_size only");
        ferrox_context_params_init((ferrox_context_params*)(void*)two, sizeof two);
        expect(two[0] == CANARY && two[1] == CANARY, "under 4 bytes nothing is written");
        ferrox_context_params_init(NULL, 64);
    }
}

int main(void) {
    /* The one place a version bump is acknowledged. */
    expect(ferrox_api_version() == (0u << 16 | 9u), "API 0.9");
    old_symbols();
    init_by_size();
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
