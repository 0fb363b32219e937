// Tests of libferrox_cuda.so that run on every host, with or without a GPU:
// the real built file is dlopen'ed exactly as the core would open it.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "capability_table.h"
#include "cuda_plugin_library.h"
#include "ferrox/backend_abi.h"
#include "ferrox/quant_kind.h"

using ferrox::test::CudaPluginLibrary;
using ferrox::test::OwnedBackend;

namespace {

bool process_maps_libcuda() {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.find("libcuda.so") != std::string::npos) return true;
    return false;
}

struct CapturedLog {
    std::vector<std::string> lines;
};

ferrox_host host_table(CapturedLog& log) {
    ferrox_host host{};
    host.struct_size = sizeof(ferrox_host);
    host.abi_version = FERROX_ABI_VERSION;
    host.context = &log;
    host.log = [](void* context, ferrox_log_level, const char* message) {
        static_cast<CapturedLog*>(context)->lines.emplace_back(message);
    };
    host.record_kernel = nullptr;
    return host;
}

// What the capability table must say, written out once here (the table is
// the thing under test, so these lists are not derived from it).
const std::set<ferrox_kind> kMatvecKinds{
    FERROX_KIND_F32,  FERROX_KIND_F16,    FERROX_KIND_BF16,   FERROX_KIND_Q8_0,
    FERROX_KIND_Q4_0, FERROX_KIND_Q4_1,   FERROX_KIND_Q5_0,   FERROX_KIND_Q5_1,
    FERROX_KIND_Q2_K, FERROX_KIND_Q3_K,   FERROX_KIND_Q4_K,   FERROX_KIND_Q5_K,
    FERROX_KIND_Q6_K, FERROX_KIND_IQ4_NL, FERROX_KIND_IQ4_XS, FERROX_KIND_MXFP4};
// The tiled GEMM serves every quantized MATVEC kind; floats use the fallback.
const std::set<ferrox_kind> kGemmKinds{
    FERROX_KIND_F32,  FERROX_KIND_F16,    FERROX_KIND_BF16,   FERROX_KIND_Q8_0,
    FERROX_KIND_Q4_0, FERROX_KIND_Q4_1,   FERROX_KIND_Q5_0,   FERROX_KIND_Q5_1,
    FERROX_KIND_Q2_K, FERROX_KIND_Q3_K,   FERROX_KIND_Q4_K,   FERROX_KIND_Q5_K,
    FERROX_KIND_Q6_K, FERROX_KIND_IQ4_NL, FERROX_KIND_IQ4_XS, FERROX_KIND_MXFP4};
// The resident-decoding ops (ABI 1.2) other than GET_ROWS, and their kinds:
// elementwise ops (and the fused add + norm) on F32, CONVERT and ATTENTION on
// each KV-cache kind.
const std::set<std::pair<ferrox_op, ferrox_kind>> kResidentKernels{
    {FERROX_OP_RMS_NORM, FERROX_KIND_F32},  {FERROX_OP_ROPE, FERROX_KIND_F32},
    {FERROX_OP_ADD, FERROX_KIND_F32},       {FERROX_OP_SWIGLU, FERROX_KIND_F32},
    {FERROX_OP_GEGLU, FERROX_KIND_F32},     {FERROX_OP_CONVERT, FERROX_KIND_F32},
    {FERROX_OP_CONVERT, FERROX_KIND_F16},   {FERROX_OP_ATTENTION, FERROX_KIND_F32},
    {FERROX_OP_ATTENTION, FERROX_KIND_F16}, {FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32},
    {FERROX_OP_SWIGLU_OAI, FERROX_KIND_F32}};

bool kernel_expected(ferrox_op op, ferrox_kind kind) {
    switch (op) {
        case FERROX_OP_MATVEC:
        case FERROX_OP_GET_ROWS:  // rows decoded with the MATVEC granule decoders
            return kMatvecKinds.count(kind) == 1;
        case FERROX_OP_GEMM:
            return kGemmKinds.count(kind) == 1;
        default:
            return kResidentKernels.count({op, kind}) == 1;
    }
}

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

}  // namespace

