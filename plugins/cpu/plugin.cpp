// libferrox_cpu.so: the ABI glue. Every entry's body runs in guarded()
// (ferrox/c_boundary.h); no exception crosses into the core.
#include <sched.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "attention/attention.h"
#include "cpu_isa.h"
#include "delta_rule.h"
#include "ferrox/backend_abi.h"
#include "ferrox/c_boundary.h"
#include "ferrox/plugin_note.h"
#include "ferrox/quant_kind.h"
#include "kernels/isa_kernels.h"
#include "kernels/kernel_table.h"
#include "kernels/products.h"
#include "thread_pool.h"

struct ferrox_weight {
    ferrox::cpu::WeightView view;
    std::vector<std::byte> copy;  // only when the host did not lend its bytes
};

struct ferrox_buffer {
    std::vector<std::byte> owned;
    std::byte* data = nullptr;
    uint64_t size = 0;
};

namespace ferrox::cpu {
namespace {

#define FERROX_CPU_VERSION "0.1.0"
#define FERROX_CPU_DESCRIPTION \
    "CPU backend: int8 and f32 kernels, AVX2 / AVX-512 VNNI chosen at run time"
constexpr const char* kVersion = FERROX_CPU_VERSION;

struct CpuBackend {
    ferrox_backend table{};
    ferrox_host host{};
    std::unique_ptr<ThreadPool> pool;
    std::string cpu_name;
    Isa isa = Isa::Portable;
    const IsaKernels* kernels = nullptr;
    AttentionKernels attend{};
    // FERROX_CPU_DELTA_NET=off (for tests): no delta_net kernel or entry, so
    // the core's own loop runs the recurrence (a recorded miss).
    bool delta_net = true;
};

CpuBackend& self(const ferrox_backend* b) { return *static_cast<CpuBackend*>(b->self); }

void set_message(ferrox_message* m, const std::string& text) { write_message(m, text); }

std::string read_cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos && colon + 2 <= line.size())
                return line.substr(colon + 2);
        }
    return "CPU";
}

