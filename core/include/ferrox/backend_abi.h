/* ferrox backend plugin ABI.
 *
 * Plain C so that a plugin built by any compiler, in any language, can be
 * loaded by any ferrox core of the same major ABI version.
 *
 * Rules that keep this header stable for years:
 *  - every struct begins with `struct_size` and `abi_version`, and only ever
 *    grows at its end; a reader never touches a member beyond `struct_size`;
 *  - every entry returns a ferrox_status and, on failure, writes a message into
 *    the caller's ferrox_message; no exception or C++ type crosses the boundary;
 *  - the core calls nothing but ferrox_plugin_describe() before it has checked
 *    the plugin's ABI major version.
 * Each member says the ABI version that added it ("since 1.0").
 */
#ifndef FERROX_BACKEND_ABI_H
#define FERROX_BACKEND_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FERROX_ABI_VERSION_MAJOR 1u
#define FERROX_ABI_VERSION_MINOR 10u
/* Packed as major << 16 | minor. A plugin is loadable when its major equals
 * the core's; a newer minor only appends members the core may ignore. */
#define FERROX_ABI_VERSION ((FERROX_ABI_VERSION_MAJOR << 16) | FERROX_ABI_VERSION_MINOR)
#define FERROX_ABI_MAJOR(v) (((v) >> 16) & 0xffffu)
#define FERROX_ABI_MINOR(v) ((v)&0xffffu)

#if defined(_WIN32)
#define FERROX_PLUGIN_EXPORT __declspec(dllexport)
#else
#define FERROX_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- status ------------------------------------------------------------- */

typedef enum ferrox_status {
    FERROX_OK = 0,
    FERROX_ERR_INVALID_ARGUMENT = 1,
    FERROX_ERR_UNSUPPORTED = 2, /* no kernel for this op and kind */
    FERROX_ERR_NO_DRIVER = 3,   /* driver library absent or too old */
    FERROX_ERR_NO_DEVICE = 4,   /* driver present, no usable device */
    FERROX_ERR_OUT_OF_MEMORY = 5,
    FERROX_ERR_INTERNAL = 6
} ferrox_status;

#define FERROX_MESSAGE_CAPACITY 512
/* Caller-owned buffer a failing entry writes a NUL-terminated reason into. */
typedef struct ferrox_message {
    char text[FERROX_MESSAGE_CAPACITY];
} ferrox_message;

/* ---- quant kinds -------------------------------------------------------- */

/* Values equal GGML type ids, so a GGUF tensor's type is a ferrox_kind as is.
 * The core's kind table (ferrox/quant_kind.h) is the one place that says
 * which of them ferrox knows; gaps are ids ggml retired. */
typedef enum ferrox_kind {
    FERROX_KIND_F32 = 0,
    FERROX_KIND_F16 = 1,
    FERROX_KIND_Q4_0 = 2,
    FERROX_KIND_Q4_1 = 3,
    FERROX_KIND_Q5_0 = 6,
    FERROX_KIND_Q5_1 = 7,
    FERROX_KIND_Q8_0 = 8,
    FERROX_KIND_Q8_1 = 9,
    FERROX_KIND_Q2_K = 10,
    FERROX_KIND_Q3_K = 11,
    FERROX_KIND_Q4_K = 12,
    FERROX_KIND_Q5_K = 13,
    FERROX_KIND_Q6_K = 14,
    FERROX_KIND_Q8_K = 15,
    FERROX_KIND_IQ2_XXS = 16,
    FERROX_KIND_IQ2_XS = 17,
    FERROX_KIND_IQ3_XXS = 18,
    FERROX_KIND_IQ1_S = 19,
    FERROX_KIND_IQ4_NL = 20,
    FERROX_KIND_IQ3_S = 21,
    FERROX_KIND_IQ2_S = 22,
    FERROX_KIND_IQ4_XS = 23,
    FERROX_KIND_IQ1_M = 29,
    FERROX_KIND_BF16 = 30,
    FERROX_KIND_TQ1_0 = 34, /* ternary, five weights a byte */
    FERROX_KIND_TQ2_0 = 35, /* ternary, two bits a weight */
    FERROX_KIND_MXFP4 = 39,
    FERROX_KIND_NVFP4 = 40,   /* e2m1, an unsigned e4m3 scale per 16 */
    FERROX_KIND_Q1_0 = 41,    /* a sign bit a weight, an f16 scale per 128 */
    FERROX_KIND_ID_LIMIT = 42 /* every id above is < this */
} ferrox_kind;

