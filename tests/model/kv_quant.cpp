// Quantized KV caches (q8_0, q4_0) through the CPU plugin, against an f16
// cache of the same model:
//  - logits NMSE on the tiny models (tests/model/make_tiny_models.py), q8_0
//    and q4_0 each within a stated bound, and not bit-identical to f16 (the
//    cells really are quantized);
//  - a saved q8_0 sequence restored into an f16 context is refused by name;
//  - a model whose heads are not whole blocks is refused naming its keys;
//  - perplexity on real text (the GPL-3 in /usr/share/common-licenses, which
//    no model here was tuned on) with Gemma 3 270M: q8_0 at most 0.5% above
//    f16, q4_0 printed and held to a looser bound.
// Exits 77 (skipped, with the reason) when no model file is present.
// $FERROX_TINY_MODELS names another tiny-model folder.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ferrox/dispatch.h"
#include "ferrox/gguf/file.h"
#include "ferrox/model/context.h"
#include "ferrox/model/model.h"
#include "ferrox/plugin_loader.h"
#include "ferrox/quant_kind.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "loaded_model.h"
#include "model_inputs.h"
#include "plain_checks.h"

using namespace ferrox;
using ferrox::test::check;
using ferrox::test::failures;
using ferrox::test::nmse;
using model::Batch;
using model::Context;
using model::ContextOptions;

namespace {

// Worst logits NMSE against an f16 cache per tiny model, measured (seed
// below; 6 Dec 2026) with a margin of 2.5-3x: llama 7.2e-4 / 1.6e-2, qwen3
// 8.6e-4 / 2.9e-2, gemma3 1.1e-2 / 0.71. Tiny gemma3's random weights make
// its scores large, so rounding K moves its softmax far: its q4_0 figure is
// only printed (q4_0 is held on the other two and on Gemma 3 270M).
struct TinyBounds {
    const char* name;
    double q8, q4;  // q4 < 0: printed, not held
};
constexpr TinyBounds kTinyBounds[] = {
    {"tiny-llama", 2e-3, 5e-2}, {"tiny-qwen3", 2.5e-3, 8e-2}, {"tiny-gemma3", 3e-2, -1}};
// The target for q8_0, and a looser one that still catches a broken
// q4_0 store (a wrong scale or nibble order multiplies perplexity).
constexpr double kPerplexityQ8 = 0.005;
constexpr double kPerplexityQ4 = 0.25;
// A window of the GPL-3 text, scored over its second half (each scored token
// sees at least half a window of context, as llama-perplexity scores); the
// window fits a few seconds on two cores. $FERROX_KV_PPL_TOKENS sets a longer
// one for the figures in docs/cpu.md.
constexpr size_t kPerplexityTokens = 512;

struct Loaded {
    std::unique_ptr<KernelRegistry> registry;
    std::unique_ptr<Dispatcher> dispatcher;
    std::unique_ptr<model::Model> model;
};

Loaded load(const PluginSet& plugins, const gguf::File& file, model::KvKinds kv_kinds,
            uint32_t context) {
    Loaded l;
    l.registry = std::make_unique<KernelRegistry>();
    l.dispatcher = std::make_unique<Dispatcher>(plugins.selected(), *l.registry);
    model::ModelOptions options;
    options.context = context;
    options.batch = 64;
    options.allow_resident = false;
    options.kv_kinds = kv_kinds;
    auto m = model::Model::load(file, *l.dispatcher, *l.registry, options);
    if (!m) {
        check(false, model::kv_kinds_name(kv_kinds) + ": " + m.error().message());
        return l;
    }
    l.model = std::move(*m);
    return l;
}

// The logits of positions `first`.. of `tokens`, fed in chunks of 64 to one context.
std::vector<std::vector<float>> all_logits(const model::Model& m,
                                           const std::vector<int32_t>& tokens, size_t first = 0) {
    std::vector<std::vector<float>> rows;
    ContextOptions opt;
    opt.context = static_cast<uint32_t>(tokens.size());
    opt.batch = 64;
    auto ctx = Context::create(m, opt);
    if (!ctx) return check(false, ctx.error().message()), rows;
    Batch b;
    for (size_t start = 0; start < tokens.size(); start += 64) {
        b.clear();
        for (size_t i = start; i < std::min(tokens.size(), start + 64); ++i)
            b.add(tokens[i], static_cast<int32_t>(i), {0}, i >= first);
        if (auto st = (*ctx)->decode(b); !st) return check(false, st.message), rows;
        uint32_t row = 0;  // logits rows are the wanted tokens', in batch order
        for (size_t i = start; i < std::min(tokens.size(), start + 64); ++i) {
            if (i < first) continue;
            auto l = (*ctx)->logits(row++);
            rows.emplace_back(l.begin(), l.end());
        }
    }
    return rows;
}

double worst_nmse(const std::vector<std::vector<float>>& got,
                  const std::vector<std::vector<float>>& want, bool* identical) {
    double worst = got.size() == want.size() ? 0 : 1;
    *identical = got.size() == want.size();
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
        worst = std::max(worst, nmse(got[i], want[i]));
        *identical = *identical && got[i] == want[i];
    }
    return worst;
}

