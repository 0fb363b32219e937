// Multi-sequence batches on the resident executor (ABI 1.3's attention_cells)
// against host-memory decoding, through the resident fixture plugin
// (tests/plugins/fixtures/resident_plugin.cpp), on every tiny model:
//  - one scripted run of 4 sequences: prefills and decode steps mixed in a
//    batch, different lengths, a sequence that starts late, one that is
//    replaced by a copy of another's cells (a shared prefix), one with
//    positions removed from its middle (holes), rows in rotating order;
//    every wanted row's logits on the resident context must equal the host
//    context's (the fixture runs the core's own math, so NMSE <= 1e-9, as
//    tests/parity/test_resident_parity.py holds single sequences); every
//    element op that pass records is one model::resident_element_ops() lists
//    (the table `ferrox backends` prints);
//  - the fixture's `seq_leak` fault (a row also sees one cell of the next
//    sequence in the call) must fail that comparison, while one sequence
//    alone is untouched by it (the fault leaks between sequences only);
//  - a 1.2 plugin (fixture option abi: "1.2"): still resident for one
//    sequence, a context of several refused with a message naming ABI 1.2,
//    and a model loaded for several sequences stays in host memory, saying why;
//    through ferrox.h too: ferrox_model_params.max_sequences is what makes a
//    4-sequence ferrox_context_new succeed there.
// Exits 77 (skipped) when no tiny model is present ($FERROX_TINY_MODELS).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "batch_script.h"
#include "ferrox/config.h"
#include "ferrox/dispatch.h"
#include "ferrox/ferrox.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "ferrox/model/resident_ops.h"
#include "ferrox/op.h"
#include "ferrox/plugin_loader.h"
#include "ferrox/quant_kind.h"
#include "model_inputs.h"
#include "plain_checks.h"

using namespace ferrox;
using ferrox::test::Agreement;
using ferrox::test::check;
using ferrox::test::failures;
using model::Context;
using model::ContextOptions;