/* ---- ops ---------------------------------------------------------------- */

/* Appended to, never renumbered. */
typedef enum ferrox_op {
    FERROX_OP_MATVEC = 0, /* y = W x, one activation (decode) */
    FERROX_OP_GEMM = 1,   /* Y = X W^T, n activations (prefill) */
    FERROX_OP_RMS_NORM = 2,
    FERROX_OP_ROPE = 3,
    FERROX_OP_ATTENTION = 4,
    FERROX_OP_SWIGLU = 5,
    FERROX_OP_GEGLU = 6,
    FERROX_OP_ADD = 7,
    FERROX_OP_MUL = 8,
    FERROX_OP_SOFTMAX = 9,
    FERROX_OP_GET_ROWS = 10,
    FERROX_OP_CONVERT = 11,      /* since 1.2: f32 rows into a KV cache of some kind */
    FERROX_OP_ADD_RMS_NORM = 12, /* since 1.2: residual add fused with the next RMS norm */
    FERROX_OP_SWIGLU_OAI = 13,   /* since 1.5: gpt-oss's clamped SwiGLU (FERROX_GLU_SWIGLU_OAI) */
    FERROX_OP_DELTA_NET = 14,    /* since 1.10: the gated delta rule (the delta_net entry), F32 */
    FERROX_OP_COUNT = 15         /* grows with the list: treat ops >= your own count as unknown */
} ferrox_op;

/* ---- logging and registry callbacks the core lends to a plugin ---------- */

typedef enum ferrox_log_level {
    FERROX_LOG_TRACE = 0,
    FERROX_LOG_DEBUG = 1,
    FERROX_LOG_INFO = 2,
    FERROX_LOG_WARN = 3,
    FERROX_LOG_ERROR = 4
} ferrox_log_level;

typedef enum ferrox_outcome {
    FERROX_OUTCOME_HIT = 0,      /* the named kernel ran */
    FERROX_OUTCOME_MISS = 1,     /* a slower named fallback ran instead */
    FERROX_OUTCOME_BY_DESIGN = 2 /* deliberately elsewhere; not a violation */
} ferrox_outcome;

typedef struct ferrox_host {
    uint32_t struct_size;
    uint32_t abi_version;
    void* context; /* passed back to every callback */
    /* since 1.0: log through the core's sinks; `message` is copied. */
    void (*log)(void* context, ferrox_log_level level, const char* message);
    /* since 1.0: record a kernel decision the plugin made on its own, e.g. an
     * internal fallback. `detail` is the kernel, fallback or reason name. */
    void (*record_kernel)(void* context, ferrox_op op, ferrox_kind kind, const char* role,
                          ferrox_outcome outcome, const char* detail);
} ferrox_host;

/* ---- options a plugin declares (since 1.6) ------------------------------ */

/* since 1.6: the kind of value a declared option takes, and the normal form
 * create() then receives it in. */
typedef enum ferrox_option_kind {
    FERROX_OPTION_INTEGER = 0, /* a decimal integer in [min, max]; create() gets plain decimal */
    FERROX_OPTION_BYTES = 1,  /* bytes or an IEC size ("8GiB") in [min, max]; create() gets bytes */
    FERROX_OPTION_CHOICE = 2, /* one word of `choices` */
    FERROX_OPTION_BOOL = 3,   /* true or false; create() gets "true" or "false" */
    FERROX_OPTION_TEXT = 4    /* any single value, passed as written */
} ferrox_option_kind;

#define FERROX_MAX_OPTIONS 64u

