/* ferrox.h: the public C API of the ferrox engine (docs/api.md).
 *
 * Plain C99, the conventions of the plugin ABI (backend_abi.h):
 *  - Parameter structs begin with `struct_size`; start from
 *    ferrox_X_params_default(&p), a macro (0.6) over ferrox_X_params_init(&p,
 *    sizeof p): the library writes only the bytes the caller's struct has.
 *    Members are only ever appended, so a caller built against an older
 *    header passes a smaller struct_size and gets the defaults for what it
 *    does not know. The exported ferrox_X_params_default functions that
 *    programs built before 0.6 call stay, each frozen at its struct's size in
 *    the version that introduced it (docs/api.md, "Struct sizes").
 *  - Every call that can fail returns a ferrox_code and, when `status` is not
 *    NULL (its struct_size set), writes the code and a NUL-terminated message
 *    into it. Getters that cannot fail return their value directly.
 *  - Ownership: every handle a *_new / *_load returns is the caller's and is
 *    released with the matching *_free (NULL is accepted). Pointers a call
 *    returns into a handle (logits, the chat template, the architecture,
 *    the capacity line, the residency's strings, a profile) stay owned by that
 *    handle; how long each stays valid is stated at the call.
 *  - Threading: a ferrox_model is read-only after load; its functions and
 *    ferrox_context_new may be called from any number of threads at once.
 *    A ferrox_context (and a ferrox_sampler, a ferrox_detok_stream) is used by
 *    one thread at a time; a context entered by a second thread while a call
 *    is in progress fails that call with FERROX_CODE_BUSY (detected, not
 *    waited on). Distinct contexts over one model may run concurrently.
 *
 * \since API 0.1 unless marked otherwise; 0.2 added the model's facts and
 * reports (ferrox_model_arch ... ferrox_model_kernel_report), ferrox_token_text
 * and per-op profiling of a context (ferrox_context_params.profile,
 * ferrox_context_profile); 0.3 stop strings on a detok stream and
 * ferrox_tokenize_segments; 0.4 chat templates (ferrox_chat_apply_template);
 * 0.5 template kwargs (ferrox_chat_params.kwargs_json) and an answer parsed
 * into content, reasoning and tool calls (ferrox_chat_parse); 0.6 grammars
 * and JSON schemas on the sampler (ferrox_sampler_params.model, .grammar,
 * .json_schema; ferrox_sampler_accept_token, ferrox_sampler_grammar_state,
 * ferrox_sampler_reset, FERROX_CODE_GRAMMAR) and the size-taking
 * ferrox_X_params_init behind the ferrox_X_params_default macros. */
#ifndef FERROX_FERROX_H
#define FERROX_FERROX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FERROX_C_API __declspec(dllexport)
#else
#define FERROX_C_API __attribute__((visibility("default")))
#endif

#define FERROX_API_VERSION_MAJOR 0u
#define FERROX_API_VERSION_MINOR 9u

/* The library's API version, major << 16 | minor. */
FERROX_C_API uint32_t ferrox_api_version(void);

/* ---- status ------------------------------------------------------------- */

typedef enum ferrox_code {
    FERROX_CODE_OK = 0,
    FERROX_CODE_INVALID_ARGUMENT = 1, /* NULL, a wrong struct_size, a bad id or size */
    FERROX_CODE_NO_ROOM = 2,          /* the KV cache has too few free cells */
    FERROX_CODE_IO = 3,               /* a file could not be read or written */
    FERROX_CODE_BACKEND = 4,          /* a backend (plugin) call failed */
    FERROX_CODE_CANCELLED = 5,        /* the progress callback asked to stop */
    FERROX_CODE_BUSY = 6,             /* the context is in use by another thread */
    FERROX_CODE_BUFFER_TOO_SMALL = 7, /* the output did not fit; *needed says how much */
    /* The sampler's grammar admits no token here, or a token accepted
     * broke it; the message says why (\since API 0.6) */
    FERROX_CODE_GRAMMAR = 8
} ferrox_code;

#define FERROX_STATUS_MESSAGE_CAPACITY 512

typedef struct ferrox_call_status {
    uint32_t struct_size;
    ferrox_code code;
    char message[FERROX_STATUS_MESSAGE_CAPACITY];
    /* FERROX_CODE_NO_ROOM: the cells a decode needed and those free. */
    uint32_t cells_needed, cells_free;
} ferrox_call_status;

/* A short English name for `code` ("ok", "no room", ...); static storage. */
FERROX_C_API const char* ferrox_code_name(ferrox_code code);

/* ---- model -------------------------------------------------------------- */

typedef struct ferrox_model ferrox_model;

/* A KV cache's kind. Q8_0 and Q4_0 are ggml's blocks of 32 (34 and 18
 * bytes), for models whose key_length (K) or value_length (V) is a multiple
 * of 32. K and V may hold different kinds since 0.9 (kv_value_kind). */
typedef enum ferrox_kv_kind {
    FERROX_KV_SAME = -1, /* kv_value_kind only: kv_kind's (the default). \since API 0.9 */
    FERROX_KV_F32 = 0,
    FERROX_KV_F16 = 1,
    FERROX_KV_Q8_0 = 2,
    FERROX_KV_Q4_0 = 3
} ferrox_kv_kind;

/* Called while a model loads with a fraction in [0, 1]; return nonzero to
 * cancel the load (ferrox_model_load then fails with FERROX_CODE_CANCELLED). */
typedef int (*ferrox_progress_fn)(float fraction, void* user);