uint64_t meminfo_bytes(const char* key) {
    std::ifstream in("/proc/meminfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key, 0) == 0) return std::stoull(line.substr(std::strlen(key))) * 1024;
    return 0;
}

void destroy(ferrox_backend* b) { delete static_cast<CpuBackend*>(b->self); }

uint32_t device_count(const ferrox_backend*) { return 1; }

ferrox_status device_info(const ferrox_backend* b, uint32_t device, ferrox_device_info* out,
                          ferrox_message* error) {
    if (device != 0 || !out) {
        set_message(error, "the CPU backend has one device, 0");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return guarded("cpu", error, [&] {
        out->type = FERROX_DEVICE_CPU;
        const std::string name = self(b).cpu_name + " (" + std::to_string(self(b).pool->size()) +
                                 " threads, " + std::string(isa_name(self(b).isa)) + ")";
        std::snprintf(out->name, sizeof out->name, "%s", name.c_str());
        out->memory_total = meminfo_bytes("MemTotal:");
        out->memory_free = meminfo_bytes("MemAvailable:");
        return FERROX_OK;
    });
}

constexpr const char* kDeltaNetKernel = "cpu.delta_net.f32";

void kernel_for(const ferrox_backend* b, ferrox_op op, ferrox_kind kind, ferrox_kernel_info* out) {
    out->kernel = nullptr;
    out->by_design = nullptr;
    if (op == FERROX_OP_DELTA_NET) {
        if (kind == FERROX_KIND_F32 && self(b).delta_net) out->kernel = kDeltaNetKernel;
        return;
    }
    if (op == FERROX_OP_ATTENTION) {  // `kind` is the KV cache's
        out->kernel = attention_kernel_name(kind, kind);
        return;
    }
    const CpuKernel* k = find_kernel(kind);
    if (!k) return;
    if (op == FERROX_OP_MATVEC) out->kernel = k->matvec_name;
    if (op == FERROX_OP_GEMM) out->kernel = k->gemm_name;
}

// ABI 1.8: every pair of the kinds the kernels read, K's and V's apart.
void attention_kinds(const ferrox_backend*, ferrox_kind key_kind, ferrox_kind value_kind,
                     ferrox_kernel_info* out) {
    out->kernel = attention_kernel_name(key_kind, value_kind);
    out->by_design = nullptr;
}

ferrox_status buffer_alloc(ferrox_backend*, uint64_t bytes, ferrox_buffer** out,
                           ferrox_message* error) {
    return guarded("cpu", error, [&] {
        auto buffer = std::make_unique<ferrox_buffer>();
        buffer->owned.resize(bytes);
        buffer->data = buffer->owned.data();
        buffer->size = bytes;
        *out = buffer.release();
        return FERROX_OK;
    });
}

void buffer_free(ferrox_backend*, ferrox_buffer* buffer) { delete buffer; }

ferrox_status check_range(const ferrox_buffer* buffer, uint64_t offset, uint64_t bytes,
                          ferrox_message* error) {
    if (!buffer || offset > buffer->size || bytes > buffer->size - offset) {
        set_message(error, "buffer range out of bounds");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return FERROX_OK;
}

ferrox_status buffer_upload(ferrox_backend*, ferrox_buffer* buffer, uint64_t offset,
                            const void* src, uint64_t bytes, ferrox_message* error) {
    if (auto s = check_range(buffer, offset, bytes, error); s != FERROX_OK) return s;
    if (bytes) std::memcpy(buffer->data + offset, src, bytes);
    return FERROX_OK;
}

ferrox_status buffer_download(ferrox_backend*, const ferrox_buffer* buffer, uint64_t offset,
                              void* dst, uint64_t bytes, ferrox_message* error) {
    if (auto s = check_range(buffer, offset, bytes, error); s != FERROX_OK) return s;
    if (bytes) std::memcpy(dst, buffer->data + offset, bytes);
    return FERROX_OK;
}

ferrox_status buffer_wrap_host(ferrox_backend*, void* host, uint64_t bytes, ferrox_buffer** out,
                               ferrox_message* error) {
    return guarded("cpu", error, [&] {
        auto buffer = std::make_unique<ferrox_buffer>();
        buffer->data = static_cast<std::byte*>(host);
        buffer->size = bytes;
        *out = buffer.release();
        return FERROX_OK;
    });
}

ferrox_status weight_prepare(ferrox_backend* b, const ferrox_weight_desc* desc, int borrow,
                             ferrox_weight** out, ferrox_message* error) {
    if (!desc || !out || !desc->data) {
        set_message(error, "weight_prepare: null argument");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    const auto expected = row_bytes(desc->kind, desc->cols);
    if (!expected || *expected != desc->row_bytes) {
        set_message(error,
                    "weight_prepare: row length is not whole blocks of this kind, or "
                    "row_bytes disagrees with it");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return guarded("cpu", error, [&] {
        auto w = std::make_unique<ferrox_weight>();
        const auto* bytes = static_cast<const std::byte*>(desc->data);
        if (!borrow) w->copy.assign(bytes, bytes + desc->rows * desc->row_bytes);
        w->view = make_view(*self(b).kernels, desc->kind, desc->rows, desc->cols, desc->row_bytes,
                            borrow ? bytes : w->copy.data());
        *out = w.release();
        return FERROX_OK;
    });
}

void weight_release(ferrox_backend*, ferrox_weight* weight) { delete weight; }

ferrox_status run_matvec(ferrox_backend* b, const ferrox_weight* w, const float* x, float* y,
                         ferrox_message* error) {
    if (!w || !x || !y) {
        set_message(error, "matvec: null argument");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return guarded("cpu", error, [&] {
        matvec(*self(b).pool, *self(b).kernels, w->view, x, y);
        return FERROX_OK;
    });
}

// ABI 1.9: all the items' rows as one job of the pool (matvec_many).
ferrox_status run_matvec_batch(ferrox_backend* b, const ferrox_matvec_item* items, uint64_t n,
                               ferrox_message* error) {
    if (n && !items) {
        set_message(error, "matvec_batch: null items");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    for (uint64_t i = 0; i < n; ++i)
        if (!items[i].weight || !items[i].x || !items[i].y) {
            set_message(error, "matvec_batch: item " + std::to_string(i) + " has a null member");
            return FERROX_ERR_INVALID_ARGUMENT;
        }
    return guarded("cpu", error, [&] {
        std::vector<MatvecTask> tasks(n);
        for (uint64_t i = 0; i < n; ++i)
            tasks[i] = {&items[i].weight->view, items[i].x, items[i].y};
        matvec_many(*self(b).pool, *self(b).kernels, tasks);
        return FERROX_OK;
    });
}

ferrox_status run_gemm(ferrox_backend* b, const ferrox_weight* w, const float* x, uint64_t n,
                       float* y, ferrox_message* error) {
    if (!w || (n && (!x || !y))) {
        set_message(error, "gemm: null argument");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return guarded("cpu", error, [&] {
        gemm(*self(b).pool, *self(b).kernels, w->view, x, n, y);
        return FERROX_OK;
    });
}

ferrox_status run_attention_entry(ferrox_backend* b, const ferrox_attention_desc* desc,
                                  ferrox_message* error) {
    if (!desc) {
        set_message(error, "attention: null descriptor");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return guarded("cpu", error, [&] {
        const char* problem = nullptr;
        if (!run_attention(*self(b).pool, self(b).attend, *desc, &problem)) {
            set_message(error, problem);
            return FERROX_ERR_INVALID_ARGUMENT;
        }
        return FERROX_OK;
    });
}

// ABI 1.9: value heads are independent, so each thread takes whole heads and
// runs the core's own per-head loop on them: the same bits as the core's
// fallback, whatever the thread count. A head's state (S x S floats, 64 KiB
// at S = 128) stays in one core's cache across the tokens of a chunk.
ferrox_status run_delta_net(ferrox_backend* b, const ferrox_delta_net_desc* desc,
                            ferrox_message* error) {
    if (!desc) {
        set_message(error, "delta_net: null descriptor");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    if (const char* why = delta_rule::invalid(*desc)) {
        set_message(error, why);
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    return guarded("cpu", error, [&] {
        self(b).pool->parallel_for(desc->n_v_heads, 1, [desc](uint64_t h0, uint64_t h1) {
            for (uint64_t h = h0; h < h1; ++h)
                delta_rule::run_head(*desc, static_cast<uint32_t>(h));
        });
        return FERROX_OK;
    });
}

// Whether FERROX_CPU_DELTA_NET switches the delta_net entry off ("off"; any
// other value, or none, leaves it on).
bool delta_net_switched_off() {
    const char* env = std::getenv("FERROX_CPU_DELTA_NET");
    return env && std::strcmp(env, "off") == 0;
}

// The cores this process may run on (its affinity mask: taskset, cgroup
// cpusets), which can be far fewer than the machine has online.
unsigned usable_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return static_cast<unsigned>(CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

// The options create() takes, declared to the core through describe() (ABI 1.6):
// the core checks a `cpu:` section against them, and fills in the defaults, before
// create() runs. create() reads the same rows, so the range is stated once.
constexpr int64_t kMaxThreads = 1024;
constexpr ferrox_option_spec kDeclaredOptions[] = {
    {"threads", FERROX_OPTION_INTEGER, 0, kMaxThreads, nullptr, "0",
     "Worker threads; `0` = one per core this process may use (its CPU affinity, "
     "`sched_getaffinity`); a larger value is capped to those cores with a warning."},
    {"isa", FERROX_OPTION_CHOICE, 0, 0, "auto|portable|avx2|avx512", "auto",
     "SIMD path of the CPU kernels; `auto` = the widest the CPU and OS enable (also "
     "`FERROX_CPU_ISA`). A path the CPU cannot run is an error, never a crash."},
};

// "threads": 0 or absent = one per usable core. More threads than usable
// cores only take turns on them (and each kernel waits for the last one):
// so -t 1024 on 2 cores crawled; it is capped, with a warning.
ferrox_status parse_threads(const ferrox_option* options, size_t n, const ferrox_host* host,
                            unsigned& threads, ferrox_message* error) {
    threads = 0;
    for (size_t i = 0; i < n; ++i) {
        if (std::strcmp(options[i].key, "threads") != 0) continue;
        char* end = nullptr;
        const long v = std::strtol(options[i].value, &end, 10);
        if (!end || *end != '\0' || v < 0 || v > kMaxThreads) {
            set_message(error, "cpu: option threads must be 0.." + std::to_string(kMaxThreads) +
                                   ", got '" + options[i].value + "'");
            return FERROX_ERR_INVALID_ARGUMENT;
        }
        threads = static_cast<unsigned>(v);
    }
    const unsigned cores = usable_cores();
    if (threads > cores) {
        const std::string warning = "cpu: threads " + std::to_string(threads) +
                                    " is more than the " + std::to_string(cores) +
                                    " cores this process may use (sched_getaffinity); using " +
                                    std::to_string(cores);
        if (host && host->struct_size >= sizeof(ferrox_host) && host->log)
            host->log(host->context, FERROX_LOG_WARN, warning.c_str());
        threads = cores;
    }
    if (threads == 0) threads = cores;
    return FERROX_OK;
}

// Everything compiled per ISA, for the path chosen at create().
struct IsaPaths {
    const IsaKernels* kernels;
    AttentionKernels attend;
};

IsaPaths paths_for(Isa isa) {
    switch (isa) {
        case Isa::Avx512Vnni:
            return {&isa_kernels_avx512vnni(), attention_kernels_avx512()};
        case Isa::Avx2:
            return {&isa_kernels_avx2(), attention_kernels_avx2()};
        case Isa::Portable:
            break;
    }
    return {&isa_kernels_portable(), attention_kernels_portable()};
}

// "isa": portable | avx2 | avx512 | auto (default). FERROX_CPU_ISA, when set,
// replaces "auto" (the config passes "auto" unless the file chose a path). A
// path this CPU or OS cannot run is an error, never a SIGILL later.
ferrox_status parse_isa_option(const ferrox_option* options, size_t n, Isa& isa,
                               ferrox_message* error) {
    std::string text = "auto";
    for (size_t i = 0; i < n; ++i)
        if (std::strcmp(options[i].key, "isa") == 0) text = options[i].value;
    if (const char* env = std::getenv("FERROX_CPU_ISA"); env && *env && text == "auto") text = env;
    const auto parsed = parse_isa(text);
    if (!parsed) {
        set_message(error,
                    "cpu: option isa must be portable, avx2, avx512 or auto, got '" + text + "'");
        return FERROX_ERR_INVALID_ARGUMENT;
    }
    if (!isa_supported(*parsed)) {
        set_message(error, "cpu: isa " + std::string(isa_name(*parsed)) +
                               " was requested but this CPU or OS cannot run it (best here: " +
                               std::string(isa_name(detect_isa())) + ")");
        return FERROX_ERR_UNSUPPORTED;
    }
    isa = *parsed;
    return FERROX_OK;
}

}  // namespace
}  // namespace ferrox::cpu

// Baseline x86-64 (faster paths are chosen at run time), no driver library.
FERROX_PLUGIN_NOTE("cpu", FERROX_CPU_VERSION, "", "", FERROX_CPU_DESCRIPTION);

extern "C" FERROX_PLUGIN_EXPORT ferrox_status ferrox_plugin_describe(ferrox_plugin_info* info) {
    // A core older than 1.6 passes a struct without the option members: it gets the rest.
    if (!info || info->struct_size < offsetof(ferrox_plugin_info, option_spec_size))
        return FERROX_ERR_INVALID_ARGUMENT;
    info->abi_version = FERROX_ABI_VERSION;
    info->name = "cpu";
    info->version = ferrox::cpu::kVersion;
    info->isa_required = "";  // baseline x86-64; faster paths are chosen at run time
    info->driver_libraries = "";
    info->description = FERROX_CPU_DESCRIPTION;
    if (info->struct_size >= sizeof(ferrox_plugin_info)) {
        info->option_spec_size = sizeof(ferrox_option_spec);
        info->n_options = static_cast<uint32_t>(std::size(ferrox::cpu::kDeclaredOptions));
        info->options = ferrox::cpu::kDeclaredOptions;
    }
    return FERROX_OK;
}

extern "C" FERROX_PLUGIN_EXPORT ferrox_status ferrox_plugin_create(const ferrox_host* host,
                                                                   const ferrox_option* options,
                                                                   size_t n_options,
                                                                   ferrox_backend** out,
                                                                   ferrox_message* error) {
    using namespace ferrox::cpu;
    if (!out) return FERROX_ERR_INVALID_ARGUMENT;
    unsigned threads = 0;
    if (auto s = parse_threads(options, n_options, host, threads, error); s != FERROX_OK) return s;
    Isa isa = Isa::Portable;
    if (auto s = parse_isa_option(options, n_options, isa, error); s != FERROX_OK) return s;
    return ferrox::guarded("cpu", error, [&] {
        auto backend = std::make_unique<CpuBackend>();
        if (host && host->struct_size >= sizeof(ferrox_host)) backend->host = *host;
        backend->pool = std::make_unique<ThreadPool>(threads);
        backend->cpu_name = read_cpu_name();
        backend->isa = isa;
        const IsaPaths paths = paths_for(isa);
        backend->kernels = paths.kernels;
        backend->attend = paths.attend;
        ferrox_backend& t = backend->table;
        t.struct_size = sizeof t;
        t.abi_version = FERROX_ABI_VERSION;
        t.self = backend.get();
        t.destroy = destroy;
        t.device_count = device_count;
        t.device_info = device_info;
        t.kernel_for = kernel_for;
        t.gemm_fallback = kFallbackName;
        t.matvec_fallback = kFallbackName;
        t.buffer_alloc = buffer_alloc;
        t.buffer_free = buffer_free;
        t.buffer_upload = buffer_upload;
        t.buffer_download = buffer_download;
        t.buffer_wrap_host = buffer_wrap_host;
        t.weight_prepare = weight_prepare;
        t.weight_release = weight_release;
        t.matvec = run_matvec;
        t.gemm = run_gemm;
        t.attention = run_attention_entry;
        t.attention_kinds = attention_kinds;
        t.matvec_batch = run_matvec_batch;
        backend->delta_net = !delta_net_switched_off();
        if (backend->delta_net) t.delta_net = run_delta_net;
        *out = &backend.release()->table;
        return FERROX_OK;
    });
}