// A K q8_0 / V f16 state: restored into a context of the same kinds it
// continues bit for bit; a q8_0 one (same K, other V) refuses it naming both.
void mixed_state_round_trip(const model::Model& mixed, const model::Model& q8,
                            const std::vector<int32_t>& tokens, const std::string& name) {
    ContextOptions opt;
    opt.context = 32;
    opt.batch = 32;
    auto a = Context::create(mixed, opt);
    auto b = Context::create(mixed, opt);
    auto c = Context::create(q8, opt);
    if (!a || !b || !c) return check(false, name + ": mixed contexts");
    Batch batch;
    for (int32_t i = 0; i < 8; ++i) batch.add(tokens[static_cast<size_t>(i)], i, {0}, i == 7);
    check(bool((*a)->decode(batch)), name + ": mixed prompt");
    auto saved = (*a)->seq_save(0);
    if (!saved) return check(false, name + ": mixed seq_save: " + saved.error().message());
    check(bool((*b)->seq_restore(0, *saved)), name + ": a K q8_0 / V f16 state into its kinds");
    auto refused = (*c)->seq_restore(0, *saved);
    check(!refused && refused.error().message().find("K Q8_0 / V F16") != std::string::npos &&
              refused.error().message().find("is Q8_0") != std::string::npos,
          name + ": a K q8_0 / V f16 state into a q8_0 context is refused naming both (" +
              (refused ? std::string("accepted") : refused.error().message()) + ")");
    Batch next;
    next.add(tokens[8], 8, {0}, true);
    check(bool((*a)->decode(next)) && bool((*b)->decode(next)), name + ": mixed next token");
    auto la = (*a)->logits(0);
    auto lb = (*b)->logits(0);
    check(std::vector<float>(la.begin(), la.end()) == std::vector<float>(lb.begin(), lb.end()),
          name + ": restored mixed cells give the saved cells' next logits, bit for bit");
}