typedef struct ferrox_model_params {
    uint32_t struct_size;
    const char* config_path; /* a ferrox.yaml; NULL: the usual search (docs/config.md) */
    /* Backend order, e.g. {"cuda", "cpu"}; NULL: the configuration's. */
    const char* const* backends;
    uint32_t n_backends;
    /* Folders searched for plugins first, in order (then $FERROX_PLUGIN_PATH,
     * the configuration's plugins.paths and the installed folder). */
    const char* const* plugin_dirs;
    uint32_t n_plugin_dirs;
    uint32_t threads; /* CPU threads; 0: the configuration's */
    /* The KV kind every context of this model uses (K's, and V's unless
     * kv_value_kind says otherwise): attention kernels are chosen for it at
     * load. */
    ferrox_kv_kind kv_kind;
    /* The cells and batch the load-time memory plan counts, and what a
     * context gets for n_ctx / n_batch 0. (A context may ask for more; it is
     * planned against the memory free when it is made.) n_ctx_max 0:
     * max_sequences x min(4096, training); n_batch_max 0: 256; the batch is
     * never more than n_ctx_max (docs/api.md, "One door"). */
    uint32_t n_ctx_max;
    uint32_t n_batch_max;
    int allow_resident; /* nonzero (default): keep the pass on a 1.2 backend */
    ferrox_progress_fn progress;
    void* progress_user;
    /* The most sequences one context of this model will hold (n_seq); 0: 1.
     * Above 1, a resident backend whose plugin predates ABI 1.3 keeps the
     * model in host memory (and logs why) instead of refusing such contexts.
     * Added after progress_user: a caller built against the shorter struct
     * gets 1. */
    uint32_t max_sequences;
    /* Nonzero: an embedding model (a decoder whose `<arch>.pooling_type` is
     * mean, cls or last) loads, for ferrox_embed, as does a reranker (rank,
     * on qwen3: for the server's /v1/rerank); 0 (default) refuses one with
     * FERROX_CODE_INVALID_ARGUMENT saying what it is. A plain decoder loads
     * either way. \since API 0.7 (appended: a shorter struct gets 0). */
    int embeddings;
    /* The V cache's kind when it differs from K's (llama.cpp's -ctv, e.g.
     * kv_kind FERROX_KV_Q8_0 over FERROX_KV_F16 values); FERROX_KV_SAME (the
     * default): kv_kind's. \since API 0.9 (appended: a shorter struct gets
     * FERROX_KV_SAME). */
    ferrox_kv_kind kv_value_kind;
} ferrox_model_params;

/* Writes the defaults into the first `size` bytes of *params (those the
 * library knows; any beyond are zeroed) and sets struct_size = size.
 * \since API 0.6 */
FERROX_C_API void ferrox_model_params_init(ferrox_model_params* params, size_t size);
/* Programs built before 0.6 call this one: it writes the 0.1 struct
 * (without max_sequences). */
FERROX_C_API void ferrox_model_params_default(ferrox_model_params* params);
#define ferrox_model_params_default(params) ferrox_model_params_init((params), sizeof *(params))

/* Loads a GGUF file. On success *out is the caller's (ferrox_model_free).
 * A backend the configuration marks required that does not load, or no
 * backend of the order ready, fails it with FERROX_CODE_BACKEND and each
 * backend's state in the message (0.2; 0.1 went on without a required one). */
FERROX_C_API ferrox_code ferrox_model_load(const char* path, const ferrox_model_params* params,
                                           ferrox_model** out, ferrox_call_status* status);
FERROX_C_API void ferrox_model_free(ferrox_model* model);

FERROX_C_API uint32_t ferrox_model_vocab(const ferrox_model* model);
FERROX_C_API uint32_t ferrox_model_n_ctx_train(const ferrox_model* model);
/* Token ids; -1 when the vocabulary has none. */
FERROX_C_API int32_t ferrox_model_bos(const ferrox_model* model);
FERROX_C_API int32_t ferrox_model_eos(const ferrox_model* model);
/* EOS, EOT and the end-of-turn control tokens: nonzero ends generation. */
FERROX_C_API int ferrox_model_is_end_of_generation(const ferrox_model* model, int32_t token);

/* A metadata value by GGUF key ("general.architecture"), written as text
 * (numbers in decimal, arrays as "[n items]") into buf with a NUL. *needed
 * (may be NULL) gets the length without the NUL; a value longer than
 * capacity - 1 fails with FERROX_CODE_BUFFER_TOO_SMALL and writes nothing. An
 * absent key fails with FERROX_CODE_INVALID_ARGUMENT. */
FERROX_C_API ferrox_code ferrox_model_meta(const ferrox_model* model, const char* key, char* buf,
                                           size_t capacity, size_t* needed,
                                           ferrox_call_status* status);

/* The chat template (tokenizer.chat_template), NUL-terminated, owned by the
 * model and valid until ferrox_model_free; *out is NULL when the file has none. */
FERROX_C_API ferrox_code ferrox_model_chat_template(const ferrox_model* model, const char** out,
                                                    ferrox_call_status* status);

/* ---- what the model is and where it runs (\since API 0.2) ---------------- */

/* The architecture ("gemma3": general.architecture), NUL-terminated, owned by
 * the model and valid until ferrox_model_free; "" for a NULL model. */
FERROX_C_API const char* ferrox_model_arch(const ferrox_model* model);
FERROX_C_API uint32_t ferrox_model_n_layer(const ferrox_model* model);
FERROX_C_API uint32_t ferrox_model_n_embd(const ferrox_model* model);
/* 1 when the model has recurrent layers (qwen35's Gated DeltaNet): a
 * sequence's state holds its whole history, so ferrox_seq_remove of a tail
 * (p0 > 0) is refused and what would roll back a speculative draft must
 * re-decode instead; 0 otherwise and for a NULL model. Since 0.8. */