/* since 1.6: one option a plugin declares. */
typedef struct ferrox_option_spec {
    const char* key;           /* [a-z0-9_]+, at most 64 bytes; not "required" (the core's) */
    ferrox_option_kind kind;   /* a value the core does not know refuses the plugin */
    int64_t min, max;          /* INTEGER, BYTES: the inclusive range (BYTES: min >= 0) */
    const char* choices;       /* CHOICE: the words, '|'-separated ("auto|avx2") */
    const char* default_value; /* in normal form: what create() gets when the file is
                                  silent; NULL: nothing is passed then */
    const char* help;          /* one sentence for docs and `ferrox backends` */
} ferrox_option_spec;

/* ---- describe: pure, callable before the ABI check ---------------------- */

typedef struct ferrox_plugin_info {
    uint32_t struct_size; /* set by the caller: how much the plugin may write */
    uint32_t abi_version; /* set by the plugin: FERROX_ABI_VERSION it was built with */
    const char* name;     /* "cpu", "cuda": must match libferrox_<name>.so */
    const char* version;  /* plugin release, free form */
    /* Comma-separated x86 features the plugin's code needs at minimum
     * ("" = baseline x86-64). The core checks CPUID and the OS-enabled state. */
    const char* isa_required;
    /* Comma-separated driver libraries create() may try to dlopen ("" = none). */
    const char* driver_libraries;
    const char* description;
    /* since 1.6: the options create() accepts, which the core checks a
     * backend section against before create() runs (docs/abi.md). A
     * plugin leaving n_options 0 (as every older plugin does) declares none:
     * its section's scalars reach create() unchecked, as before 1.6. Elements
     * are option_spec_size bytes apart (the plugin's sizeof(ferrox_option_spec)),
     * so ferrox_option_spec may grow at its end. The array and its strings are
     * the plugin's static data: they must stay valid while the library is loaded. */
    uint32_t option_spec_size;
    uint32_t n_options; /* at most FERROX_MAX_OPTIONS */
    const ferrox_option_spec* options;
} ferrox_plugin_info;

/* ---- devices and buffers ------------------------------------------------ */

typedef enum ferrox_device_type { FERROX_DEVICE_CPU = 0, FERROX_DEVICE_GPU = 1 } ferrox_device_type;

typedef struct ferrox_device_info {
    uint32_t struct_size;
    uint32_t abi_version;
    ferrox_device_type type;
    char name[128];
    uint64_t memory_total; /* bytes */
    uint64_t memory_free;  /* bytes, at the time of the call */
} ferrox_device_info;

/* Backend-owned memory; opaque to the core. */
typedef struct ferrox_buffer ferrox_buffer;

/* A weight the backend has prepared once (uploaded, repacked) and keeps for
 * as long as the core holds the handle. Caches key on this handle, never on a
 * host address, which a later mapping may reuse. */
typedef struct ferrox_weight ferrox_weight;

typedef struct ferrox_weight_desc {
    uint32_t struct_size;
    uint32_t abi_version;
    ferrox_kind kind;
    uint64_t rows;
    uint64_t cols;      /* elements per row; a multiple of the kind's block */
    uint64_t row_bytes; /* bytes per row in `data` */
    const void* data;   /* rows * row_bytes host bytes, valid for the call only
                           unless the backend wraps them (see wrap_host) */
} ferrox_weight_desc;

typedef struct ferrox_kernel_info {
    uint32_t struct_size;
    uint32_t abi_version;
    /* The kernel that runs for this op and kind, or NULL when there is none. */
    const char* kernel;
    /* With kernel == NULL: why the op is deliberately left to another
     * backend (not a registry violation), or NULL for a plain miss. */
    const char* by_design;
} ferrox_kernel_info;

typedef struct ferrox_option {
    const char* key;   /* e.g. "threads", "device" */
    const char* value; /* as written in the YAML file */
} ferrox_option;

/* since 1.1: causal attention over host memory for a run of consecutive
 * positions, the KV rows of those positions already written to the cache.
 * Query row i sits at position pos0 + i and sees cache positions
 * [first, pos0 + i] where first = 0, or with window > 0 the last `window`
 * positions (itself included). Query head h reads KV head h / (n_head /
 * n_head_kv) (grouped-query attention). For each head:
 * out = softmax(scale * q . k) . v, the softmax max-subtracted. The cache
 * holds `kv_kind` elements (F32 or F16; since the quantized KV cache also
 * Q8_0 or Q4_0: each head's row ggml blocks of 32, head dims multiples of 32,
 * for a plugin that names a kernel for that kind); q and out are always f32.
 * Since 1.8 the values may hold another kind than the keys (value_kind). */