namespace {

// As test_resident_parity.py: both sides run the same reference math, so
// anything above this is a plumbing bug; a wrong op costs > 1e-4.
constexpr double kResidentNmseMax = 1e-9;

// The fixture alone, with `options` as its YAML section.
PluginSet load_fixture(const std::string& options) {
    const std::string yaml = "backends: {order: [resident]}\n" +
                             (options.empty() ? "" : "resident: {" + options + "}\n");
    auto config = parse_config(yaml, "resident_batches.yaml");
    if (!config) check(false, "config: " + config.error().message());
    LoaderOptions loader;
    loader.plugin_dirs = {FERROX_FIXTURE_PLUGIN_DIR};
    loader.read_environment = false;
    return PluginSet::load(config ? *config : default_config(), loader);
}

using Loaded = ferrox::test::ScriptModel;

Loaded load(const PluginSet& plugins, const gguf::File& file, bool resident, uint32_t max_sequences,
            bool strict = false) {
    return ferrox::test::load_for_script(plugins.selected(), file, resident, max_sequences, strict);
}

using Rows = ferrox::test::ScriptRows;

Agreement agree(const Rows& got, const Rows& want) {
    return ferrox::test::agree(got, want, kResidentNmseMax);
}

Rows run_on(const model::Model& m, uint32_t n_seq, bool only_seq0, const std::string& what) {
    return ferrox::test::run_script_on(m, n_seq, only_seq0, what);
}

// Every element op the resident pass recorded (probe and run) is one that
// model::resident_element_ops() lists, which is what `ferrox backends` shows.
void listed_ops_cover_the_pass(const KernelRegistry& registry, const std::string& name) {
    const std::vector<model::ResidentElementOp> listed = model::resident_element_ops();
    size_t seen = 0;
    for (const RegistryEntry& e : registry.seal().entries) {
        if (e.key.backend != "resident" || e.key.op == FERROX_OP_MATVEC ||
            e.key.op == FERROX_OP_GEMM || e.key.op == FERROX_OP_GET_ROWS)
            continue;
        ++seen;
        const model::ResidentElementOp op{e.key.op, e.key.kind};
        check(std::find(listed.begin(), listed.end(), op) != listed.end(),
              name + ": the pass issued " + std::string(op_name(op.op)) + " on " +
                  std::string(kind_name(op.kind)) + " (" + e.key.role +
                  "), which resident_element_ops() does not list");
    }
    check(seen > 0, name + ": the resident pass recorded element ops");
}

void resident_equals_host(const PluginSet& plugins, const PluginSet& leaky, const gguf::File& file,
                          const std::string& name) {
    const Loaded host = load(plugins, file, false, 4);
    const Loaded resident = load(plugins, file, true, 4);
    if (!host.model || !resident.model) return;
    check(resident.model->residency().resident,
          name + ": the 1.3 fixture keeps a 4-sequence model resident" +
              (resident.model->residency().resident
                   ? std::string()
                   : " (not: " + resident.model->residency().reason + ")"));
    const Rows want = run_on(*host.model, 4, false, name + " host");
    const Agreement a = agree(run_on(*resident.model, 4, false, name + " resident"), want);
    check(a.ok(), name + ": 4 sequences, resident vs host: " + a.text());
    listed_ops_cover_the_pass(*resident.registry, name);

    const Loaded faulty = load(leaky, file, true, 4);
    if (!faulty.model) return;
    const Agreement bad = agree(run_on(*faulty.model, 4, false, name + " seq_leak"), want);
    check(!bad.ok(), name + ": with the seq_leak fault the comparison fails: " + bad.text());
    // The same fault cannot touch one sequence alone: it leaks between sequences only.
    const Rows alone = run_on(*host.model, 4, true, name + " host, sequence 0 alone");
    const Agreement solo = agree(run_on(*faulty.model, 4, true, name + " seq_leak alone"), alone);
    check(solo.ok(), name + ": seq_leak on sequence 0 alone changes nothing: " + solo.text());
}

void old_plugin(const PluginSet& abi12, const PluginSet& plugins, const gguf::File& file,
                const std::string& name) {
    const Loaded one = load(abi12, file, true, 1);
    if (!one.model) return;
    check(one.model->residency().resident,
          name + ": a 1.2 plugin is still resident for one sequence");
    ContextOptions opt;
    opt.context = 128;
    opt.sequences = 4;
    opt.batch = 64;
    const auto refused = Context::create(*one.model, opt);
    const std::string message = refused ? "" : refused.error().message();
    check(!refused && message.find("ABI 1.2") != std::string::npos &&
              message.find("attention_cells") != std::string::npos,
          name + ": a 4-sequence context on a 1.2 resident model is refused: " + message);
    // One sequence on the 1.2 entry equals the host path.
    const Loaded host = load(plugins, file, false, 1);
    if (!host.model) return;
    const Agreement a =
        agree(run_on(*one.model, 1, true, name + " 1.2"), run_on(*host.model, 1, true, name));
    check(a.ok(), name + ": one sequence on a 1.2 plugin, resident vs host: " + a.text());

    // Strict: the fallback is recorded as what it is, not as a violation.
    const Loaded many = load(abi12, file, true, 4, true);
    if (!many.model) return;
    const std::string& why = many.model->residency().reason;
    check(!many.model->residency().resident && why.find("ABI 1.2") != std::string::npos,
          name +
              ": loaded (strict) for 4 sequences on a 1.2 plugin, the model stays in host "
              "memory: " +
              why);
    bool by_design = false;
    const RegistryReport report = many.registry->seal();
    for (const RegistryEntry& e : report.entries)
        by_design = by_design || (e.key.op == FERROX_OP_ATTENTION &&
                                  e.outcome == Outcome::ByDesign && e.key.backend == "resident");
    check(by_design && report.violations.empty(),
          name + ": its attention is recorded by-design on the 1.2 backend, no violation (" +
              std::to_string(report.violations.size()) + " violations)");
    const Agreement b = agree(run_on(*many.model, 4, false, name + " 1.2, host memory"),
                              run_on(*host.model, 4, false, name + " host"));
    check(b.ok(), name + ": and runs 4 sequences there: " + b.text());
}

// The same through the C API: a config file naming the 1.2 fixture, the
// fixture's folder as plugin_dirs; max_sequences left 0 (1) and set to 4.
void c_api_max_sequences(const std::filesystem::path& model_path, const std::string& name) {
    const std::filesystem::path yaml =
        std::filesystem::temp_directory_path() /
        ("ferrox-resident-abi12-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(yaml) << "backends: {order: [resident]}\nresident: {abi: \"1.2\"}\n";
    const std::string config = yaml.string();
    const char* dirs[] = {FERROX_FIXTURE_PLUGIN_DIR};
    for (uint32_t max_sequences : {0u, 4u}) {
        ferrox_call_status st;
        std::memset(&st, 0, sizeof st);
        st.struct_size = sizeof st;
        ferrox_model_params mp;
        ferrox_model_params_default(&mp);
        mp.config_path = config.c_str();
        mp.plugin_dirs = dirs;
        mp.n_plugin_dirs = 1;
        mp.n_ctx_max = 128;
        mp.n_batch_max = 64;
        mp.max_sequences = max_sequences;
        ferrox_model* model = nullptr;
        if (ferrox_model_load(model_path.c_str(), &mp, &model, &st) != FERROX_CODE_OK) {
            check(false, name + ": ferrox_model_load: " + st.message);
            continue;
        }
        ferrox_context_params cp;
        ferrox_context_params_default(&cp);
        cp.n_seq = 4;
        ferrox_context* ctx = nullptr;
        const ferrox_code code = ferrox_context_new(model, &cp, &ctx, &st);
        const std::string what =
            name + ": ferrox.h, 1.2 fixture, max_sequences " + std::to_string(max_sequences);
        if (max_sequences == 0)
            check(code == FERROX_CODE_INVALID_ARGUMENT &&
                      std::string(st.message).find("ABI 1.2") != std::string::npos,
                  what + ": a 4-sequence context is refused, naming ABI 1.2 (" + st.message + ")");
        else
            check(code == FERROX_CODE_OK,
                  what + ": a 4-sequence context is created (host memory): " +
                      (code == FERROX_CODE_OK ? std::string("ok") : std::string(st.message)));
        ferrox_context_free(ctx);
        ferrox_model_free(model);
    }
    std::filesystem::remove(yaml);
}

// llama4's chunked layers on the cell-list path (ABI 1.3's attention_cells):
// each row's span starts at its chunk's first cell (llama.cpp's chunk of
// 8192). One sequence past the first chunk, prefilled in batches of 48 (one
// straddling the boundary), gives the host path's rows around the boundary.
void chunked_spans(const PluginSet& plugins, const gguf::File& file, const std::string& name) {
    constexpr uint32_t kLength = 8256, kWatch = 8160;
    const auto load_at = [&](bool resident) {
        Loaded l;
        l.registry = std::make_unique<KernelRegistry>();
        l.dispatcher = std::make_unique<Dispatcher>(plugins.selected(), *l.registry);
        model::ModelOptions options;
        options.context = kLength;
        options.batch = 48;
        options.allow_resident = resident;
        options.sequences = 1;
        auto m = model::Model::load(file, *l.dispatcher, *l.registry, options);
        if (!m) check(false, name + ": " + m.error().message());
        if (m) l.model = std::move(*m);
        return l;
    };
    const auto tail = [&](const model::Model& m) {
        Rows out;
        ContextOptions opt;
        opt.context = kLength;
        opt.sequences = 1;
        opt.batch = 48;
        auto c = Context::create(m, opt);
        if (!c) {
            check(false, name + ": " + c.error().message());
            return out;
        }
        for (uint32_t start = 0; start < kLength; start += 48) {
            model::Batch b;
            for (uint32_t i = start; i < std::min(kLength, start + 48); ++i)
                b.add(static_cast<int32_t>(10 + (i * 7919u) % 30000u), static_cast<int32_t>(i), {0},
                      i >= kWatch);
            if (auto st = (*c)->decode(b); !st) {
                check(false, name + ": decode: " + st.message);
                return out;
            }
            for (uint32_t i = 0; i < b.size(); ++i)
                if (auto l = (*c)->logits(i); !l.empty())
                    out.push_back({0, std::vector<float>(l.begin(), l.end())});
        }
        return out;
    };
    const Loaded host = load_at(false), resident = load_at(true);
    if (!host.model || !resident.model) return;
    check(resident.model->residency().resident, name + ": the fixture keeps the model resident");
    const Agreement a = agree(tail(*resident.model), tail(*host.model));
    check(a.ok() && a.rows == kLength - kWatch,
          name + ": past the chunk boundary, resident (cell spans) vs host: " + a.text());
}

}  // namespace

int main() {
    const std::vector<std::filesystem::path> models =
        test::tiny_models({"llama", "qwen2", "qwen3", "qwen3moe", "gemma3"});
    const std::vector<std::filesystem::path> chunked = test::tiny_models({"llama4"});
    const std::filesystem::path tiny = test::tiny_models_dir();
    if (models.empty() && chunked.empty()) {
        std::printf("SKIP: no tiny models in %s (tests/model/make_tiny_models.py)\n", tiny.c_str());
        return 77;
    }
    const PluginSet plugins = load_fixture("");
    const PluginSet leaky = load_fixture("fault: seq_leak");
    const PluginSet abi12 = load_fixture("abi: \"1.2\"");
    if (plugins.selected().empty() || leaky.selected().empty() || abi12.selected().empty()) {
        std::printf("FAIL: the resident fixture did not load from %s\n", FERROX_FIXTURE_PLUGIN_DIR);
        return 1;
    }
    for (const auto& path : models) {
        auto file = gguf::File::open(path);
        if (!file) {
            check(false, path.string() + ": " + file.error().message());
            continue;
        }
        const std::string name = path.stem().string();
        resident_equals_host(plugins, leaky, *file, name);
        if (name == "tiny-llama" || name == "tiny-gemma3") old_plugin(abi12, plugins, *file, name);
        if (name == "tiny-llama") c_api_max_sequences(path, name);
    }
    for (const auto& path : chunked) {
        auto file = gguf::File::open(path);
        if (!file) {
            check(false, path.string() + ": " + file.error().message());
            continue;
        }
        chunked_spans(plugins, *file, path.stem().string());
    }
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