FERROX_C_API int ferrox_model_is_recurrent(const ferrox_model* model);
/* The cells and batch the model was loaded for (ferrox_model_params'
 * n_ctx_max and n_batch_max after their defaults): what a context gets for
 * n_ctx / n_batch 0. */
FERROX_C_API uint32_t ferrox_model_n_ctx(const ferrox_model* model);
FERROX_C_API uint32_t ferrox_model_n_batch(const ferrox_model* model);

/* The load-time memory plan in one line ("weights W + KV cache K + scratch S
 * = T of A available", MiB), NUL-terminated, owned by the model and valid
 * until ferrox_model_free. */
FERROX_C_API ferrox_code ferrox_model_capacity_summary(const ferrox_model* model, const char** out,
                                                       ferrox_call_status* status);

/* Where the forward pass runs. The caller sets struct_size; the call fills
 * what fits. The strings are owned by the model and valid until
 * ferrox_model_free. */
typedef struct ferrox_residency {
    uint32_t struct_size;
    int resident;        /* nonzero: weights, KV cache and activations in `backend`'s memory */
    const char* backend; /* the resident backend ("cuda"); "" when not resident */
    const char* reason;  /* why activations stay in host memory; "" when resident */
} ferrox_residency;

FERROX_C_API ferrox_code ferrox_model_residency(const ferrox_model* model, ferrox_residency* out,
                                                ferrox_call_status* status);

/* Kernel calls dispatched for this model since load (by every context over
 * it, and the probe's at load), and how many of them ran through a fallback
 * because the backend had no kernel for the op and kind. Either pointer may
 * be NULL. Safe while other threads decode: the counts are a snapshot. */
FERROX_C_API ferrox_code ferrox_model_kernel_calls(const ferrox_model* model, uint64_t* calls,
                                                   uint64_t* fallback_calls,
                                                   ferrox_call_status* status);

/* The same as a JSON document (schema in docs/api.md), one record per
 * (backend, op, tensor role, kind) dispatched:
 *   {"calls": N, "fallback_calls": N, "kernels": [{"backend": "cpu",
 *    "op": "matvec", "role": "ffn_down", "kind": "Q4_K", "outcome": "hit",
 *    "detail": "...", "calls": N}, ...]}
 * written into buf as ferrox_model_meta writes (the caller's buffer, so that
 * threads sharing the model never share an answer; the size may grow between
 * two calls while contexts decode). */
FERROX_C_API ferrox_code ferrox_model_kernel_report(const ferrox_model* model, char* buf,
                                                    size_t capacity, size_t* needed,
                                                    ferrox_call_status* status);

/* ---- text --------------------------------------------------------------- */

/* add_special: BOS/EOS as the metadata says; parse_special: control tokens
 * written in the text ("<start_of_turn>") become those tokens. Writes at most
 * capacity ids; *n_tokens gets the count; FERROX_CODE_BUFFER_TOO_SMALL when
 * it exceeds capacity (call again with *n_tokens). */
FERROX_C_API ferrox_code ferrox_tokenize(const ferrox_model* model, const char* text, size_t len,
                                         int add_special, int parse_special, int32_t* tokens,
                                         size_t capacity, size_t* n_tokens,
                                         ferrox_call_status* status);

/* One piece of a prompt for ferrox_tokenize_segments: `len` bytes at `text`,
 * and whether control-token text inside it becomes control tokens (a chat
 * template's own text: yes; what a client sent: no). */
typedef struct ferrox_text_segment {
    const char* text;
    size_t len;
    int parse_special;
} ferrox_text_segment;

/* The concatenation of `n` segments tokenized as one text (words and merges run
 * across segment edges), control tokens cut out only inside segments whose
 * parse_special is set; one split over two segments stays text. Otherwise as
 * ferrox_tokenize. For chat prompts whose client text must stay text.
 * \since API 0.3 */
FERROX_C_API ferrox_code ferrox_tokenize_segments(const ferrox_model* model,
                                                  const ferrox_text_segment* segments, size_t n,
                                                  int add_special, int32_t* tokens, size_t capacity,
                                                  size_t* n_tokens, ferrox_call_status* status);

/* The text of `n` tokens (control tokens give nothing), as ferrox_model_meta
 * writes into buf. A token id outside the vocabulary is an error. */
FERROX_C_API ferrox_code ferrox_detokenize(const ferrox_model* model, const int32_t* tokens,
                                           size_t n, char* buf, size_t capacity, size_t* needed,
                                           ferrox_call_status* status);

/* The vocabulary's own text of one token (tokenizer.ggml.tokens[token]), as
 * stored: a control token gives its name ("<bos>", which ferrox_detokenize
 * leaves out), a SentencePiece piece keeps its U+2581 word marker. For chat
 * templates' bos_token / eos_token. Written as ferrox_model_meta writes; a
 * token outside the vocabulary is FERROX_CODE_INVALID_ARGUMENT.
 * \since API 0.2 */
FERROX_C_API ferrox_code ferrox_token_text(const ferrox_model* model, int32_t token, char* buf,
                                           size_t capacity, size_t* needed,
                                           ferrox_call_status* status);

/* Streaming text: push tokens one at a time and get only whole UTF-8
 * characters back (a character split across tokens waits for its end), and,
 * with stop strings, only text that cannot begin one (docs/api.md). */
