/* ferrox.h 0.6's grammar stage from plain C99, on a tiny model:
 *
 *   c_api_grammar MODEL gen gbnf|schema TEXT SEED N MAX_TOKENS
 *       N seeded samples at temperature 1 under the grammar (or schema); one
 *       line each: "stop|length STATE HEX" (STATE: ferrox_sampler_grammar_state
 *       at the end, HEX: the text's bytes). test_c_api_grammar.py validates
 *       them (jsonschema, Python's re).
 *   c_api_grammar MODEL refuse gbnf|schema|both|nomodel TEXT
 *       ferrox_sampler_new with that text; prints "CODE\tMESSAGE".
 *   c_api_grammar MODEL checks
 *       the calls around the stage, checked here: a forbidden token refused,
 *       the state through a generation, accept after sample refused, reset,
 *       a sampler outliving its model. Exit 0 when every check passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrox/ferrox.h"

static int failures = 0;

static void expect(int ok, const char* what, const ferrox_call_status* st) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s (%s)\n", what, st ? st->message : "");
        ++failures;
    }
}

static ferrox_call_status fresh(void) {
    ferrox_call_status st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    return st;
}

static ferrox_model* load(const char* path) {
    ferrox_call_status st = fresh();
    ferrox_model_params mp;
    ferrox_model* model = NULL;
    ferrox_model_params_default(&mp);
    mp.n_ctx_max = 256;
    if (ferrox_model_load(path, &mp, &model, &st) != FERROX_CODE_OK) {
        fprintf(stderr, "%s: %s\n", path, st.message);
        exit(2);
    }
    return model;
}

/* Samplers as the tests want them: every stage but the grammar off, so that
 * the grammar decides (a random model has no idea what JSON is). */
static ferrox_sampler_params sampling(const ferrox_model* model, const char* kind, const char* text,
                                      uint64_t seed) {
    ferrox_sampler_params p;
    ferrox_sampler_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.model = model;
    if (strcmp(kind, "schema") == 0 || strcmp(kind, "both") == 0) {
        p.json_schema = text;
        p.json_schema_len = strlen(text);
    }
    if (strcmp(kind, "gbnf") == 0 || strcmp(kind, "both") == 0) {
        p.grammar = text;
        p.grammar_len = strlen(text);
    }
    if (strcmp(kind, "nomodel") == 0) {
        p.model = NULL;
        p.grammar = text;
        p.grammar_len = strlen(text);
    }
    return p;
}

static const float* decode_one(ferrox_context* ctx, int32_t token, int32_t pos) {
    ferrox_call_status st = fresh();
    int32_t seq = 0;
    uint8_t want = 1;
    const float* logits = NULL;
    ferrox_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.n_tokens = 1;
    b.tokens = &token;
    b.positions = &pos;
    b.seq_ids = &seq;
    b.logits = &want;
    if (ferrox_decode(ctx, &b, &st) != FERROX_CODE_OK ||
        ferrox_logits(ctx, 0, &logits, &st) != FERROX_CODE_OK) {
        fprintf(stderr, "decode: %s\n", st.message);
        exit(2);
    }
    return logits;
}

/* The token's bytes as the grammar saw them (the detok stream's piece, not
 * ferrox_detokenize's, which may drop a SentencePiece word marker's space). */
static size_t token_text(const ferrox_model* model, int32_t token, char* buf, size_t capacity) {
    ferrox_call_status st = fresh();
    ferrox_detok_stream* stream = NULL;
    size_t got = 0, needed = 0;
    if (ferrox_detok_stream_new(model, &stream, &st) != FERROX_CODE_OK) return 0;
    if (ferrox_detok_stream_push(stream, token, buf, capacity, &needed, &st) == FERROX_CODE_OK)
        got = needed;
    if (ferrox_detok_stream_push(stream, -1, buf + got, capacity - got, &needed, &st) ==
        FERROX_CODE_OK)
        got += needed;
    ferrox_detok_stream_free(stream);
    return got;
}