typedef struct ferrox_attention_desc {
    uint32_t struct_size;
    uint32_t abi_version;
    uint32_t n_query; /* query rows */
    uint32_t pos0;    /* position of query row 0 */
    uint32_t window;  /* 0: all earlier positions; else the sliding window */
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale;
    /* FERROX_KIND_F32, F16, Q8_0 or Q4_0 (see above): the keys' kind, and
     * the values' too unless value_kind (since 1.8) says otherwise. */
    ferrox_kind kv_kind;
    const float* q;     /* [n_query][n_head * head_dim_k] */
    const void* keys;   /* [pos0 + n_query][n_head_kv * head_dim_k] of kv_kind */
    const void* values; /* [pos0 + n_query][n_head_kv * head_dim_v] of value_kind */
    float* out;         /* [n_query][n_head * head_dim_v] */
    /* since 1.4: soft-capped scores (gemma2). With softcap > 0 each score
     * s = scale * q . k becomes tanh(s * (1 / softcap)) * softcap before the
     * softmax; 0: not capped. A plugin reads it only when struct_size covers
     * it (a 1.3 core's descriptor ends before it: no cap). The core never
     * hands a cap to a plugin whose abi_version is older than 1.4: it runs
     * such attention itself, recorded by design. */
    float softcap;
    /* since 1.5: attention sinks (gpt-oss), n_head floats in host memory, or
     * NULL for none. Head h's sink is one more logit in its softmax, with no
     * value: with m = max(max_j s_j, sinks[h]),
     *   out = sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sinks[h] - m)).
     * Read by the host `attention` entry only when struct_size covers it;
     * attention_resident ignores it (a pointer member). The core never hands
     * sinks to a plugin older than 1.5. */
    const float* sinks;
    /* since 1.7: non-causal (bidirectional) attention, as embedding encoders
     * run it. Query row i sees positions up to min(pos0 + i + lookahead,
     * pos0 + n_query - 1) instead of pos0 + i, and from the same first one
     * (with window > 0: the last `window` positions up to its own, itself
     * included); 0: causal. UINT32_MAX: every position of the call. Read
     * only when struct_size covers it; the core never hands a lookahead to
     * a plugin older than 1.7 (it runs such attention itself, recorded by
     * design), and attention_resident is never handed one. */
    uint32_t lookahead;
    /* since 1.8: the values' kind (one of kv_kind's), which may differ from
     * the keys' (llama.cpp's -ctk q8_0 -ctv f16). A descriptor too short to
     * hold it has values of kv_kind. The core hands a value_kind other than
     * kv_kind only to a plugin whose attention_kinds entry names a kernel
     * for that pair (its host and resident entries alike); any other plugin
     * is never told one, and the core runs such attention itself, recorded
     * by design. */
    ferrox_kind value_kind;
} ferrox_attention_desc;

/* since 1.2: a run of f32 values (or, for a KV cache, values of its kind)
 * inside a buffer the backend allocated with buffer_alloc; `offset` is in
 * bytes from the buffer's start. */
typedef struct ferrox_tensor {
    ferrox_buffer* buffer;
    uint64_t offset;
} ferrox_tensor;

/* since 1.3: attention for a batch of query rows of any sequences over a
 * resident KV cache of cells (the attention_cells entry). The cache is
 * `n_cells` rows of keys and values; `cell_index` (n_index uint32 cells, each
 * < n_cells) lists cells, and `spans` (n_query pairs of uint32 {begin, end},
 * begin < end <= n_index) gives each query row its part of that list: row i
 * attends over cells cell_index[begin_i], ..., cell_index[end_i - 1], in that
 * order. The core lists each sequence's cells in position order and cuts
 * each row's span by its sequence, its position (causal mask) and the sliding
 * window, so the backend needs no positions: a row sees exactly the cells
 * its span names, never another sequence's. Rows of one sequence share one
 * list; sequences sharing a prefix list the same cells. For each row and head:
 * out = softmax(scale * q . k) . v over the span, max-subtracted, query head h
 * reading KV head h / (n_head / n_head_kv). A backend should walk a span in
 * the same order whatever else the call holds, so that a sequence's result
 * does not depend on the rest of the batch. */