typedef struct ferrox_detok_stream ferrox_detok_stream;
FERROX_C_API ferrox_code ferrox_detok_stream_new(const ferrox_model* model,
                                                 ferrox_detok_stream** out,
                                                 ferrox_call_status* status);
FERROX_C_API void ferrox_detok_stream_free(ferrox_detok_stream* stream);
/* token >= 0: its bytes are added; token < 0: the stream ends (what is held
 * back is written as is). The complete characters so far go into buf, as
 * ferrox_model_meta writes. FERROX_CODE_BUFFER_TOO_SMALL changes nothing:
 * push the same token again with a buffer of *needed + 1 bytes. (0.2: in
 * 0.1 the text of a push that did not fit was lost.) */
FERROX_C_API ferrox_code ferrox_detok_stream_push(ferrox_detok_stream* stream, int32_t token,
                                                  char* buf, size_t capacity, size_t* needed,
                                                  ferrox_call_status* status);
/* A stop string (len bytes, at most 1024; at most 64 per stream), given
 * before the first push. The stream ends at the stop string that completes
 * first (of two completing on the same byte, the longer): the text written
 * ends where it begins, ferrox_detok_stream_stopped turns nonzero, and later
 * pushes write nothing. Text that may still begin a stop string is held
 * back, and written by the final push (token < 0) when none completed.
 * An empty stop string is ignored. \since API 0.3 */
FERROX_C_API ferrox_code ferrox_detok_stream_add_stop(ferrox_detok_stream* stream, const char* text,
                                                      size_t len, ferrox_call_status* status);
/* Nonzero once a stop string completed (0 for NULL). \since API 0.3 */
FERROX_C_API int ferrox_detok_stream_stopped(const ferrox_detok_stream* stream);

/* ---- chat templates (\since API 0.4) ------------------------------------ */

/* One message: its role ("system", "user", "assistant", "tool"), 1 to
 * FERROX_CHAT_MAX_ROLE bytes, NUL-terminated, and its content, content_len
 * bytes at `content` (no NUL needed; NULL with content_len 0 is empty). Bytes
 * are passed as they are. */
typedef struct ferrox_chat_message {
    const char* role;
    const char* content;
    size_t content_len;
} ferrox_chat_message;

/* Bounds, checked before anything is rendered (the template's own budgets,
 * docs/security.md, apply while it renders). */
#define FERROX_CHAT_MAX_MESSAGES 65536u
#define FERROX_CHAT_MAX_ROLE 64u
#define FERROX_CHAT_MAX_CONTENT (16u << 20) /* bytes of one content, and of all */
#define FERROX_CHAT_MAX_JSON (4u << 20)     /* bytes of messages_json, of tools_json */
#define FERROX_CHAT_MAX_JSON_DEPTH 64u      /* arrays and objects inside each other */
#define FERROX_CHAT_MAX_JSON_MEMBERS 256u   /* members of one JSON object */

/* What to render. The conversation is either `messages` (role / content
 * pairs) or `messages_json` (OpenAI's array of message objects: "role",
 * "content" as a string, null or text parts, "name", "tool_calls",
 * "tool_call_id"), never both. The template is the model's own
 * (tokenizer.chat_template; a file without one: its family's built-in, with
 * a warning in the log) unless `chat_template` gives a Jinja source or
 * `template_name` a built-in ("chatml", "llama3", "gemma"); not both.
 * Start from ferrox_chat_params_default (struct_size, add_generation_prompt). */
typedef struct ferrox_chat_params {
    uint32_t struct_size;
    const ferrox_chat_message* messages;
    size_t n_messages;
    const char* messages_json; /* messages_json_len bytes; NULL: use `messages` */
    size_t messages_json_len;
    const char* tools_json; /* a JSON array of tools, tools_json_len bytes; NULL: none */
    size_t tools_json_len;
    int add_generation_prompt; /* default 1: end with the assistant's turn opened */
    const char* chat_template; /* Jinja source, NUL-terminated; NULL: see above */
    /* Names chat_template in errors ("my.jinja"); NULL: "chat_template". */
    const char* template_origin;
    const char* template_name; /* a built-in's name, NUL-terminated; NULL: see above */
    /* A JSON object of extra template variables ({"enable_thinking": false},
     * {"reasoning_effort": "low"}), kwargs_json_len bytes, client text like
     * the messages; NULL: none. Naming a variable the renderer sets
     * (messages, tools, documents, add_generation_prompt, bos_token,
     * eos_token) is an error. \since API 0.5 (appended) */
    const char* kwargs_json;
    size_t kwargs_json_len;
} ferrox_chat_params;

/* Writes the defaults into the first `size` bytes of *params (those the
 * library knows; any beyond are zeroed) and sets struct_size = size.
 * \since API 0.6 */
FERROX_C_API void ferrox_chat_params_init(ferrox_chat_params* params, size_t size);
/* Programs built before 0.6 call this one: it writes the 0.4 struct
 * (without kwargs_json). */
FERROX_C_API void ferrox_chat_params_default(ferrox_chat_params* params);
#define ferrox_chat_params_default(params) ferrox_chat_params_init((params), sizeof *(params))

/* A rendered chat, owned by the caller (ferrox_chat_prompt_free); the
 * pointers its getters return are owned by it and valid until it is freed. */
typedef struct ferrox_chat_prompt ferrox_chat_prompt;