void tiny_logits(const PluginSet& plugins, const std::filesystem::path& path, std::mt19937& rng) {
    auto file = gguf::File::open(path);
    if (!file) return check(false, path.string() + ": " + file.error().message());
    const std::string name = path.stem().string();
    const TinyBounds* bounds = nullptr;
    for (const TinyBounds& b : kTinyBounds)
        if (name == b.name) bounds = &b;
    if (!bounds) return check(false, name + ": no bounds");
    using model::KvKinds;
    Loaded f16 = load(plugins, *file, KvKinds::both(FERROX_KIND_F16), 128);
    Loaded q8 = load(plugins, *file, KvKinds::both(FERROX_KIND_Q8_0), 128);
    Loaded q4 = load(plugins, *file, KvKinds::both(FERROX_KIND_Q4_0), 128);
    // Mixed kinds (llama.cpp's -ctk q8_0 -ctv f16 and -ctk q8_0 -ctv q4_0).
    Loaded q8_f16 = load(plugins, *file, {FERROX_KIND_Q8_0, FERROX_KIND_F16}, 128);
    Loaded q8_q4 = load(plugins, *file, {FERROX_KIND_Q8_0, FERROX_KIND_Q4_0}, 128);
    if (!f16.model || !q8.model || !q4.model || !q8_f16.model || !q8_q4.model) return;
    std::uniform_int_distribution<int32_t> token(
        0, static_cast<int32_t>(std::min<uint64_t>(f16.model->vocab(), 30000) - 1));
    std::vector<int32_t> tokens(100);
    for (int32_t& t : tokens) t = token(rng);
    const auto want = all_logits(*f16.model, tokens);
    bool same8 = false, same4 = false;
    const double q8_nmse = worst_nmse(all_logits(*q8.model, tokens), want, &same8);
    const double q4_nmse = worst_nmse(all_logits(*q4.model, tokens), want, &same4);
    std::printf("      %s: worst logits NMSE vs f16 KV over %zu positions: q8_0 %.3g, q4_0 %.3g\n",
                name.c_str(), tokens.size(), q8_nmse, q4_nmse);
    check(q8_nmse <= bounds->q8 && !same8,
          name + ": q8_0 KV within NMSE " + std::to_string(bounds->q8) + " of f16, not equal");
    check((bounds->q4 < 0 || q4_nmse <= bounds->q4) && !same4,
          name + ": q4_0 KV within NMSE " + std::to_string(bounds->q4) + " of f16, not equal");
    check(q4_nmse > q8_nmse, name + ": q4_0 is further from f16 than q8_0");
    // Mixed: q8_0 keys over f16 values are at least as close to f16 as q8_0
    // for both (only K is rounded), and not f16 itself; over q4_0 values they
    // sit between q8_0 and q4_0 (a factor 1.5 of slack each way: one draw).
    bool same_mixed = false, same_mixed4 = false;
    const double q8f16_nmse = worst_nmse(all_logits(*q8_f16.model, tokens), want, &same_mixed);
    const double q8q4_nmse = worst_nmse(all_logits(*q8_q4.model, tokens), want, &same_mixed4);
    std::printf("      %s: mixed K/V: K q8_0 / V f16 %.3g, K q8_0 / V q4_0 %.3g\n", name.c_str(),
                q8f16_nmse, q8q4_nmse);
    check(q8f16_nmse <= 1.5 * q8_nmse && q8f16_nmse > 0 && !same_mixed,
          name + ": K q8_0 / V f16 within q8_0's NMSE of f16, not equal");
    check(q8q4_nmse >= q8_nmse / 1.5 && (bounds->q4 < 0 || q8q4_nmse <= 1.5 * q4_nmse) &&
              !same_mixed4,
          name + ": K q8_0 / V q4_0 between q8_0 and q4_0");
    // A fault the checks above must see: values stored as q4_0 but the
    // q8_0/f16 numbers expected of them differ (V really is quantized).
    check(q8q4_nmse != q8f16_nmse, name + ": the V kind changes the logits");

    // A q8_0 state restores into a q8_0 context, and is refused by name by an f16 one.
    ContextOptions opt;
    opt.context = 32;
    opt.batch = 32;
    auto a = Context::create(*q8.model, opt);
    auto b = Context::create(*q8.model, opt);
    auto c = Context::create(*f16.model, opt);
    if (!a || !b || !c)
        return check(false,
                     name + ": contexts: " + (a ? b ? c.error() : b.error() : a.error()).message());
    Batch batch;
    for (int32_t i = 0; i < 8; ++i) batch.add(tokens[static_cast<size_t>(i)], i, {0}, i == 7);
    check(bool((*a)->decode(batch)), name + ": q8_0 prompt");
    auto saved = (*a)->seq_save(0);
    if (!saved) return check(false, name + ": seq_save: " + saved.error().message());
    check(bool((*b)->seq_restore(0, *saved)), name + ": a q8_0 state into a q8_0 context");
    auto refused = (*c)->seq_restore(0, *saved);
    check(!refused && refused.error().message().find("Q8_0") != std::string::npos &&
              refused.error().message().find("F16") != std::string::npos,
          name + ": a q8_0 state into an f16 context is refused naming both kinds (" +
              (refused ? std::string("accepted") : refused.error().message()) + ")");
    // The restored cells continue exactly as the saved ones.
    Batch next;
    next.add(tokens[8], 8, {0}, true);
    check(bool((*a)->decode(next)) && bool((*b)->decode(next)), name + ": next token");
    auto la = (*a)->logits(0);
    auto lb = (*b)->logits(0);
    check(std::vector<float>(la.begin(), la.end()) == std::vector<float>(lb.begin(), lb.end()),
          name + ": restored q8_0 cells give the saved cells' next logits, bit for bit");
    mixed_state_round_trip(*q8_f16.model, *q8.model, tokens, name);
}