typedef struct ferrox_attention_cells_desc {
    uint32_t struct_size;
    uint32_t abi_version;
    uint32_t n_query; /* query rows (and span pairs) */
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale;
    ferrox_kind kv_kind; /* the keys' kind (and the values' before 1.8) */
    uint32_t n_cells;    /* rows of keys and values */
    uint32_t n_index;    /* entries of cell_index */
    uint32_t max_span;   /* the longest span (end - begin) of any row: sizes the work */
    float softcap;       /* since 1.4: as ferrox_attention_desc's */
    /* since 1.5: attention sinks as ferrox_attention_desc's, n_head f32 in a
     * resident buffer; buffer NULL for none. */
    ferrox_tensor sinks;
    /* since 1.8: the values' kind, as ferrox_attention_desc's value_kind. */
    ferrox_kind value_kind;
} ferrox_attention_cells_desc;

/* since 1.2: the GLU variants of the `glu` entry. */
typedef enum ferrox_glu_kind {
    FERROX_GLU_SWIGLU = 0, /* gate = silu(gate) * up */
    FERROX_GLU_GEGLU = 1,  /* gate = gelu_tanh(gate) * up */
    /* since 1.5 (gpt-oss): with g = min(gate, 7) and u = clamp(up, -7, 7),
     * gate = g / (1 + exp(-1.702 g)) * (u + 1). Named by SWIGLU_OAI. */
    FERROX_GLU_SWIGLU_OAI = 2
} ferrox_glu_kind;

/* since 1.9: one product of the matvec_batch entry: y[rows] = W x[cols]. */
typedef struct ferrox_matvec_item {
    const ferrox_weight* weight;
    const float* x; /* cols floats; items may share one x */
    float* y;       /* rows floats; overlaps no other item's x or y */
} ferrox_matvec_item;

/* since 1.10: the gated delta rule (Gated DeltaNet layers: qwen35, qwen35moe,
 * qwen3next) over n_rows consecutive tokens of one sequence, every value
 * head, on host memory. Value head h (S = head_dim) reads key head
 * kh = grouped ? h / (n_v_heads / n_k_heads) : h % n_k_heads; per row r in
 * order, with q, k the row's key head kh and v its value head h:
 *   g = exp(softplus(alpha[r][h] + dt_bias[h]) * a[h]), b = sigmoid(beta[r][h]),
 *   for each j < S, M_j = state[h][j] (S floats):
 *     M_j *= g;  d = (v[j] - M_j . k) * b;  M_j += d * k;
 *     out[r][h * S + j] = (M_j . q) * (1 / sqrt(S)).
 * softplus(x) is x past 20. The state is updated in place. Heads are
 * independent: a backend may run them on any threads. The core's fallback
 * and the CPU plugin run one shared loop (docs/abi.md, 1.10), so they agree
 * to the bit; another backend's dot products may round differently. */
typedef struct ferrox_delta_net_desc {
    uint32_t struct_size;
    uint32_t abi_version;
    uint32_t n_rows;      /* tokens, in position order */
    uint32_t n_k_heads;   /* heads of q and k */
    uint32_t n_v_heads;   /* heads of v, the state and out: a multiple of n_k_heads */
    uint32_t head_dim;    /* S: every q, k and v head's size */
    uint32_t grouped;     /* 0: value head h reads key head h % n_k_heads (tiled) */
    uint64_t qkv_stride;  /* floats from one row of qkv to the next, >= (2 n_k + n_v) S */
    uint64_t out_stride;  /* floats from one row of out to the next, >= n_v_heads S */
    const float* qkv;     /* [n_rows][qkv_stride]: q heads, k heads (L2-normed), v heads */
    const float* beta;    /* [n_rows][n_v_heads], before the sigmoid */
    const float* alpha;   /* [n_rows][n_v_heads], before the softplus */
    const float* dt_bias; /* [n_v_heads] */
    const float* a;       /* [n_v_heads]: -exp(A_log), as the files hold ssm_a */
    float* state;         /* [n_v_heads][S][S], read and written */
    float* out;           /* [n_rows][out_stride] */
} ferrox_delta_net_desc;