/* Renders the conversation with the template and tokenizes it. The engine
 * records, while it renders, which bytes came from the conversation (contents
 * and their parts, names, tool calls, their ids and arguments, tool results,
 * tools) -- they are never found by searching the text -- and those bytes
 * never become control tokens, while the template's own text keeps its
 * control tokens. A NULL or malformed argument, a bound exceeded, JSON that
 * does not parse or a template that fails to render (raise_exception
 * included) is FERROX_CODE_INVALID_ARGUMENT with a message naming the field,
 * the message index or the template line. On success *out is the caller's. */
FERROX_C_API ferrox_code ferrox_chat_apply_template(const ferrox_model* model,
                                                    const ferrox_chat_params* params,
                                                    ferrox_chat_prompt** out,
                                                    ferrox_call_status* status);
FERROX_C_API void ferrox_chat_prompt_free(ferrox_chat_prompt* prompt);

/* The rendered text, NUL-terminated; *len (may be NULL) gets its bytes. */
FERROX_C_API const char* ferrox_chat_prompt_text(const ferrox_chat_prompt* prompt, size_t* len);

/* The text as *n consecutive segments that concatenate to it: the template's
 * own text with parse_special 1, the conversation's with 0. Their `text`
 * points into ferrox_chat_prompt_text (offset = segment.text - text): hand
 * them to ferrox_tokenize_segments, or use ferrox_chat_prompt_tokens. */
FERROX_C_API const ferrox_text_segment* ferrox_chat_prompt_segments(
    const ferrox_chat_prompt* prompt, size_t* n);

/* The prompt's tokens: what ferrox_tokenize_segments gives for the segments
 * with add_special 1, less the second BOS when the template wrote its own. */
FERROX_C_API const int32_t* ferrox_chat_prompt_tokens(const ferrox_chat_prompt* prompt, size_t* n);

/* Which template rendered it: "tokenizer.chat_template", "builtin:NAME" or
 * the caller's template_origin. */
FERROX_C_API const char* ferrox_chat_prompt_template(const ferrox_chat_prompt* prompt);

/* ---- tool calls and reasoning in an answer (\since API 0.5) ------------ */

/* One tool call of a parsed answer; its strings are NUL-terminated and owned
 * by the ferrox_chat_parsed. */
typedef struct ferrox_chat_tool_call {
    const char* id; /* "call_" + 16 hex digits: same text and id_seed, same id */
    const char* name;
    const char* arguments; /* a JSON object, compact */
    size_t arguments_len;
} ferrox_chat_tool_call;

/* How to read an answer. The family (docs/structured-output.md, "Tool-call
 * and reasoning families") is `family` by name ("hermes", "llama3", ...),
 * else the one detected in `chat_template`, else the one detected in the
 * model's template (its built-in when the file has none); not both of
 * `family` and `chat_template`. Start from ferrox_chat_parse_params_default. */
typedef struct ferrox_chat_parse_params {
    uint32_t struct_size;
    const char* family;        /* NUL-terminated; NULL: detected, see above */
    const char* chat_template; /* Jinja source, NUL-terminated; NULL: see above */
    int starts_in_reasoning;   /* the prompt opened the reasoning block (default 0) */
    uint64_t id_seed;          /* keys the tool-call ids (default 0) */
} ferrox_chat_parse_params;

#define FERROX_CHAT_MAX_ANSWER (16u << 20) /* bytes of one answer */

/* Writes the defaults into the first `size` bytes of *params (those the
 * library knows; any beyond are zeroed) and sets struct_size = size.
 * \since API 0.6 */
FERROX_C_API void ferrox_chat_parse_params_init(ferrox_chat_parse_params* params, size_t size);
/* Programs built before 0.6 call this one: it writes the 0.5 struct
 * (as it is). */
FERROX_C_API void ferrox_chat_parse_params_default(ferrox_chat_parse_params* params);
#define ferrox_chat_parse_params_default(params) \
    ferrox_chat_parse_params_init((params), sizeof *(params))

/* A parsed answer, owned by the caller (ferrox_chat_parsed_free); the
 * pointers its getters return are owned by it and valid until it is freed. */
typedef struct ferrox_chat_parsed ferrox_chat_parsed;

/* Splits a finished answer (`len` bytes at `text`) into content, reasoning
 * and tool calls as its family writes them. A call that does not parse is
 * kept in the content, verbatim; calls past 128 or over 1 MiB each are too.
 * `model` may be NULL when `family` or `chat_template` is given. A NULL
 * argument, an unknown family, a template that does not parse or an answer
 * over FERROX_CHAT_MAX_ANSWER is FERROX_CODE_INVALID_ARGUMENT with a message
 * naming it. On success *out is the caller's. Thread-safe. */
FERROX_C_API ferrox_code ferrox_chat_parse(const ferrox_model* model,
                                           const ferrox_chat_parse_params* params, const char* text,
                                           size_t len, ferrox_chat_parsed** out,
                                           ferrox_call_status* status);
FERROX_C_API void ferrox_chat_parsed_free(ferrox_chat_parsed* parsed);

/* The family's name ("hermes", ...). */
FERROX_C_API const char* ferrox_chat_parsed_family(const ferrox_chat_parsed* parsed);
/* The content and the reasoning, NUL-terminated; *len (may be NULL) gets their bytes. */
FERROX_C_API const char* ferrox_chat_parsed_content(const ferrox_chat_parsed* parsed, size_t* len);
FERROX_C_API const char* ferrox_chat_parsed_reasoning(const ferrox_chat_parsed* parsed,
                                                      size_t* len);
FERROX_C_API size_t ferrox_chat_parsed_n_tool_calls(const ferrox_chat_parsed* parsed);
/* Call i in the answer's order; NULL when i is out of range. */
FERROX_C_API const ferrox_chat_tool_call* ferrox_chat_parsed_tool_call(
    const ferrox_chat_parsed* parsed, size_t i);

