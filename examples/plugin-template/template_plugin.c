/* ferrox plugin template: the smallest useful backend, in plain C.
 *
 * It has one device (the host CPU) and one kernel: MATVEC on F32 weights.
 * Everything else it declines, so ferrox hands that work to the next backend
 * in backends.order. Copy this file, rename "template" everywhere (the file
 * must be libferrox_<name>.so), and grow the capability table.
 */
#include <ferrox/backend_abi.h>
#include <ferrox/plugin_note.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEMPLATE_NAME "template"
#define TEMPLATE_VERSION "0.1.0"
#define TEMPLATE_MATVEC_KERNEL "template f32 row-dot"

/* ---- the plugin's context and weights ---------------------------------- */

typedef struct template_backend {
    ferrox_backend table; /* first member: the core sees only this */
    ferrox_host host;     /* zeroed when the core lent none */
} template_backend;

struct ferrox_weight {
    uint64_t rows;
    uint64_t cols;
    const float* values; /* borrowed from the core, or `owned` */
    float* owned;
};

static void write_message(ferrox_message* error, const char* text) {
    if (error) snprintf(error->text, sizeof error->text, "template: %s", text);
}

static void log_info(const template_backend* self, const char* text) {
    if (self->host.log) self->host.log(self->host.context, FERROX_LOG_INFO, text);
}

/* ---- devices ------------------------------------------------------------ */

static uint32_t template_device_count(const ferrox_backend* backend) {
    (void)backend;
    return 1;
}

