// Gemma 3 270M end to end through the CPU plugin: exits 77 (skipped, with a
// visible reason) when the model file is absent. Checks that the prompt's
// batched (GEMM) prefill and one-token-at-a-time (MATVEC) decode agree, that
// every-position logits equal last-position logits, and that greedy decoding
// is deterministic. Correctness against llama.cpp: tests/parity/.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "ferrox/sampling.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "loaded_model.h"
#include "plain_checks.h"

using namespace ferrox;
using test::check;
using test::failures;
using test::nmse;

namespace {

std::filesystem::path model_path() {
    if (const char* env = std::getenv("FERROX_GEMMA3_GGUF")) return env;
    const char* home = std::getenv("HOME");
    return std::filesystem::path(home ? home : "/root") /
           ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf";
}

}  // namespace

int main() {
    const auto path = model_path();
    if (!std::filesystem::exists(path)) {
        std::printf("SKIP: %s is absent (set FERROX_GEMMA3_GGUF)\n", path.c_str());
        return 77;
    }
    const PluginSet plugins = test::build_plugins();
    if (plugins.selected().empty()) return 1;
    KernelRegistry registry;
    Dispatcher dispatcher(plugins.selected(), registry);
    auto file = gguf::File::open(path);
    if (!file) return std::printf("FAIL: %s\n", file.error().message().c_str()), 1;
    model::ModelOptions options;
    options.context = 64;
    options.batch = 16;  // the 20-token prompt runs in two chunks
    auto m = model::Model::load(*file, dispatcher, registry, options);
    if (!m) return std::printf("FAIL: %s\n", m.error().message().c_str()), 1;
    auto tok = Tokenizer::from_gguf(*file);
    if (!tok) return std::printf("FAIL: %s\n", tok.error().message().c_str()), 1;

    const auto tokens = (*tok)->encode(
        "The quick brown fox jumps over the lazy dog. In the morning, the sun rises in the", true,
        true);
    const size_t n = tokens.size();
    const uint64_t vocab = (*m)->vocab();
    check(n > 16, "the prompt spans more than one batch chunk (" + std::to_string(n) + " tokens)");

    std::vector<float> all(n * vocab);
    check(bool((*m)->forward(tokens, 0, all)), "every-position forward runs");
    bool finite = true;
    for (float v : all) finite = finite && std::isfinite(v);
    check(finite, "logits are finite");

    std::vector<float> last(vocab);
    check(bool((*m)->forward(tokens, 0, last)), "last-position forward runs");
    const std::span<const float> all_last(all.data() + (n - 1) * vocab, vocab);
    check(nmse(last, all_last) < 1e-6, "last-position logits equal the every-position ones");

    // Decode the same prompt one token at a time: MATVEC instead of GEMM.
    std::vector<float> step(vocab);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!(*m)->forward(std::span<const int32_t>(&tokens[i], 1), uint32_t(i), step)) {
            check(false, "decode step runs");
            break;
        }
        worst = std::max(worst, nmse(step, {all.data() + i * vocab, vocab}));
    }
    // The two paths may sum in another order (on AVX-512 the CPU plugin's fused MATVEC
    // and its GEMM tile do; each matches the reference to 1e-10 per product). A float
    // difference that flips one int8 rounding of an activation is amplified by Gemma's
    // large norm weights: measured 0 on the portable and AVX2 paths, 1.1e-2 on AVX-512.
    // A KV-cache, mask or position bug lands near 1, far above 2e-2.
    check(worst < 2e-2, "token-by-token decode matches batched prefill (worst NMSE " +
                            fmt::format("{:.2e}", worst) + ")");

    auto greedy = [&]() {
        std::vector<int32_t> seq = tokens;
        std::vector<float> logits(vocab);
        (void)(*m)->forward(seq, 0, logits);
        for (int i = 0; i < 8; ++i) {
            seq.push_back(argmax(logits));
            (void)(*m)->forward(std::span<const int32_t>(&seq.back(), 1), uint32_t(seq.size() - 1),
                                logits);
        }
        return std::vector<int32_t>(seq.begin() + std::ptrdiff_t(n), seq.end());
    };
    const auto a = greedy(), b = greedy();
    check(a == b, "greedy decoding is deterministic: \"" + (*tok)->decode(a) + "\"");
    return failures == 0 ? 0 : 1;
}