/* ---- context ------------------------------------------------------------ */

typedef struct ferrox_context ferrox_context;

typedef struct ferrox_context_params {
    uint32_t struct_size;
    uint32_t n_ctx;   /* KV cells, shared by every sequence; 0: the model's n_ctx_max */
    uint32_t n_seq;   /* sequence ids 0..n_seq-1, at most 64; default 1 */
    uint32_t n_batch; /* tokens per decode; 0: the model's n_batch_max */
    /* Nonzero: every decode times each op it issues (ferrox_context_profile);
     * default 0, no clock is read. \since API 0.2 (appended: a caller built
     * against the shorter struct gets 0). */
    int profile;
} ferrox_context_params;

/* Writes the defaults into the first `size` bytes of *params (those the
 * library knows; any beyond are zeroed) and sets struct_size = size.
 * \since API 0.6 */
FERROX_C_API void ferrox_context_params_init(ferrox_context_params* params, size_t size);
/* Programs built before 0.6 call this one: it writes the 0.1 struct
 * (without profile). */
FERROX_C_API void ferrox_context_params_default(ferrox_context_params* params);
#define ferrox_context_params_default(params) ferrox_context_params_init((params), sizeof *(params))

/* The model must outlive the context. */
FERROX_C_API ferrox_code ferrox_context_new(const ferrox_model* model,
                                            const ferrox_context_params* params,
                                            ferrox_context** out, ferrox_call_status* status);
FERROX_C_API void ferrox_context_free(ferrox_context* ctx);

/* Tokens of any sequences at any positions. Token i goes into one KV cell
 * of sequence seq_ids[i]; within each sequence the positions must continue
 * from the sequence's last one (ferrox_seq_max_pos + 1), without gaps or
 * repeats. logits[i] nonzero: token i's logits are wanted (NULL: only the
 * batch's last token's). */
typedef struct ferrox_batch {
    uint32_t struct_size;
    uint32_t n_tokens;
    const int32_t* tokens;
    const int32_t* positions;
    const int32_t* seq_ids;
    const uint8_t* logits;
} ferrox_batch;

/* One forward pass over the whole batch. Any failure leaves the KV cache as
 * it was (no cell taken or overwritten); FERROX_CODE_NO_ROOM sets the
 * status's cells_needed / cells_free. */
FERROX_C_API ferrox_code ferrox_decode(ferrox_context* ctx, const ferrox_batch* batch,
                                       ferrox_call_status* status);

/* The logits (ferrox_model_vocab floats) of batch token `index` of the last
 * decode; owned by the context, valid until its next decode or free.
 * FERROX_CODE_INVALID_ARGUMENT when that token did not ask for logits. */
FERROX_C_API ferrox_code ferrox_logits(ferrox_context* ctx, uint32_t index, const float** out,
                                       ferrox_call_status* status);

/* Sequence operations. seq_remove: positions [p0, p1) of `seq` (p1 < 0: to
 * the end; seq < 0: every sequence). seq_copy: `dst` shares `src`'s cells of
 * [p0, p1) -- no K/V is copied, a shared prefix is stored once. seq_keep:
 * drops every other sequence. clear: every cell. min/max: -1 when empty. */
FERROX_C_API ferrox_code ferrox_seq_remove(ferrox_context* ctx, int32_t seq, int32_t p0, int32_t p1,
                                           ferrox_call_status* status);
FERROX_C_API ferrox_code ferrox_seq_copy(ferrox_context* ctx, int32_t src, int32_t dst, int32_t p0,
                                         int32_t p1, ferrox_call_status* status);
FERROX_C_API ferrox_code ferrox_seq_keep(ferrox_context* ctx, int32_t seq,
                                         ferrox_call_status* status);
FERROX_C_API ferrox_code ferrox_kv_clear(ferrox_context* ctx, ferrox_call_status* status);
FERROX_C_API ferrox_code ferrox_seq_pos_range(ferrox_context* ctx, int32_t seq, int32_t* min_pos,
                                              int32_t* max_pos, ferrox_call_status* status);
/* Cells in use (shared cells count once) and in all. */
FERROX_C_API ferrox_code ferrox_kv_usage(ferrox_context* ctx, uint32_t* used, uint32_t* total,
                                         ferrox_call_status* status);

/* ---- embeddings (\since API 0.7) --------------------------------------- */

/* How an embedding model pools a sequence's final-norm hidden rows
 * (`<arch>.pooling_type`, llama.cpp's values); NONE for a plain decoder. */
typedef enum ferrox_pooling {
    FERROX_POOLING_NONE = 0,
    FERROX_POOLING_MEAN = 1,
    FERROX_POOLING_CLS = 2,
    FERROX_POOLING_LAST = 3,
    FERROX_POOLING_RANK = 4
} ferrox_pooling;

FERROX_C_API ferrox_pooling ferrox_model_pooling(const ferrox_model* model);

/* Embeds n_inputs token arrays (tokens[i], n_tokens[i] >= 1 of them, at most
 * the context's n_ctx) with the model's pooling: out gets n_inputs rows of
 * ferrox_model_n_embd floats, in input order; normalize nonzero scales each
 * to L2 norm 1 (as llama.cpp's llama-embedding and llama-server do). The
 * context's sequences share each decode, one input each; its KV cells are
 * used and left empty, so give embeddings a context of their own. An input's
 * vector does not depend on the other inputs (docs/models.md, "Pooling").
 * FERROX_CODE_INVALID_ARGUMENT: a model without pooling or a reranker
 * (pooling RANK: its scores are the server's /v1/rerank), an empty or too
 * long input (named by index), out_floats < n_inputs x n_embd. */