/* One generation from a one-token prompt (BOS, or token 1); prints its line. */
static void generate(const ferrox_model* model, ferrox_context* ctx, ferrox_sampler* sampler,
                     int max_tokens) {
    ferrox_call_status st = fresh();
    int32_t token = ferrox_model_bos(model) >= 0 ? ferrox_model_bos(model) : 1;
    int32_t pos = 0;
    const float* logits;
    const char* finish = "length";
    char piece[256];
    static char text[1 << 16];
    size_t len = 0, i;
    int step;
    ferrox_kv_clear(ctx, &st);
    logits = decode_one(ctx, token, pos++);
    ferrox_sampler_accept(sampler, &token, 1, &st);
    for (step = 0; step < max_tokens; ++step) {
        size_t n;
        if (ferrox_sampler_sample(sampler, logits, ferrox_model_vocab(model), &token, &st) !=
            FERROX_CODE_OK) {
            fprintf(stderr, "sample: %s (%s)\n", st.message, ferrox_code_name(st.code));
            exit(3);
        }
        if (ferrox_model_is_end_of_generation(model, token)) {
            finish = "stop";
            break;
        }
        if (ferrox_sampler_accept_token(sampler, token, &st) != FERROX_CODE_OK) {
            fprintf(stderr, "accept_token: %s\n", st.message);
            exit(3);
        }
        n = token_text(model, token, piece, sizeof piece);
        if (len + n < sizeof text) {
            memcpy(text + len, piece, n);
            len += n;
        }
        if (step + 1 < max_tokens) logits = decode_one(ctx, token, pos++);
    }
    printf("%s %d ", finish, (int)ferrox_sampler_grammar_state(sampler));
    for (i = 0; i < len; ++i) printf("%02x", (unsigned char)text[i]);
    printf("\n");
}

static int gen(const char* path, const char* kind, const char* text, uint64_t seed, int n,
               int max_tokens) {
    ferrox_model* model = load(path);
    ferrox_call_status st = fresh();
    ferrox_context_params cp;
    ferrox_context* ctx = NULL;
    int i;
    ferrox_context_params_default(&cp);
    if (ferrox_context_new(model, &cp, &ctx, &st) != FERROX_CODE_OK) {
        fprintf(stderr, "context: %s\n", st.message);
        return 2;
    }
    for (i = 0; i < n; ++i) {
        ferrox_sampler_params p = sampling(model, kind, text, seed + (uint64_t)i);
        ferrox_sampler* sampler = NULL;
        if (ferrox_sampler_new(&p, &sampler, &st) != FERROX_CODE_OK) {
            fprintf(stderr, "sampler: %s\n", st.message);
            return 2;
        }
        generate(model, ctx, sampler, max_tokens);
        ferrox_sampler_free(sampler);
    }
    ferrox_context_free(ctx);
    ferrox_model_free(model);
    return 0;
}

static int refuse(const char* path, const char* kind, const char* text) {
    ferrox_model* model = load(path);
    ferrox_call_status st = fresh();
    ferrox_sampler_params p = sampling(model, kind, text, 1);
    ferrox_sampler* sampler = NULL;
    const ferrox_code code = ferrox_sampler_new(&p, &sampler, &st);
    printf("%s\t%s\n", ferrox_code_name(code), code == FERROX_CODE_OK ? "" : st.message);
    expect((code == FERROX_CODE_OK) == (sampler != NULL), "a sampler only on success", &st);
    ferrox_sampler_free(sampler);
    ferrox_model_free(model);
    return failures ? 1 : 0;
}

/* Logits from a seeded generator: every token gets a different value. */
static void random_logits(float* logits, uint32_t n, uint64_t* state) {
    uint32_t i;
    for (i = 0; i < n; ++i) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)((*state >> 40) % 2000u) / 100.0f - 10.0f;
    }
}

static int all_digits(const char* s, size_t n) {
    size_t i;
    for (i = 0; i < n; ++i)
        if (s[i] < '0' || s[i] > '9') return 0;
    return n > 0;
}