TEST_CASE("describe names the cuda plugin and its ABI without opening libcuda") {
    const bool libcuda_before = process_maps_libcuda();
    CudaPluginLibrary plugin;
    INFO("dlopen: " << plugin.error());
    REQUIRE(plugin.ok());

    ferrox_plugin_info info{};
    info.struct_size = sizeof(info);
    REQUIRE(plugin.describe(&info) == FERROX_OK);

    CHECK(info.abi_version == FERROX_ABI_VERSION);
    CHECK(std::string_view(info.name) == "cuda");
    CHECK(std::string_view(info.isa_required).empty());
    CHECK(std::string_view(info.driver_libraries) == "libcuda.so.1");
    CHECK_FALSE(std::string_view(info.version).empty());
    CHECK_FALSE(std::string_view(info.description).empty());
    // Loading and describing the plugin must not pull in the driver.
    CHECK(process_maps_libcuda() == libcuda_before);
}

TEST_CASE("describe writes nothing beyond the caller's shorter struct") {
    CudaPluginLibrary plugin;
    REQUIRE(plugin.ok());
    ferrox_plugin_info info;
    std::memset(&info, 0xAB, sizeof(info));
    info.struct_size = offsetof(ferrox_plugin_info, name);  // an "ABI 0.x" caller
    REQUIRE(plugin.describe(&info) == FERROX_OK);
    CHECK(info.abi_version == FERROX_ABI_VERSION);
    ferrox_plugin_info untouched;
    std::memset(&untouched, 0xAB, sizeof(untouched));
    CHECK(std::memcmp(&info.name, &untouched.name,
                      sizeof(info) - offsetof(ferrox_plugin_info, name)) == 0);
}

TEST_CASE("create gives a backend or a typed no-driver/no-device state, never a crash") {
    CudaPluginLibrary plugin;
    REQUIRE(plugin.ok());
    CapturedLog log;
    const ferrox_host host = host_table(log);
    const ferrox_option options[] = {{"device", "0"}};

    // Twice: a second probe after a failed (or successful) first one must
    // behave the same, as a process that retries backends would do.
    for (int attempt = 0; attempt < 2; ++attempt) {
        ferrox_backend* raw = nullptr;
        ferrox_message message{};
        const ferrox_status status = plugin.create(&host, options, 1, &raw, &message);
        INFO("attempt " << attempt << ": status " << status << ", message: " << message.text);
        if (status == FERROX_OK) {
            // A host with a GPU: the backend must be usable and self-consistent.
            REQUIRE(raw != nullptr);
            const OwnedBackend backend(raw);
            CHECK(backend->abi_version == FERROX_ABI_VERSION);
            REQUIRE(backend->device_count(backend.get()) == 1);
            ferrox_device_info device{};
            device.struct_size = sizeof(device);
            REQUIRE(backend->device_info(backend.get(), 0, &device, &message) == FERROX_OK);
            CHECK(device.type == FERROX_DEVICE_GPU);
            CHECK(device.memory_total >= device.memory_free);
            CHECK(std::string_view(backend->gemm_fallback) == "CUDA per-position matvec");
            CHECK(backend->matvec_fallback == nullptr);
        } else {
            CHECK((status == FERROX_ERR_NO_DRIVER || status == FERROX_ERR_NO_DEVICE));
            CHECK(raw == nullptr);
            CHECK(std::strlen(message.text) > 0);
            if (status == FERROX_ERR_NO_DRIVER)
                CHECK(std::string_view(message.text).find(">= 580") != std::string_view::npos);
            WARN("cuda plugin state on this host: " << message.text);
        }
    }
}

TEST_CASE("a device number past the last device is a typed state, never a backend") {
    CudaPluginLibrary plugin;
    REQUIRE(plugin.ok());
    const ferrox_option options[] = {{"device", "4096"}};
    ferrox_backend* raw = nullptr;
    ferrox_message message{};
    const ferrox_status status = plugin.create(nullptr, options, 1, &raw, &message);
    INFO("message: " << message.text);
    CHECK((status == FERROX_ERR_NO_DRIVER || status == FERROX_ERR_NO_DEVICE));
    CHECK(raw == nullptr);
    if (status == FERROX_ERR_NO_DEVICE) {
        // A driver is present: the message must name the device asked for.
        CHECK(std::string_view(message.text).find("4096") != std::string_view::npos);
    }
}