/* ---- the backend: a table of entries over the plugin's own context ------ */

typedef struct ferrox_backend ferrox_backend;
struct ferrox_backend {
    uint32_t struct_size;
    uint32_t abi_version;
    void* self; /* the plugin's context */

    /* since 1.0 ---------------------------------------------------------- */
    void (*destroy)(ferrox_backend* backend);

    uint32_t (*device_count)(const ferrox_backend* backend);
    ferrox_status (*device_info)(const ferrox_backend* backend, uint32_t device,
                                 ferrox_device_info* out, ferrox_message* error);

    /* The capability table: which kernel runs `op` on `kind` weights. Pure;
     * the core's registry and dispatcher both read it, so a prediction cannot
     * drift from a decision. */
    void (*kernel_for)(const ferrox_backend* backend, ferrox_op op, ferrox_kind kind,
                       ferrox_kernel_info* out);
    /* Named fallbacks: what this backend does itself when it lacks a kernel.
     * `gemm_fallback` runs a GEMM for a kind that has a MATVEC kernel but no
     * GEMM one (e.g. "CUDA per-position matvec"); NULL = hand it on.
     * `matvec_fallback` runs a MATVEC for a kind without a kernel
     * (e.g. "f32 dequant-dot"); NULL = hand it on to the next backend. */
    const char* gemm_fallback;
    const char* matvec_fallback;

    /* Buffers: alloc/free/upload/download, and wrap host memory without a
     * copy (may fail with FERROX_ERR_UNSUPPORTED). */
    ferrox_status (*buffer_alloc)(ferrox_backend* backend, uint64_t bytes, ferrox_buffer** out,
                                  ferrox_message* error);
    void (*buffer_free)(ferrox_backend* backend, ferrox_buffer* buffer);
    ferrox_status (*buffer_upload)(ferrox_backend* backend, ferrox_buffer* buffer, uint64_t offset,
                                   const void* src, uint64_t bytes, ferrox_message* error);
    ferrox_status (*buffer_download)(ferrox_backend* backend, const ferrox_buffer* buffer,
                                     uint64_t offset, void* dst, uint64_t bytes,
                                     ferrox_message* error);
    ferrox_status (*buffer_wrap_host)(ferrox_backend* backend, void* host, uint64_t bytes,
                                      ferrox_buffer** out, ferrox_message* error);

    /* Weights: prepared once, used by every call below, released by the core.
     * `borrow` != 0 means the host bytes outlive the weight handle (an mmap
     * the core keeps open), so the backend may use them in place. */
    ferrox_status (*weight_prepare)(ferrox_backend* backend, const ferrox_weight_desc* desc,
                                    int borrow, ferrox_weight** out, ferrox_message* error);
    void (*weight_release)(ferrox_backend* backend, ferrox_weight* weight);

    /* y[rows] = W x[cols]. Host activations in, host results out. */
    ferrox_status (*matvec)(ferrox_backend* backend, const ferrox_weight* weight, const float* x,
                            float* y, ferrox_message* error);
    /* Y[n][rows] = X[n][cols] W^T. */
    ferrox_status (*gemm)(ferrox_backend* backend, const ferrox_weight* weight, const float* x,
                          uint64_t n, float* y, ferrox_message* error);
    /* since 1.1 ---------------------------------------------------------- */
    /* Attention as described by ferrox_attention_desc, on host memory; the
     * backend names its kernel in kernel_for(FERROX_OP_ATTENTION, kv_kind).
     * NULL (or a 1.0 plugin): the core runs it itself. */
    ferrox_status (*attention)(ferrox_backend* backend, const ferrox_attention_desc* desc,
                               ferrox_message* error);