static int checks(const char* path) {
    ferrox_model* model = load(path);
    const uint32_t vocab = ferrox_model_vocab(model);
    float* logits = (float*)malloc(vocab * sizeof(float));
    ferrox_call_status st = fresh();
    ferrox_sampler_params p = sampling(model, "gbnf", "root ::= [0-9]{1,3} \"!\"", 7);
    ferrox_sampler* s = NULL;
    ferrox_sampler* plain = NULL;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int32_t token = -1, x[4];
    size_t n_x = 0;
    char piece[256];
    size_t n;
    int step, saw_complete = 0;

    expect(ferrox_sampler_new(&p, &s, &st) == FERROX_CODE_OK, "a GBNF sampler is made", &st);
    expect(ferrox_sampler_grammar_state(s) == FERROX_GRAMMAR_OPEN, "a fresh grammar is open", NULL);
    /* A token whose text is a letter: never allowed by the grammar. */
    expect(ferrox_tokenize(model, "x", 1, 0, 0, x, 4, &n_x, &st) == FERROX_CODE_OK && n_x >= 1,
           "\"x\" tokenizes", &st);
    expect(ferrox_sampler_accept_token(s, x[0], &st) == FERROX_CODE_GRAMMAR,
           "a token the grammar forbids is refused with FERROX_CODE_GRAMMAR", &st);
    expect(strstr(st.message, "grammar") != NULL, "the refusal says why", &st);
    expect(ferrox_sampler_grammar_state(s) == FERROX_GRAMMAR_FAILED, "then the state is failed",
           NULL);
    random_logits(logits, vocab, &rng);
    expect(ferrox_sampler_sample(s, logits, vocab, &token, &st) == FERROX_CODE_GRAMMAR,
           "a failed grammar samples nothing", &st);
    expect(ferrox_sampler_reset(s, &st) == FERROX_CODE_OK &&
               ferrox_sampler_grammar_state(s) == FERROX_GRAMMAR_OPEN,
           "reset starts the grammar over", &st);

    /* Through a whole answer on random logits: digits, then "!", then only
     * end of generation; the state follows. */
    for (step = 0; step < 8; ++step) {
        random_logits(logits, vocab, &rng);
        expect(ferrox_sampler_sample(s, logits, vocab, &token, &st) == FERROX_CODE_OK,
               "a grammar sampler samples", &st);
        if (ferrox_model_is_end_of_generation(model, token)) {
            expect(ferrox_sampler_grammar_state(s) == FERROX_GRAMMAR_COMPLETE,
                   "end of generation comes only where the grammar is complete", NULL);
            saw_complete = 1;
            expect(ferrox_sampler_accept_token(s, token, &st) == FERROX_CODE_OK &&
                       ferrox_sampler_grammar_state(s) == FERROX_GRAMMAR_ENDED,
                   "accepting it ends the grammar", &st);
            break;
        }
        n = token_text(model, token, piece, sizeof piece);
        expect(all_digits(piece, n) ||
                   (n >= 1 && piece[n - 1] == '!' && (n == 1 || all_digits(piece, n - 1))),
               "every token sampled is digits or the closing '!'", NULL);
        /* accept (history only) after a sample is refused: it would bypass the grammar. */
        expect(ferrox_sampler_accept(s, &token, 1, &st) == FERROX_CODE_INVALID_ARGUMENT,
               "ferrox_sampler_accept after a sample is refused on a grammar sampler", &st);
        expect(ferrox_sampler_accept_token(s, token, &st) == FERROX_CODE_OK,
               "the sampled token is accepted", &st);
    }
    expect(saw_complete, "the answer ends within 8 tokens", NULL);

    /* No grammar: state none, accept after sample allowed as before. */
    ferrox_sampler_params_default(&p);
    expect(ferrox_sampler_new(&p, &plain, &st) == FERROX_CODE_OK, "a plain sampler", &st);
    expect(ferrox_sampler_grammar_state(plain) == FERROX_GRAMMAR_NONE, "no grammar: none", NULL);
    expect(ferrox_sampler_sample(plain, logits, vocab, &token, &st) == FERROX_CODE_OK &&
               ferrox_sampler_accept(plain, &token, 1, &st) == FERROX_CODE_OK &&
               ferrox_sampler_accept_token(plain, token, &st) == FERROX_CODE_OK,
           "a plain sampler takes both accepts", &st);
    ferrox_sampler_free(plain);
    expect(ferrox_sampler_grammar_state(NULL) == FERROX_GRAMMAR_NONE, "NULL: none", NULL);
    expect(ferrox_sampler_accept_token(NULL, 0, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               ferrox_sampler_reset(NULL, &st) == FERROX_CODE_INVALID_ARGUMENT,
           "NULL samplers are refused", &st);

    /* The sampler keeps the grammar and the vocabulary: it outlives the model. */
    ferrox_sampler_reset(s, &st);
    ferrox_model_free(model);
    random_logits(logits, vocab, &rng);
    expect(ferrox_sampler_sample(s, logits, vocab, &token, &st) == FERROX_CODE_OK,
           "a sampler samples after its model is freed", &st);
    ferrox_sampler_free(s);
    free(logits);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc >= 8 && strcmp(argv[2], "gen") == 0)
        return gen(argv[1], argv[3], argv[4], strtoull(argv[5], NULL, 10), atoi(argv[6]),
                   atoi(argv[7]));
    if (argc >= 5 && strcmp(argv[2], "refuse") == 0) return refuse(argv[1], argv[3], argv[4]);
    if (argc >= 3 && strcmp(argv[2], "checks") == 0) return checks(argv[1]);
    fprintf(stderr,
            "usage: %s MODEL gen gbnf|schema TEXT SEED N MAX_TOKENS | refuse KIND TEXT | "
            "checks\n",
            argv[0]);
    return 2;
}