FERROX_C_API ferrox_code ferrox_embed(ferrox_context* ctx, size_t n_inputs,
                                      const int32_t* const* tokens, const size_t* n_tokens,
                                      int normalize, float* out, size_t out_floats,
                                      ferrox_call_status* status);

/* Per-op profile (\since API 0.2) of a context made with `profile` set: wall
 * time per (op, tensor role, kind) summed over every decode since the context
 * was made or the profile last reset, as a JSON document (schema in
 * docs/api.md), rows by descending time:
 *   {"launch_times": false, "nanoseconds": N, "ops": [{"op": "matvec",
 *    "role": "ffn_down", "kind": "Q4_K", "calls": N, "nanoseconds": N,
 *    "bytes": N}, ...]}
 * "launch_times" true: the pass is resident and the times are host-side
 * launch times, not device times. "bytes": weight (or KV) bytes read. Owned
 * by the context, valid until its next ferrox_context_profile,
 * ferrox_context_profile_reset or free. A context made without `profile` is
 * FERROX_CODE_INVALID_ARGUMENT. */
FERROX_C_API ferrox_code ferrox_context_profile(ferrox_context* ctx, const char** json,
                                                ferrox_call_status* status);
/* Empties the profile (the next ferrox_context_profile counts from here). */
FERROX_C_API ferrox_code ferrox_context_profile_reset(ferrox_context* ctx,
                                                      ferrox_call_status* status);

/* ---- sampling ----------------------------------------------------------- */

typedef struct ferrox_sampler ferrox_sampler;

typedef struct ferrox_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token */
} ferrox_logit_bias;

/* Bounds of the 0.6 members, checked before anything is parsed. */
#define FERROX_GRAMMAR_MAX_BYTES (256u << 10)   /* GBNF text */
#define FERROX_JSON_SCHEMA_MAX_BYTES (1u << 20) /* JSON schema text */
#define FERROX_JSON_SCHEMA_MAX_DEPTH 64u        /* its arrays and objects inside each other */
#define FERROX_JSON_SCHEMA_MAX_MEMBERS 256u     /* members of one of its objects */

/* The chain, in order: the grammar (0.6: when one is given, only the tokens
 * whose text can continue it stay; end of generation only where the text
 * is a whole sentence of it), logit bias, penalties (over the last
 * repeat_last_n accepted tokens: repetition divides positive / multiplies
 * negative logits, then count * frequency + presence is subtracted), then
 * greedy when temperature <= 0, else top-k, temperature, top-p, min-p and a
 * draw from a stream seeded by `seed`. Neutral values switch a stage off. */
typedef struct ferrox_sampler_params {
    uint32_t struct_size;
    float temperature;                         /* default 0.8; <= 0: greedy */
    uint32_t top_k;                            /* default 40; 0: off */
    float top_p;                               /* default 0.95; 1: off */
    float min_p;                               /* default 0.05; 0: off */
    float repeat_penalty;                      /* default 1: off */
    uint32_t repeat_last_n;                    /* default 64 */
    float frequency_penalty, presence_penalty; /* default 0: off */
    uint64_t seed;
    const ferrox_logit_bias* logit_bias; /* copied at ferrox_sampler_new */
    uint32_t n_logit_bias;
    /* \since API 0.6 (appended; a caller built against the shorter struct
     * gets none): constrained decoding (docs/grammar.md,
     * docs/structured-output.md). At most one of `grammar` (GBNF, llama.cpp's
     * format) and `json_schema` (a schema the output must validate against);
     * either needs `model`, whose vocabulary it is matched against (the byte
     * trie of the vocabulary is built once per model, by the first such
     * sampler, and shared). The sampler keeps what it needs: the model may be
     * freed first. The texts are read at ferrox_sampler_new, need no NUL, and
     * a refusal names the place: "grammar:LINE:COL: ..." or the JSON
     * pointer ("json_schema: /properties/age/multipleOf: not enforced"). */
    const ferrox_model* model;
    const char* grammar; /* grammar_len bytes; NULL: none */
    size_t grammar_len;
    const char* json_schema; /* json_schema_len bytes; NULL: none */
    size_t json_schema_len;
} ferrox_sampler_params;

/* Writes the defaults into the first `size` bytes of *params (those the
 * library knows; any beyond are zeroed) and sets struct_size = size.
 * \since API 0.6 */
FERROX_C_API void ferrox_sampler_params_init(ferrox_sampler_params* params, size_t size);
/* Programs built before 0.6 call this one: it writes the 0.1 struct
 * (without the 0.6 members). */
FERROX_C_API void ferrox_sampler_params_default(ferrox_sampler_params* params);
#define ferrox_sampler_params_default(params) ferrox_sampler_params_init((params), sizeof *(params))

/* One sampler per sequence: its own history and random stream. */
FERROX_C_API ferrox_code ferrox_sampler_new(const ferrox_sampler_params* params,
                                            ferrox_sampler** out, ferrox_call_status* status);
FERROX_C_API void ferrox_sampler_free(ferrox_sampler* sampler);
/* Picks a token from n_vocab logits; does not accept it. With a grammar the
 * token is always one the grammar allows; when it allows none,
 * FERROX_CODE_GRAMMAR with the reason (and *token is -1). */
FERROX_C_API ferrox_code ferrox_sampler_sample(ferrox_sampler* sampler, const float* logits,
                                               uint32_t n_vocab, int32_t* token,
                                               ferrox_call_status* status);