void head_shape_refused() {
    model::Hparams hp;
    hp.arch_name = "llama";
    hp.head_dim_k = 48;
    hp.head_dim_v = 64;
    using model::KvKinds;
    auto r = model::check_kv_cache_shape(KvKinds::both(FERROX_KIND_Q8_0), hp);
    check(!r && r.error().message().find("llama.attention.key_length is 48") != std::string::npos,
          "a q8_0 cache for 48-dim keys is refused naming key_length (" +
              (r ? std::string("accepted") : r.error().message()) + ")");
    check(bool(model::check_kv_cache_shape(KvKinds::both(FERROX_KIND_F16), hp)),
          "an f16 cache takes any head");
    // Each cache against its own heads: f16 keys of 48 over q8_0 values of 64 fit.
    check(bool(model::check_kv_cache_shape({FERROX_KIND_F16, FERROX_KIND_Q8_0}, hp)),
          "f16 keys of 48 over q8_0 values of 64");
    hp.head_dim_k = 64;
    hp.head_dim_v = 48;
    r = model::check_kv_cache_shape({FERROX_KIND_Q8_0, FERROX_KIND_F16}, hp);
    check(bool(r), "q8_0 keys of 64 over f16 values of 48");
    r = model::check_kv_cache_shape({FERROX_KIND_F16, FERROX_KIND_Q4_0}, hp);
    check(!r && r.error().message().find("Q4_0 V cache") != std::string::npos &&
              r.error().message().find("value_length is 48") != std::string::npos &&
              r.error().message().find("-ctv") != std::string::npos,
          "q4_0 values of 48 are refused naming value_length and -ctv (" +
              (r ? std::string("accepted") : r.error().message()) + ")");
    hp.head_dim_v = 64;
    check(bool(model::check_kv_cache_shape(KvKinds::both(FERROX_KIND_Q4_0), hp)),
          "q4_0 takes 64-dim heads");
}

// exp(mean negative log-likelihood) of each next token of the second half of `tokens`.
double perplexity(const model::Model& m, const std::vector<int32_t>& tokens) {
    const size_t first = tokens.size() / 2;
    const auto rows = all_logits(m, tokens, first);
    if (rows.size() != tokens.size() - first) return NAN;
    double nll = 0;
    for (size_t i = first; i + 1 < tokens.size(); ++i) {
        const std::vector<float>& l = rows[i - first];
        double max = l[0];
        for (float v : l) max = std::max(max, static_cast<double>(v));
        double sum = 0;
        for (float v : l) sum += std::exp(static_cast<double>(v) - max);
        nll -= static_cast<double>(l[static_cast<size_t>(tokens[i + 1])]) - max - std::log(sum);
    }
    return std::exp(nll / static_cast<double>(tokens.size() - 1 - first));
}

