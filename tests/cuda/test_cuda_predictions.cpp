// What the CUDA plugin will run for a real model, predicted on a host without
// a GPU: the plugin's own capability table (the static library the plugin is
// built from) behind a backend table whose compute entries are never called,
// handed to the core's dispatcher and probe_model() -- the seeds'
// probe_kernels_for() with an explicit backend.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "capability_table.h"
#include "ferrox/backend.h"
#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/model.h"
#include "ferrox/op.h"

namespace {

using namespace ferrox;

// Set by a test to make the table forget one op, as an older plugin might.
ferrox_op g_forgotten_op = FERROX_OP_COUNT;

void table_kernel_for(const ferrox_backend*, ferrox_op op, ferrox_kind kind,
                      ferrox_kernel_info* out) {
    cuda::describe_kernel(op, kind, out);
    if (op == g_forgotten_op) out->kernel = nullptr;
}

ferrox_status gpu_info(const ferrox_backend*, uint32_t, ferrox_device_info* out, ferrox_message*) {
    out->type = FERROX_DEVICE_GPU;
    std::snprintf(out->name, sizeof out->name, "CUDA table only");
    return FERROX_OK;
}

uint32_t one_device(const ferrox_backend*) { return 1; }

// Every compute entry, 1.3's attention_cells included: present (so the table
// reads as the plugin's) but never reached by a probe.
template <class... Args>
ferrox_status never_called(ferrox_backend*, Args...) {
    FAIL("a probe called a compute entry");
    return FERROX_ERR_INTERNAL;
}

std::shared_ptr<Backend> cuda_table_backend() {
    static ferrox_backend raw = [] {
        ferrox_backend b{};
        b.struct_size = sizeof b;
        b.abi_version = FERROX_ABI_VERSION;
        b.device_count = one_device;
        b.device_info = gpu_info;
        b.kernel_for = table_kernel_for;
        b.gemm_fallback = cuda::kGemmFallback;
        b.buffer_alloc = never_called<uint64_t, ferrox_buffer**, ferrox_message*>;
        b.buffer_free = [](ferrox_backend*, ferrox_buffer*) {};
        b.buffer_upload =
            never_called<ferrox_buffer*, uint64_t, const void*, uint64_t, ferrox_message*>;
        b.buffer_download =
            never_called<const ferrox_buffer*, uint64_t, void*, uint64_t, ferrox_message*>;
        b.project = never_called<const ferrox_weight*, ferrox_tensor, uint64_t, ferrox_tensor,
                                 ferrox_message*>;
        b.rms_norm = never_called<ferrox_tensor, ferrox_tensor, uint64_t, uint32_t, float,
                                  ferrox_tensor, ferrox_message*>;
        b.rope = never_called<ferrox_tensor, ferrox_tensor, ferrox_tensor, uint32_t, uint32_t,
                              uint32_t, uint32_t, ferrox_message*>;
        b.add = never_called<ferrox_tensor, ferrox_tensor, uint64_t, uint32_t, uint64_t, float,
                             ferrox_message*>;
        b.glu =
            never_called<ferrox_glu_kind, ferrox_tensor, ferrox_tensor, uint64_t, ferrox_message*>;
        b.convert =
            never_called<ferrox_tensor, ferrox_tensor, ferrox_kind, uint64_t, ferrox_message*>;
        b.get_rows = never_called<const ferrox_weight*, const int32_t*, uint64_t, float,
                                  ferrox_tensor, ferrox_message*>;
        b.attention_resident =
            never_called<const ferrox_attention_desc*, ferrox_tensor, ferrox_tensor, ferrox_tensor,
                         ferrox_tensor, ferrox_message*>;
        // The plugin's attention over cell lists (ABI 1.3): without it the
        // core sends attention sinks (gpt-oss) nowhere and keeps the model on the host.
        b.attention_cells = never_called<const ferrox_attention_cells_desc*, ferrox_tensor,
                                         ferrox_tensor, ferrox_tensor, ferrox_tensor, ferrox_tensor,
                                         ferrox_tensor, ferrox_message*>;
        b.add_rms_norm = never_called<ferrox_tensor, ferrox_tensor, uint64_t, float, ferrox_tensor,
                                      uint64_t, uint32_t, float, ferrox_tensor, ferrox_message*>;
        // ABI 1.8: the plugin's pairs, from the same table.
        b.attention_kinds = [](const ferrox_backend*, ferrox_kind k, ferrox_kind v,
                               ferrox_kernel_info* out) {
            cuda::describe_attention_kinds(k, v, out);
        };
        return b;
    }();
    auto host = std::make_unique<HostContext>();
    host->backend_name = "cuda";
    return std::make_shared<Backend>(&raw, nullptr, std::move(host), "cuda");
}

std::filesystem::path cache_dir() {
    if (const char* dir = std::getenv("FERROX_CACHE_DIR")) return dir;
    const char* home = std::getenv("HOME");
    return std::filesystem::path(home ? home : "/root") / ".cache" / "ferrox";
}

struct Prediction {
    model::Residency residency;
    RegistryReport report;
    bool pre_norms = true;  // the model has norms to fuse the residual adds with
};

Prediction predict(const std::filesystem::path& path, model::KvKinds kv_kinds) {
    auto file = gguf::File::open(path);
    REQUIRE(file.has_value());
    auto hp = model::read_hparams(*file);
    REQUIRE(hp.has_value());
    KernelRegistry registry;
    Dispatcher dispatcher({cuda_table_backend()}, registry);
    auto residency = model::probe_model(*file, *hp, dispatcher, kv_kinds);
    REQUIRE(residency.has_value());
    return {*residency, registry.seal(), hp->arch->pre_norms};
}

// The models CI makes or fetches (ci/test.sh); a missing one is reported, not hidden.
std::vector<std::filesystem::path> models() {
    std::vector<std::filesystem::path> found;
    for (const char* arch :
         {"llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "granite", "olmo2", "smollm3", "qwen2vl",
          "qwen3vl", "phi3", "mistral3", "olmo3", "gemma2", "gpt-oss", "llama-moe"}) {
        const auto path = cache_dir() / "tiny-models" / (std::string("tiny-") + arch + ".gguf");
        if (std::filesystem::exists(path))
            found.push_back(path);
        else
            WARN("SKIPPED: " << path << " is absent (python3 tests/model/make_tiny_models.py)");
    }
    const auto gemma = cache_dir() / "models" / "gemma-3-270m-q4_k_m.gguf";
    if (std::filesystem::exists(gemma))
        found.push_back(gemma);
    else
        WARN("SKIPPED: " << gemma << " is absent (bash ci/fetch-model.sh)");
    return found;
}

}  // namespace