TEST_CASE("create refuses a malformed option and names it, before touching the driver") {
    CudaPluginLibrary plugin;
    REQUIRE(plugin.ok());
    const ferrox_option bad_device[] = {{"device", "first"}};
    const ferrox_option bad_budget[] = {{"device", "0"}, {"vram_budget", "12 GiB"}};
    ferrox_backend* raw = nullptr;
    ferrox_message message{};

    CHECK(plugin.create(nullptr, bad_device, 1, &raw, &message) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK(std::string_view(message.text).find("device='first'") != std::string_view::npos);
    CHECK(raw == nullptr);

    CHECK(plugin.create(nullptr, bad_budget, 2, &raw, &message) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK(std::string_view(message.text).find("vram_budget='12 GiB'") != std::string_view::npos);
    CHECK(raw == nullptr);
}

TEST_CASE("create refuses null arguments and a host of another ABI major with a message") {
    CudaPluginLibrary plugin;
    REQUIRE(plugin.ok());
    ferrox_message message{};
    CHECK(plugin.create(nullptr, nullptr, 0, nullptr, &message) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK(std::strlen(message.text) > 0);

    ferrox_backend* raw = nullptr;
    CHECK(plugin.create(nullptr, nullptr, 3, &raw, &message) == FERROX_ERR_INVALID_ARGUMENT);

    CapturedLog log;
    ferrox_host future = host_table(log);
    future.abi_version = (FERROX_ABI_VERSION_MAJOR + 1) << 16;
    message = {};
    CHECK(plugin.create(&future, nullptr, 0, &raw, &message) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK(std::string_view(message.text).find("ABI") != std::string_view::npos);
    CHECK(raw == nullptr);
}

// The capability table is tested through the static library the plugin
// itself links (ferrox_cuda_capabilities): the ABI reaches the table only
// through a backend, and no backend can be created on a host without a GPU.
TEST_CASE("the capability table lists MATVEC for the sixteen decodable kinds and nothing else") {
    for (const ferrox::KindTraits& kind : ferrox::kAllKinds) {
        INFO("kind " << kind.name);
        const char* name = ferrox::cuda::find_kernel(FERROX_OP_MATVEC, kind.id);
        CHECK((name != nullptr) == (kMatvecKinds.count(kind.id) == 1));
    }
}

TEST_CASE("the capability table lists the tiled GEMM for every MATVEC kind") {
    for (const ferrox::KindTraits& kind : ferrox::kAllKinds) {
        INFO("kind " << kind.name);
        const bool gemm = ferrox::cuda::has_kernel(FERROX_OP_GEMM, kind.id);
        CHECK(gemm == (kGemmKinds.count(kind.id) == 1));
        // The per-position fallback needs a MATVEC kernel for every GEMM kind.
        if (gemm) CHECK(ferrox::cuda::has_kernel(FERROX_OP_MATVEC, kind.id));
    }
    CHECK(std::string_view(ferrox::cuda::kGemmFallback) == "CUDA per-position matvec");
}

TEST_CASE("GET_ROWS has a kernel for exactly the kinds MATVEC has") {
    // Embedding lookup decodes with the MATVEC granule decoders: a kind the
    // model can multiply by but not look rows up in would strand its token
    // embedding on the host, and the reverse would be a decoder no MATVEC uses.
    int get_rows = 0;
    for (const ferrox::KindTraits& kind : ferrox::kAllKinds) {
        INFO("kind " << kind.name);
        CHECK(ferrox::cuda::has_kernel(FERROX_OP_GET_ROWS, kind.id) ==
              ferrox::cuda::has_kernel(FERROX_OP_MATVEC, kind.id));
        get_rows += ferrox::cuda::has_kernel(FERROX_OP_GET_ROWS, kind.id) ? 1 : 0;
    }
    CHECK(get_rows == static_cast<int>(kMatvecKinds.size()));
}

TEST_CASE("the resident ops have kernels on their kinds, attention included") {
    for (const auto& [op, kind] : kResidentKernels) {
        INFO("op " << op << ", kind " << ferrox::kind_name(kind));
        CHECK(ferrox::cuda::has_kernel(op, kind));
    }
    // Attention runs on the device over the resident KV cache (ABI 1.2): a
    // kernel, and no by-design reason to leave it to a host backend.
    for (const ferrox_kind kv : {FERROX_KIND_F32, FERROX_KIND_F16}) {
        INFO("attention on a " << ferrox::kind_name(kv) << " cache");
        ferrox_kernel_info info{};
        info.struct_size = sizeof(info);
        info.by_design = "poison";
        ferrox::cuda::describe_kernel(FERROX_OP_ATTENTION, kv, &info);
        REQUIRE(info.kernel != nullptr);
        CHECK(std::string_view(info.kernel) == "cuda_attention_" + lower(ferrox::kind_name(kv)));
        CHECK(info.by_design == nullptr);
    }
    // A cache kind without a kernel is a plain miss, not a by-design one.
    ferrox_kernel_info info{};
    info.struct_size = sizeof(info);
    info.by_design = "poison";
    ferrox::cuda::describe_kernel(FERROX_OP_ATTENTION, FERROX_KIND_Q8_0, &info);
    CHECK(info.kernel == nullptr);
    CHECK(info.by_design == nullptr);
}

TEST_CASE("no op or kind outside the listed ones has a kernel") {
    for (int op = 0; op < FERROX_OP_COUNT; ++op) {
        for (const ferrox::KindTraits& kind : ferrox::kAllKinds) {
            INFO("op " << op << ", kind " << kind.name);
            CHECK(ferrox::cuda::has_kernel(static_cast<ferrox_op>(op), kind.id) ==
                  kernel_expected(static_cast<ferrox_op>(op), kind.id));
        }
    }
    // Every row is a known op on a known kind (none the loops above skip).
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        INFO(entry.name);
        CHECK(entry.op >= 0);
        CHECK(entry.op < FERROX_OP_COUNT);
        CHECK(ferrox::kind_traits(static_cast<uint32_t>(entry.kind)) != nullptr);
    }
}

TEST_CASE("every kernel row is unique, by (op, kind) and by name") {
    std::set<std::pair<int, int>> seen;
    std::set<std::string> names;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        INFO(entry.name);
        CHECK(seen.insert({entry.op, entry.kind}).second);
        CHECK(names.insert(entry.name).second);
    }
    CHECK(names.size() == ferrox::cuda::kKernels.size());
}

TEST_CASE("the weight kernels' names name their op and kind") {
    // A row copied and half-edited (Q5_1's name on the Q5_0 row) would make
    // kernel_for() and the registry report the wrong kernel.
    int weight_rows = 0;
    for (const ferrox::cuda::KernelEntry& entry : ferrox::cuda::kKernels) {
        std::string prefix;
        if (entry.op == FERROX_OP_MATVEC) prefix = "cuda_matvec_";
        if (entry.op == FERROX_OP_GEMM) prefix = "cuda_gemm_tiled_";
        if (entry.op == FERROX_OP_GET_ROWS) prefix = "cuda_get_rows_";
        if (prefix.empty()) continue;
        CHECK(std::string(entry.name) == prefix + lower(ferrox::kind_name(entry.kind)));
        ++weight_rows;
    }
    CHECK(weight_rows == static_cast<int>(2 * kMatvecKinds.size() + kGemmKinds.size()));
}

TEST_CASE("kernel_for fills the ABI struct, and only as much of it as the caller has") {
    ferrox_kernel_info info{};
    info.struct_size = sizeof(info);
    ferrox::cuda::describe_kernel(FERROX_OP_GEMM, FERROX_KIND_Q4_K, &info);
    CHECK(info.abi_version == FERROX_ABI_VERSION);
    REQUIRE(info.kernel != nullptr);
    CHECK(std::string_view(info.kernel) == "cuda_gemm_tiled_q4_k");
    CHECK(info.by_design == nullptr);

    ferrox::cuda::describe_kernel(FERROX_OP_GEMM, FERROX_KIND_IQ2_XXS, &info);
    CHECK(info.kernel == nullptr);  // no kernel at all: a plain miss, handed on
    CHECK(info.by_design == nullptr);

    const char marker[] = "untouched";
    ferrox_kernel_info short_info{};
    short_info.struct_size = offsetof(ferrox_kernel_info, kernel);
    short_info.kernel = marker;
    ferrox::cuda::describe_kernel(FERROX_OP_MATVEC, FERROX_KIND_F32, &short_info);
    CHECK(short_info.kernel == marker);
}
