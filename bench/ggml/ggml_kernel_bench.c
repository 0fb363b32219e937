/* ggml's own MATVEC / GEMM per quant kind, timed the way `ferrox bench`
 * times ferrox's, so bench/cpu_vs_ggml.py can put both in one run.
 *
 * Built at bench time against the ggml that the llama-cpp-python wheel ships
 * (headers from its sdist); no ggml code lives in this repository. Weights go
 * into ggml's CPU "extra" (repack) buffer type when it takes them, as
 * llama.cpp does, else into plain CPU memory; the JSON says which.
 *
 * usage: ggml_kernel_bench KIND ROWS COLS N THREADS REPS ROTATE_MIB
 *   ROTATE_MIB 0: one weight copy (hot); else distinct copies over that many MiB.
 * prints one JSON object. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static int find_type(const char* name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char* n = ggml_type_name((enum ggml_type)t);
        if (n && strcasecmp(n, name) == 0) return t;
    }
    return -1;
}

/* A standard normal by Box-Muller from a 64-bit LCG: seeded, portable. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float gaussian(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    const double u1 = ((double)(rng_state >> 11) + 1.0) / 9007199254740993.0;
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    const double u2 = (double)(rng_state >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void quiet(enum ggml_log_level level, const char* text, void* user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char** argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s KIND ROWS COLS N THREADS REPS ROTATE_MIB\n", argv[0]);
        return 2;
    }
    const int type = find_type(argv[1]);
    const int64_t rows = atoll(argv[2]), cols = atoll(argv[3]), n = atoll(argv[4]);
    const int threads = atoi(argv[5]), reps = atoi(argv[6]);
    const int64_t rotate_mib = atoll(argv[7]);
    if (type < 0 || rows <= 0 || cols <= 0 || n <= 0 || threads <= 0 || reps <= 0) {
        fprintf(stderr, "bad arguments (kind %s known: %s)\n", argv[1], type < 0 ? "no" : "yes");
        return 2;
    }
    if (ggml_quantize_requires_imatrix((enum ggml_type)type)) {
        printf(
            "{\"kind\": \"%s\", \"skipped\": \"ggml needs an importance matrix to quantize it\"}\n",
            argv[1]);
        return 0;
    }

    ggml_log_set(quiet, NULL);  // repacking logs a line per tensor
    ggml_backend_t backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(backend, threads);
    ggml_backend_dev_t dev = ggml_backend_get_device(backend);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t get_extra =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
            reg, "ggml_backend_dev_get_extra_bufts");

    const size_t weight_bytes = ggml_row_size((enum ggml_type)type, cols) * (size_t)rows;
    int copies = 1;
    if (rotate_mib > 0) {
        copies = (int)(((size_t)rotate_mib << 20) / weight_bytes) + 1;
        if (copies < 2) copies = 2;
    }

    /* Quantized random weights, one set of bytes shared by every copy. */
    float* values = malloc(sizeof(float) * (size_t)(rows * cols));
    void* quantized = malloc(weight_bytes);
    for (int64_t i = 0; i < rows * cols; ++i) values[i] = gaussian();
    ggml_quantize_chunk((enum ggml_type)type, values, quantized, 0, rows, cols, NULL);
    free(values);

    struct ggml_init_params meta = {
        ggml_tensor_overhead() * (size_t)(2 * copies + 8) + ggml_graph_overhead() * (size_t)copies,
        NULL, true};
    struct ggml_context* wctx = ggml_init(meta);
    struct ggml_context* actx = ggml_init(meta);
    struct ggml_tensor** w = malloc(sizeof *w * (size_t)copies);
    struct ggml_tensor** y = malloc(sizeof *y * (size_t)copies);
    for (int c = 0; c < copies; ++c)
        w[c] = ggml_new_tensor_2d(wctx, (enum ggml_type)type, cols, rows);
    struct ggml_tensor* x = ggml_new_tensor_2d(actx, GGML_TYPE_F32, cols, n);
    for (int c = 0; c < copies; ++c) y[c] = ggml_mul_mat(actx, w[c], x);

    /* The first extra buffer type that accepts this matmul (the repack one). */
    ggml_backend_buffer_t wbuf = NULL;
    int repacked = 0;
    ggml_backend_buffer_type_t* extra = get_extra ? get_extra(dev) : NULL;
    for (; extra && *extra && !wbuf; ++extra) {
        if (!ggml_backend_dev_supports_buft(dev, *extra)) continue;
        wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, *extra);
        if (wbuf) {
            ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            /* Only keep it if the device would run this matmul from it. */
            if (ggml_backend_dev_supports_op(dev, y[0])) {
                repacked = 1;
            } else {
                ggml_backend_buffer_free(wbuf);
                wbuf = NULL;
                for (int c = 0; c < copies; ++c) {
                    w[c]->buffer = NULL;
                    w[c]->data = NULL;
                }
            }
        }
    }
    if (!wbuf) {
        wbuf = ggml_backend_alloc_ctx_tensors(wctx, backend);
        ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    for (int c = 0; c < copies; ++c) ggml_backend_tensor_set(w[c], quantized, 0, weight_bytes);
    free(quantized);

    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors(actx, backend);
    float* xs = malloc(sizeof(float) * (size_t)(n * cols));
    for (int64_t i = 0; i < n * cols; ++i) xs[i] = gaussian();
    ggml_backend_tensor_set(x, xs, 0, sizeof(float) * (size_t)(n * cols));
    free(xs);

    struct ggml_context* gctx = ggml_init(meta);
    struct ggml_cgraph** graphs = malloc(sizeof *graphs * (size_t)copies);
    for (int c = 0; c < copies; ++c) {
        graphs[c] = ggml_new_graph(gctx);
        ggml_build_forward_expand(graphs[c], y[c]);
    }

    for (int r = 0; r < 2; ++r) ggml_backend_graph_compute(backend, graphs[r % copies]);
    double* times = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; ++r) {
        const double t0 = now_s();
        ggml_backend_graph_compute(backend, graphs[r % copies]);
        times[r] = now_s() - t0;
    }
    qsort(times, (size_t)reps, sizeof(double), by_value);
    const double median = times[reps / 2], p10 = times[reps / 10], p90 = times[(reps * 9) / 10];
    printf(
        "{\"kind\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"n\": %lld, \"threads\": %d, "
        "\"repacked\": %s, \"copies\": %d, \"median_s\": %.9f, \"p10_s\": %.9f, \"p90_s\": %.9f, "
        "\"weight_gb_per_s\": %.3f, \"gflop_per_s\": %.3f}\n",
        ggml_type_name((enum ggml_type)type), (long long)rows, (long long)cols, (long long)n,
        threads, repacked ? "true" : "false", copies, median, p10, p90,
        (double)weight_bytes / median / 1e9,
        2.0 * (double)rows * (double)cols * (double)n / median / 1e9);

    free(times);
    free(graphs);
    free(w);
    free(y);
    ggml_free(gctx);
    ggml_backend_buffer_free(abuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(actx);
    ggml_free(wctx);
    ggml_backend_free(backend);
    return 0;
}