TEST_CASE("the CUDA table predicts a fully resident pass with every op a hit") {
    g_forgotten_op = FERROX_OP_COUNT;
    for (const auto& path : models()) {
        for (ferrox_kind kv : {FERROX_KIND_F32, FERROX_KIND_F16}) {
            INFO(path << ", KV cache " << (kv == FERROX_KIND_F32 ? "f32" : "f16"));
            const Prediction p = predict(path, model::KvKinds::both(kv));
            INFO(p.report.render());
            INFO("residency: " << p.residency.reason);
            CHECK(p.residency.resident);
            CHECK(p.report.misses.empty());
            CHECK(p.report.violations.empty());
            bool attention = false, rope = false, embedding = false, fused_norm = false;
            for (const auto& e : p.report.entries) {
                CHECK(e.key.backend == "cuda");
                CHECK(e.phase == Phase::Probe);
                attention |= e.key.op == FERROX_OP_ATTENTION && e.key.kind == kv;
                rope |= e.key.op == FERROX_OP_ROPE;
                embedding |= e.key.op == FERROX_OP_GET_ROWS && e.key.role == "token_embd";
                fused_norm |= e.key.op == FERROX_OP_ADD_RMS_NORM && e.key.role == "ffn_norm";
            }
            CHECK((attention && rope && embedding));
            CHECK(fused_norm == p.pre_norms);  // olmo2 has no pre-norm to fuse with
        }
    }
}

TEST_CASE("K and V of different kinds are left to the host by design, the pair named") {
    g_forgotten_op = FERROX_OP_COUNT;
    const auto all = models();
    if (all.empty()) return;  // reported by models()
    // f16 keys over f32 values: both kinds have CONVERT and ATTENTION kernels
    // alone, so the pair is the one reason.
    const Prediction p = predict(all.front(), {FERROX_KIND_F16, FERROX_KIND_F32});
    INFO(p.report.render());
    CHECK_FALSE(p.residency.resident);
    CHECK_THAT(p.residency.reason, Catch::Contains("ATTENTION kernel for K F16 / V F32"));
    bool by_design = false;
    for (const auto& e : p.report.entries)
        by_design |= e.key.op == FERROX_OP_ATTENTION && e.outcome == Outcome::ByDesign &&
                     e.detail == "the CUDA attention kernels read K and V of one kind";
    CHECK(by_design);
    CHECK(p.report.violations.empty());
}

TEST_CASE("a table that lacks one op keeps the model in host memory and says which") {
    const auto all = models();
    if (all.empty()) return;  // reported by models()
    g_forgotten_op = FERROX_OP_ROPE;
    const Prediction p = predict(all.front(), model::KvKinds::both(FERROX_KIND_F32));
    g_forgotten_op = FERROX_OP_COUNT;
    CHECK_FALSE(p.residency.resident);
    CHECK_THAT(p.residency.reason, Catch::Contains("no ROPE kernel for F32"));
    // In host memory the weight products are still predicted on cuda, and
    // attention goes by design to the core (no host attention entry here).
    INFO(p.report.render());
    bool matvec_on_cuda = false;
    for (const auto& e : p.report.entries) {
        CHECK(e.key.op != FERROX_OP_ROPE);
        if (e.key.op == FERROX_OP_MATVEC && e.outcome == Outcome::Hit) matvec_on_cuda = true;
        if (e.key.op == FERROX_OP_ATTENTION) {
            CHECK(e.outcome == Outcome::ByDesign);
            CHECK(e.detail == Dispatcher::kResidentOnlyAttention);
        }
    }
    CHECK(matvec_on_cuda);
}