/* Adds tokens to the history the penalties read (the prompt, then each
 * token generated). A grammar does not advance over them: with a grammar,
 * give generated tokens to ferrox_sampler_accept_token; this call after a
 * sample (before the next ferrox_sampler_reset) is then
 * FERROX_CODE_INVALID_ARGUMENT, so that a generated token cannot bypass it. */
FERROX_C_API ferrox_code ferrox_sampler_accept(ferrox_sampler* sampler, const int32_t* tokens,
                                               size_t n, ferrox_call_status* status);

/* ---- grammars on the sampler (\since API 0.6) --------------------------- */

/* A generated token: into the history, and the grammar (when any) advances
 * over its text. A token the grammar does not allow is FERROX_CODE_GRAMMAR
 * (the grammar then allows nothing until ferrox_sampler_reset). Without a
 * grammar the same as ferrox_sampler_accept(sampler, &token, 1, status). */
FERROX_C_API ferrox_code ferrox_sampler_accept_token(ferrox_sampler* sampler, int32_t token,
                                                     ferrox_call_status* status);

typedef enum ferrox_grammar_state {
    FERROX_GRAMMAR_NONE = 0,     /* the sampler has no grammar */
    FERROX_GRAMMAR_OPEN = 1,     /* the text so far must go on to match */
    FERROX_GRAMMAR_COMPLETE = 2, /* the text so far matches; it may go on, or end here */
    FERROX_GRAMMAR_ENDED = 3,    /* an end-of-generation token was accepted where it matched */
    FERROX_GRAMMAR_FAILED = 4    /* nothing can continue it; sample / accept_token said why */
} ferrox_grammar_state;

/* Where the sampler's text stands against its grammar: after generation
 * stopped for length, FERROX_GRAMMAR_OPEN means the output is not a whole
 * sentence (not valid JSON for a schema). FERROX_GRAMMAR_NONE for NULL. */
FERROX_C_API ferrox_grammar_state ferrox_sampler_grammar_state(const ferrox_sampler* sampler);

/* Forgets the history and starts the grammar over (a chat's next answer);
 * the random stream goes on. */
FERROX_C_API ferrox_code ferrox_sampler_reset(ferrox_sampler* sampler, ferrox_call_status* status);

/* ---- per-sequence state ------------------------------------------------- */

/* A sequence's cached positions and their K/V rows, to memory: with buf NULL
 * (or too small) *needed gets the size. The bytes are for this model and KV
 * kind only (the header says which; a mismatch is refused on restore). */
FERROX_C_API ferrox_code ferrox_seq_state_save(ferrox_context* ctx, int32_t seq, void* buf,
                                               size_t capacity, size_t* needed,
                                               ferrox_call_status* status);
/* Replaces `seq`'s cells with the saved ones (into free cells; NO_ROOM when
 * too few are free, and then nothing changes). */
FERROX_C_API ferrox_code ferrox_seq_state_restore(ferrox_context* ctx, int32_t seq, const void* buf,
                                                  size_t size, ferrox_call_status* status);
FERROX_C_API ferrox_code ferrox_seq_state_save_file(ferrox_context* ctx, int32_t seq,
                                                    const char* path, ferrox_call_status* status);
FERROX_C_API ferrox_code ferrox_seq_state_restore_file(ferrox_context* ctx, int32_t seq,
                                                       const char* path,
                                                       ferrox_call_status* status);

/* ---- recurrent-state checkpoints (since 0.9) ------------------------------ */

/* A recurrent model's sequence cannot drop its tail (ferrox_model_is_recurrent):
 * a checkpoint is what takes it back. ferrox_seq_checkpoint copies `seq`'s
 * recurrent state (every recurrent layer's convolution window and delta
 * state) as it stands after its last position p - 1, tagged with p and this
 * loaded model, into buf: with buf NULL (or too small) *needed gets the size
 * and the call answers FERROX_CODE_BUFFER_TOO_SMALL. The size is the same for
 * every sequence of the context: ferrox_checkpoint_size, 0 for a model
 * without recurrent layers (whose sequences roll back with ferrox_seq_remove;
 * ferrox_seq_checkpoint then answers FERROX_CODE_INVALID_ARGUMENT, as for an
 * empty sequence). Since 0.9. */
FERROX_C_API size_t ferrox_checkpoint_size(const ferrox_context* ctx);
FERROX_C_API ferrox_code ferrox_seq_checkpoint(ferrox_context* ctx, int32_t seq, void* buf,
                                               size_t capacity, size_t* needed,
                                               ferrox_call_status* status);
/* Puts a checkpoint back: `seq` must hold every position 0..p-1 (the caller
 * vouches that they hold the tokens the checkpoint was taken on); its
 * positions from p on are dropped and its state becomes the checkpoint's, as
 * if it had never gone past p. A checkpoint of another loaded model (even of
 * the same file), a truncated one, or a sequence lacking those positions is
 * refused (FERROX_CODE_INVALID_ARGUMENT) and nothing changes. The same
 * decode calls from p on then give the logits of a run that never went past
 * p, bit for bit; on the CPU backend any calls of more than 16 tokens do,
 * wherever they start (docs/models.md, "Sequence state and checkpoints").
 * Since 0.9. */
FERROX_C_API ferrox_code ferrox_seq_rewind(ferrox_context* ctx, int32_t seq, const void* buf,
                                           size_t size, ferrox_call_status* status);

#ifdef __cplusplus
}
#endif

#endif /* FERROX_FERROX_H */