    /* since 1.2: resident decoding ----------------------------------------
     * A backend that fills every entry below keeps a whole forward pass in
     * its own buffers: activations, KV cache, norm weights and biases. The
     * core uploads token ids and RoPE angles and downloads logits (and MoE
     * router scores); nothing else crosses per step. Entries are executed in
     * call order (one stream) and may return before the work has run;
     * buffer_download waits for everything called before it, and reports an
     * asynchronous failure of earlier work. All tensors are f32 unless a
     * kind is given. Each entry's kernel is named by kernel_for():
     *   project      MATVEC (n == 1) or GEMM (n > 1), weight kind
     *   rms_norm     RMS_NORM, F32      rope    ROPE, F32
     *   add          ADD, F32           glu     SWIGLU, GEGLU or SWIGLU_OAI, F32
     *   convert      CONVERT, dst_kind  get_rows GET_ROWS, weight kind
     *   attention_resident  ATTENTION, kv_kind
     *   attention_cells     ATTENTION, kv_kind (since 1.3)
     * A NULL entry (or a table too short to hold it) means the core keeps
     * activations in host memory and uses the 1.0/1.1 entries. */

    /* Y[n][rows] = X[n][cols] W^T. */
    ferrox_status (*project)(ferrox_backend* backend, const ferrox_weight* weight, ferrox_tensor x,
                             uint64_t n, ferrox_tensor y, ferrox_message* error);
    /* For each of `rows` rows of `dim`: y = x / sqrt(mean(x^2) + eps) * gamma,
     * gamma holding `dim` values; y may be x. */
    ferrox_status (*rms_norm)(ferrox_backend* backend, ferrox_tensor x, ferrox_tensor gamma,
                              uint64_t rows, uint32_t dim, float eps, ferrox_tensor y,
                              ferrox_message* error);
    /* Rotates x = [n_pos][n_heads][head_dim] in place with the angles of
     * position p: cos, sin = [n_pos][head_dim / 2]. neox == 0 rotates pairs
     * (2i, 2i + 1), neox != 0 pairs (i, i + head_dim / 2), both by angle i:
     * (a, b) -> (a cos - b sin, a sin + b cos). */
    ferrox_status (*rope)(ferrox_backend* backend, ferrox_tensor x, ferrox_tensor cos,
                          ferrox_tensor sin, uint32_t n_pos, uint32_t n_heads, uint32_t head_dim,
                          uint32_t neox, ferrox_message* error);
    /* dst[r][i] += alpha * src[r * src_stride + i] for r < rows, i < dim;
     * src_stride (in elements) 0 adds the same row to every row (a bias). */
    ferrox_status (*add)(ferrox_backend* backend, ferrox_tensor dst, ferrox_tensor src,
                         uint64_t rows, uint32_t dim, uint64_t src_stride, float alpha,
                         ferrox_message* error);
    /* gate[i] = act(gate[i]) * up[i] for i < count. GEGLU rounds like
     * llama.cpp's CPU backend where it can (gelu of the f16-rounded input). */
    ferrox_status (*glu)(ferrox_backend* backend, ferrox_glu_kind kind, ferrox_tensor gate,
                         ferrox_tensor up, uint64_t count, ferrox_message* error);
    /* dst[i] = src[i] (f32) stored as dst_kind (F32, or F16 round-to-nearest-even). */
    ferrox_status (*convert)(ferrox_backend* backend, ferrox_tensor src, ferrox_tensor dst,
                             ferrox_kind dst_kind, uint64_t count, ferrox_message* error);
    /* out[i] = scale * dequantized row ids[i] of `weight`, for i < n; `ids`
     * is host memory, valid for the call only; the backend rejects an id
     * outside [0, rows). */
    ferrox_status (*get_rows)(ferrox_backend* backend, const ferrox_weight* weight,
                              const int32_t* ids, uint64_t n, float scale, ferrox_tensor out,
                              ferrox_message* error);
    /* Attention as ferrox_attention_desc describes (its pointer members are
     * ignored) over resident q, cache and output tensors; keys and values
     * hold kv_kind elements. */
    ferrox_status (*attention_resident)(ferrox_backend* backend, const ferrox_attention_desc* desc,
                                        ferrox_tensor q, ferrox_tensor keys, ferrox_tensor values,
                                        ferrox_tensor out, ferrox_message* error);
    /* Optional: `add` then `rms_norm` in one pass, as each layer's residual
     * add is followed by the next norm: dst[r][i] += alpha * src[r * src_stride
     * + i], then y[r] = rms_norm(dst[r]) * gamma. y must not overlap dst or
     * src. Named by kernel_for(FERROX_OP_ADD_RMS_NORM, F32); NULL: the core
     * calls add and rms_norm. */
    ferrox_status (*add_rms_norm)(ferrox_backend* backend, ferrox_tensor dst, ferrox_tensor src,
                                  uint64_t src_stride, float alpha, ferrox_tensor gamma,
                                  uint64_t rows, uint32_t dim, float eps, ferrox_tensor y,
                                  ferrox_message* error);

