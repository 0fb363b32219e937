/* Generates a continuation for 4 prompts at once through ferrox.h: one
 * context with 4 sequences, every prompt prefilled in one batch, then one
 * batch per step holding each unfinished sequence's next token.
 *
 *   ferrox-batched MODEL.gguf [N_TOKENS]
 */
#include <ferrox/ferrox.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SEQ 4
#define MAX_PROMPT 256

static const char* const kPrompts[N_SEQ] = {
    "The capital of France is",
    "Once upon a time",
    "The three primary colours are",
    "def fibonacci(n):",
};

static int fail(const char* what, const ferrox_call_status* st) {
    fprintf(stderr, "%s: %s (%s)\n", what, st->message, ferrox_code_name(st->code));
    return 1;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [N_TOKENS]\n", argv[0]);
        return 2;
    }
    const int n_gen = argc > 2 ? atoi(argv[2]) : 16;
    ferrox_call_status st;
    st.struct_size = sizeof st;

    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    mp.n_ctx_max = 1024;
    ferrox_model* model = NULL;
    if (ferrox_model_load(argv[1], &mp, &model, &st) != FERROX_CODE_OK) return fail("load", &st);

    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    cp.n_seq = N_SEQ;
    cp.n_ctx = 1024;
    cp.n_batch = 4 * MAX_PROMPT;
    ferrox_context* ctx = NULL;
    if (ferrox_context_new(model, &cp, &ctx, &st) != FERROX_CODE_OK) return fail("context", &st);

    /* One sampler per sequence: its own history and random stream. */
    ferrox_sampler* samplers[N_SEQ];
    static int32_t tokens[N_SEQ * MAX_PROMPT], positions[N_SEQ * MAX_PROMPT],
        seqs[N_SEQ * MAX_PROMPT];
    static uint8_t want[N_SEQ * MAX_PROMPT];
    uint32_t n = 0, last_row[N_SEQ];
    int32_t next_pos[N_SEQ];
    for (int s = 0; s < N_SEQ; ++s) {
        ferrox_sampler_params sp;
        ferrox_sampler_params_default(&sp);
        sp.seed = 1000u + (uint64_t)s;
        if (ferrox_sampler_new(&sp, &samplers[s], &st) != FERROX_CODE_OK)
            return fail("sampler", &st);
        size_t count = 0;
        if (ferrox_tokenize(model, kPrompts[s], strlen(kPrompts[s]), 1, 0, tokens + n, MAX_PROMPT,
                            &count, &st) != FERROX_CODE_OK)
            return fail("tokenize", &st);
        ferrox_sampler_accept(samplers[s], tokens + n, count, &st);
        for (size_t i = 0; i < count; ++i) {
            positions[n + i] = (int32_t)i;
            seqs[n + i] = s;
            want[n + i] = i + 1 == count;
        }
        n += (uint32_t)count;
        last_row[s] = n - 1;
        next_pos[s] = (int32_t)count;
    }

    char text[N_SEQ][4096];
    size_t used[N_SEQ] = {0};
    int done[N_SEQ] = {0};
    ferrox_detok_stream* streams[N_SEQ];
    for (int s = 0; s < N_SEQ; ++s) {
        if (ferrox_detok_stream_new(model, &streams[s], &st) != FERROX_CODE_OK)
            return fail("stream", &st);
        text[s][0] = '\0';
    }
    const uint32_t vocab = ferrox_model_vocab(model);
    for (int step = 0; step < n_gen; ++step) {
        ferrox_batch b;
        memset(&b, 0, sizeof b);
        b.struct_size = sizeof b;
        b.n_tokens = n;
        b.tokens = tokens;
        b.positions = positions;
        b.seq_ids = seqs;
        b.logits = want;
        if (ferrox_decode(ctx, &b, &st) != FERROX_CODE_OK) return fail("decode", &st);
        /* The next batch: one token per unfinished sequence. */
        uint32_t m = 0;
        for (int s = 0; s < N_SEQ; ++s) {
            if (done[s]) continue;
            const float* logits = NULL;
            int32_t tok = 0;
            if (ferrox_logits(ctx, last_row[s], &logits, &st) != FERROX_CODE_OK)
                return fail("logits", &st);
            if (ferrox_sampler_sample(samplers[s], logits, vocab, &tok, &st) != FERROX_CODE_OK)
                return fail("sample", &st);
            ferrox_sampler_accept(samplers[s], &tok, 1, &st);
            if (ferrox_model_is_end_of_generation(model, tok)) {
                done[s] = 1;
                continue;
            }
            size_t len = 0;
            ferrox_detok_stream_push(streams[s], tok, text[s] + used[s], sizeof text[s] - used[s],
                                     &len, &st);
            if (st.code == FERROX_CODE_OK) used[s] += len;
            tokens[m] = tok;
            positions[m] = next_pos[s]++;
            seqs[m] = s;
            want[m] = 1;
            last_row[s] = m++;
        }
        if (m == 0) break;
        n = m;
    }
    for (int s = 0; s < N_SEQ; ++s) {
        printf("[%d] %s|%s\n", s, kPrompts[s], text[s]);
        ferrox_detok_stream_free(streams[s]);
        ferrox_sampler_free(samplers[s]);
    }
    uint32_t cells = 0, total = 0;
    ferrox_kv_usage(ctx, &cells, &total, &st);
    printf("KV cells used: %u of %u\n", cells, total);
    ferrox_context_free(ctx);
    ferrox_model_free(model);
    return 0;
}