[[maybe_unused]] void gemma_perplexity(const PluginSet& plugins, const std::filesystem::path& path,
                                       const std::filesystem::path& text_path) {
    std::ifstream in(text_path);
    if (!in) return (void)std::printf("      (no %s: perplexity skipped)\n", text_path.c_str());
    std::stringstream text;
    text << in.rdbuf();
    auto file = gguf::File::open(path);
    if (!file) return check(false, path.string() + ": " + file.error().message());
    auto tok = Tokenizer::from_gguf(*file);
    if (!tok) return check(false, tok.error().message());
    const char* env = std::getenv("FERROX_KV_PPL_TOKENS");
    const size_t want = env && *env ? std::strtoul(env, nullptr, 10) : kPerplexityTokens;
    if (want < 64 || want > 8192) return check(false, "FERROX_KV_PPL_TOKENS outside 64..8192");
    // About 4 characters a token; the whole file is ~35 KB (~8000 tokens).
    std::vector<int32_t> tokens = (*tok)->encode(text.str().substr(0, want * 6), true, false);
    if (tokens.size() < want)
        return check(false, "the GPL-3 text gives " + std::to_string(tokens.size()) + " tokens");
    tokens.resize(want);
    double ppl[3] = {};
    const ferrox_kind kinds[3] = {FERROX_KIND_F16, FERROX_KIND_Q8_0, FERROX_KIND_Q4_0};
    for (int k = 0; k < 3; ++k) {
        Loaded l =
            load(plugins, *file, model::KvKinds::both(kinds[k]), static_cast<uint32_t>(want));
        if (!l.model) return;
        ppl[k] = perplexity(*l.model, tokens);
    }
    const double d8 = ppl[1] / ppl[0] - 1, d4 = ppl[2] / ppl[0] - 1;
    std::printf(
        "      gemma-3-270m perplexity, GPL-3 tokens %zu..%zu of a %zu-token window: f16 KV "
        "%.4f, q8_0 %.4f (%+.3f%%), q4_0 %.4f (%+.3f%%)\n",
        want / 2, want - 1, want, ppl[0], ppl[1], 100 * d8, ppl[2], 100 * d4);
    // One-sided: on windows of 256-1024 tokens the q8_0 figure moves by about
    // +-0.5% around f16's (docs/cpu.md: +0.39% here, -0.51% over a 1024-token
    // window), so lower is noise, not a fault; higher by more is.
    check(std::isfinite(ppl[1]) && d8 <= kPerplexityQ8,
          "q8_0 KV perplexity at most 0.5% above f16's");
    check(std::isfinite(ppl[2]) && d4 <= kPerplexityQ4,
          "q4_0 KV perplexity at most 25% above f16's");
}

}  // namespace

int main() {
    const std::vector<std::filesystem::path> models =
        test::tiny_models({"llama", "qwen3", "gemma3"});
    const std::filesystem::path tiny = test::tiny_models_dir();
    const std::filesystem::path gemma = test::gemma_270m_path();
    const bool with_gemma = std::filesystem::exists(gemma);
    head_shape_refused();
    if (models.empty() && !with_gemma) {
        std::printf("SKIP: no tiny models in %s (tests/model/make_tiny_models.py) and no %s\n",
                    tiny.c_str(), gemma.c_str());
        return failures ? 1 : 77;
    }
    const PluginSet plugins = test::build_plugins();
    if (plugins.selected().empty()) return 1;
    const uint32_t seed = 20261206;
    std::printf("seed %u\n", seed);
    std::mt19937 rng(seed);
    for (const auto& path : models) tiny_logits(plugins, path, rng);
#if defined(__SANITIZE_ADDRESS__)
    // Three Gemma passes under ASan only slow CI down: the ci run scores them.
    std::printf("      (ASan build: the Gemma perplexity check runs in the ci build)\n");
#else
    if (with_gemma) gemma_perplexity(plugins, gemma, "/usr/share/common-licenses/GPL-3");
#endif
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