    /* since 1.3: many sequences per resident context --------------------- */
    /* Attention as ferrox_attention_cells_desc describes over resident q
     * [n_query][n_head * head_dim_k], keys and values [n_cells][n_head_kv *
     * head_dim_k|v] of kv_kind, the uint32 tensors cell_index [n_index] and
     * spans [n_query][2], into out [n_query][n_head * head_dim_v]. The core
     * uploads cell_index and spans with buffer_upload before the call. A
     * backend that cannot check the indices before it runs (they live on
     * its device) must still never read outside keys and values: a cell >=
     * n_cells or a span past n_index is skipped, not followed. With this
     * entry the core runs every resident attention through it, one call per
     * layer for the whole batch, and a context may hold many sequences;
     * NULL (a 1.2 plugin): attention_resident, one sequence per context. */
    ferrox_status (*attention_cells)(ferrox_backend* backend,
                                     const ferrox_attention_cells_desc* desc, ferrox_tensor q,
                                     ferrox_tensor keys, ferrox_tensor values,
                                     ferrox_tensor cell_index, ferrox_tensor spans,
                                     ferrox_tensor out, ferrox_message* error);

    /* since 1.8: mixed K/V kinds --------------------------------------------
     * The capability table for attention whose keys hold `key_kind` and
     * values `value_kind` (a descriptor's kv_kind and value_kind): the
     * kernel's name, or NULL with by_design saying why this backend leaves
     * the pair to another. Pure, like kernel_for; for key_kind == value_kind
     * it must agree with kernel_for(FERROX_OP_ATTENTION, key_kind). Covers
     * every attention entry the backend fills. NULL (or an older plugin):
     * the backend attends only over K and V of one kind. */
    void (*attention_kinds)(const ferrox_backend* backend, ferrox_kind key_kind,
                            ferrox_kind value_kind, ferrox_kernel_info* out);

    /* since 1.9: independent matvecs in one dispatch ----------------------
     * Each item's y = W x exactly as the matvec entry computes it, to the
     * bit, whatever else the call holds (the items may name different
     * weights of different kinds); the backend may run them in any order
     * and split their rows across its threads as one piece of work, which
     * is why it exists: a MoE layer's many small expert products pay one
     * wake-up of the threads, not one each. Host memory, like matvec.
     * NULL (or an older plugin): the core calls matvec once per item. */
    ferrox_status (*matvec_batch)(ferrox_backend* backend, const ferrox_matvec_item* items,
                                  uint64_t n_items, ferrox_message* error);

    /* since 1.10: the gated delta rule as ferrox_delta_net_desc describes,
     * on host memory; named by kernel_for(FERROX_OP_DELTA_NET, F32). NULL
     * (or an older plugin): the next backend, else the core's own loop. */
    ferrox_status (*delta_net)(ferrox_backend* backend, const ferrox_delta_net_desc* desc,
                               ferrox_message* error);
};

/* ---- the two exported entries ------------------------------------------- */

/* Side-effect free: fills `info` up to info->struct_size. Opens no library,
 * touches no device. */
typedef ferrox_status (*ferrox_plugin_describe_fn)(ferrox_plugin_info* info);
/* Creates a backend. Called only after the ABI major matched. */
typedef ferrox_status (*ferrox_plugin_create_fn)(const ferrox_host* host,
                                                 const ferrox_option* options, size_t n_options,
                                                 ferrox_backend** out, ferrox_message* error);

#define FERROX_PLUGIN_DESCRIBE_SYMBOL "ferrox_plugin_describe"
#define FERROX_PLUGIN_CREATE_SYMBOL "ferrox_plugin_create"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FERROX_BACKEND_ABI_H */
