// Multi-sequence batches on a real GPU: the CUDA plugin's resident forward
// pass (attention_cells over a unified cache of cells) against the same
// plugin's weight kernels with every other op in host memory, on whole
// models, through the scripted 4-sequence run of tests/support/batch_script.h
// (mixed prefill and decode rows, a late sequence, a copied prefix, holes,
// rotating row order):
//  - resident vs host, every wanted row: NMSE <= 1e-5 and equal argmax (the
//    bound ci/gpu_model_parity.py holds single sequences to: the weight
//    kernels are the same, only device vs host float order differs);
//  - isolation: sequence 0 run alone on the resident context agrees with
//    its rows among the other three to the same bound (a cell leaking
//    between sequences costs > 1e-2 on these models).
//
//   test_cuda_batches MODEL.gguf...
//
// The plugin is $FERROX_CUDA_PLUGIN or the build folder's; exits 77 with
// "SKIPPED: ..." when it reports no usable device, as test_cuda_gpu does.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "batch_script.h"
#include "cuda_plugin_library.h"
#include "ferrox/config.h"
#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "plain_checks.h"

using namespace ferrox;
using ferrox::test::Agreement;
using ferrox::test::check;
using ferrox::test::failures;
using ferrox::test::ScriptRows;

namespace {

constexpr double kNmseMax = 1e-5;
constexpr uint32_t kSequences = 4;

ferrox::test::ScriptModel load(const PluginSet& plugins, const gguf::File& file, bool resident) {
    return ferrox::test::load_for_script(plugins.selected(), file, resident, kSequences);
}

ScriptRows run_on(const model::Model& m, bool only_seq0, const std::string& what) {
    return ferrox::test::run_script_on(m, kSequences, only_seq0, what);
}

void check_model(const PluginSet& cuda, const std::filesystem::path& path) {
    const std::string name = path.filename().string();
    auto file = gguf::File::open(path);
    if (!file) {
        check(false, path.string() + ": " + file.error().message());
        return;
    }
    const auto host = load(cuda, *file, false);
    const auto resident = load(cuda, *file, true);
    if (!host.model || !resident.model) return;
    const auto& residency = resident.model->residency();
    check(residency.resident, name + ": resident on cuda for " + std::to_string(kSequences) +
                                  " sequences" +
                                  (residency.resident ? "" : " (not: " + residency.reason + ")"));
    if (!residency.resident) return;

    const ScriptRows want = run_on(*host.model, false, name + " host");
    const ScriptRows got = run_on(*resident.model, false, name + " resident");
    const Agreement a = ferrox::test::agree(got, want, kNmseMax);
    check(a.ok(), name + ": 4 sequences, cuda resident vs cuda host activations: " + a.text());

    const ScriptRows alone = run_on(*resident.model, true, name + " resident, sequence 0 alone");
    const Agreement solo = ferrox::test::agree(ferrox::test::rows_of(got, 0), alone, kNmseMax);
    check(solo.ok(), name + ": sequence 0 among 3 others vs alone (resident): " + solo.text());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf...\n", argv[0]);
        return 2;
    }
    const std::filesystem::path plugin = ferrox::test::cuda_plugin_path();
    auto config = parse_config("backends: {order: [cuda]}\n", "test_cuda_batches.yaml");
    if (!config) {
        std::printf("FAIL: config: %s\n", config.error().message().c_str());
        return 1;
    }
    LoaderOptions loader;
    loader.plugin_dirs = {plugin.parent_path()};
    loader.read_environment = false;
    const PluginSet cuda = PluginSet::load(*config, loader);
    if (cuda.selected().empty()) {
        std::string why = "the cuda plugin in " + plugin.parent_path().string() + " is not ready";
        for (const PluginRecord& r : cuda.records())
            if (r.name == "cuda" && is_failure(r.state)) {
                why = r.reason;
                break;
            }
        std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
        return 77;
    }
    for (int i = 1; i < argc; ++i) check_model(cuda, argv[i]);
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