static ferrox_status template_device_info(const ferrox_backend* backend, uint32_t device,
                                          ferrox_device_info* out, ferrox_message* error) {
    (void)backend;
    if (device != 0 || !out || out->struct_size < sizeof *out) {
        write_message(error, "device_info: only device 0 exists");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    out->abi_version = FERROX_ABI_VERSION;
    out->type = FERROX_DEVICE_CPU;
    snprintf(out->name, sizeof out->name, "host CPU (template plugin)");
    out->memory_total = 0; /* unknown: the plugin uses host memory */
    out->memory_free = 0;
    return FERROX_OK;
}

/* ---- capability table --------------------------------------------------- */

static void template_kernel_for(const ferrox_backend* backend, ferrox_op op, ferrox_kind kind,
                                ferrox_kernel_info* out) {
    (void)backend;
    if (!out || out->struct_size < sizeof *out) return;
    out->abi_version = FERROX_ABI_VERSION;
    out->kernel =
        (op == FERROX_OP_MATVEC && kind == FERROX_KIND_F32) ? TEMPLATE_MATVEC_KERNEL : NULL;
    out->by_design = NULL; /* anything else is a plain miss: the next backend runs it */
}

/* ---- buffers: this backend keeps everything in host memory -------------- */

static ferrox_status template_buffer_unsupported(ferrox_message* error) {
    write_message(error, "device buffers are not supported; weights live in host memory");
    return FERROX_ERR_UNSUPPORTED;
}
static ferrox_status template_buffer_alloc(ferrox_backend* b, uint64_t bytes, ferrox_buffer** out,
                                           ferrox_message* error) {
    (void)b, (void)bytes, (void)out;
    return template_buffer_unsupported(error);
}
static void template_buffer_free(ferrox_backend* b, ferrox_buffer* buffer) {
    (void)b, (void)buffer;
}
static ferrox_status template_buffer_upload(ferrox_backend* b, ferrox_buffer* buffer,
                                            uint64_t offset, const void* src, uint64_t bytes,
                                            ferrox_message* error) {
    (void)b, (void)buffer, (void)offset, (void)src, (void)bytes;
    return template_buffer_unsupported(error);
}
static ferrox_status template_buffer_download(ferrox_backend* b, const ferrox_buffer* buffer,
                                              uint64_t offset, void* dst, uint64_t bytes,
                                              ferrox_message* error) {
    (void)b, (void)buffer, (void)offset, (void)dst, (void)bytes;
    return template_buffer_unsupported(error);
}
static ferrox_status template_buffer_wrap_host(ferrox_backend* b, void* host, uint64_t bytes,
                                               ferrox_buffer** out, ferrox_message* error) {
    (void)b, (void)host, (void)bytes, (void)out;
    return template_buffer_unsupported(error);
}

/* ---- weights ------------------------------------------------------------ */

static ferrox_status template_weight_prepare(ferrox_backend* backend,
                                             const ferrox_weight_desc* desc, int borrow,
                                             ferrox_weight** out, ferrox_message* error) {
    (void)backend;
    if (!desc || !out || desc->struct_size < sizeof *desc || !desc->data) {
        write_message(error, "weight_prepare: missing descriptor or data");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    if (desc->kind != FERROX_KIND_F32) {
        write_message(error, "weight_prepare: only F32 weights are supported");
        return FERROX_ERR_UNSUPPORTED;
    }
    if (desc->row_bytes != desc->cols * sizeof(float)) {
        write_message(error, "weight_prepare: F32 rows must be packed (row_bytes = cols * 4)");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    ferrox_weight* weight = calloc(1, sizeof *weight);
    if (!weight) {
        write_message(error, "weight_prepare: out of host memory");
        return FERROX_ERR_OUT_OF_MEMORY;
    }
    weight->rows = desc->rows;
    weight->cols = desc->cols;
    if (borrow) {
        weight->values = desc->data; /* the core keeps the bytes alive for us */
    } else {
        const size_t bytes = (size_t)(desc->rows * desc->row_bytes);
        weight->owned = malloc(bytes ? bytes : 1);
        if (!weight->owned) {
            free(weight);
            write_message(error, "weight_prepare: out of host memory");
            return FERROX_ERR_OUT_OF_MEMORY;
        }
        memcpy(weight->owned, desc->data, bytes);
        weight->values = weight->owned;
    }
    *out = weight;
    return FERROX_OK;
}

static void template_weight_release(ferrox_backend* backend, ferrox_weight* weight) {
    (void)backend;
    if (!weight) return;
    free(weight->owned);
    free(weight);
}

/* ---- compute ------------------------------------------------------------ */

/* y[r] = sum_c W[r][c] x[c], accumulated in double for a stable reference. */
static ferrox_status template_matvec(ferrox_backend* backend, const ferrox_weight* weight,
                                     const float* x, float* y, ferrox_message* error) {
    (void)backend;
    if (!weight || !x || !y) {
        write_message(error, "matvec: null weight, input or output");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    for (uint64_t r = 0; r < weight->rows; ++r) {
        const float* row = weight->values + r * weight->cols;
        double sum = 0.0;
        for (uint64_t c = 0; c < weight->cols; ++c) sum += (double)row[c] * (double)x[c];
        y[r] = (float)sum;
    }
    return FERROX_OK;
}

static ferrox_status template_gemm(ferrox_backend* backend, const ferrox_weight* weight,
                                   const float* x, uint64_t n, float* y, ferrox_message* error) {
    (void)backend, (void)weight, (void)x, (void)n, (void)y;
    write_message(error, "gemm: no kernel; the core hands GEMM to the next backend");
    return FERROX_ERR_UNSUPPORTED;
}

static void template_destroy(ferrox_backend* backend) {
    free(backend); /* `table` is the first member: same address as the context */
}

/* ---- the two exported entries ------------------------------------------- */

#define TEMPLATE_DESCRIPTION \
    "Template backend: F32 MATVEC on the host CPU (example third-party plugin)"

/* The same metadata as an ELF note, which the core reads from the file and
 * checks (ABI, name, ISA) before it loads it: no code of a plugin built for
 * another ABI or a CPU feature this host lacks ever runs. Baseline x86-64,
 * no driver library. */
FERROX_PLUGIN_NOTE(TEMPLATE_NAME, TEMPLATE_VERSION, "", "", TEMPLATE_DESCRIPTION);

FERROX_PLUGIN_EXPORT ferrox_status ferrox_plugin_describe(ferrox_plugin_info* info) {
    if (!info || info->struct_size < sizeof *info) return FERROX_ERR_INVALID_ARGUMENT;
    info->abi_version = FERROX_ABI_VERSION;
    info->name = TEMPLATE_NAME;
    info->version = TEMPLATE_VERSION;
    info->isa_required = "";     /* baseline x86-64 */
    info->driver_libraries = ""; /* opens no library */
    info->description = TEMPLATE_DESCRIPTION;
    return FERROX_OK;
}

FERROX_PLUGIN_EXPORT ferrox_status ferrox_plugin_create(const ferrox_host* host,
                                                        const ferrox_option* options,
                                                        size_t n_options, ferrox_backend** out,
                                                        ferrox_message* error) {
    if (!out) {
        write_message(error, "create: null output");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    template_backend* self = calloc(1, sizeof *self);
    if (!self) {
        write_message(error, "create: out of host memory");
        return FERROX_ERR_OUT_OF_MEMORY;
    }
    if (host && host->struct_size >= sizeof *host) self->host = *host;

    ferrox_backend* t = &self->table;
    t->struct_size = sizeof *t;
    t->abi_version = FERROX_ABI_VERSION;
    t->self = self;
    t->destroy = template_destroy;
    t->device_count = template_device_count;
    t->device_info = template_device_info;
    t->kernel_for = template_kernel_for;
    t->gemm_fallback = NULL;   /* hand GEMM on */
    t->matvec_fallback = NULL; /* hand non-F32 MATVEC on */
    t->buffer_alloc = template_buffer_alloc;
    t->buffer_free = template_buffer_free;
    t->buffer_upload = template_buffer_upload;
    t->buffer_download = template_buffer_download;
    t->buffer_wrap_host = template_buffer_wrap_host;
    t->weight_prepare = template_weight_prepare;
    t->weight_release = template_weight_release;
    t->matvec = template_matvec;
    t->gemm = template_gemm;

    /* Options are the plugin's section of ferrox.yaml, as text. This one has
     * none of its own and only reports what it was given. */
    for (size_t i = 0; i < n_options; ++i) {
        char line[256];
        snprintf(line, sizeof line, "template: ignoring option %s=%s", options[i].key,
                 options[i].value);
        log_info(self, line);
    }
    *out = t;
    return FERROX_OK;
}
