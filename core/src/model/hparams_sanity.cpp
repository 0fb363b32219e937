#include "hparams_sanity.h"

#include <cmath>
#include <variant>

#include "ferrox/model/architecture.h"

namespace ferrox::model {
Error refuse(const gguf::File& f, std::string_view key, std::string_view why) {
    return make_error("{}: metadata key '{}': {}", f.path().string(), key, why);
}

namespace {

constexpr uint32_t kMaxLayers = 512;

// Positive and finite: what a norm epsilon or a RoPE base must be.
bool positive_finite(float x) { return std::isfinite(x) && x > 0; }

}  // namespace

Expected<void> check_hparams_sane(const gguf::File& file, const Hparams& hp,
                                  const std::string& prefix) {
    const auto key = [&](std::string_view suffix) { return prefix + "." + std::string(suffix); };
    // An epsilon of 0 divides by zero on an all-zero row; one >= 1 swamps the
    // mean square of any real activation.
    if (!positive_finite(hp.rms_eps) || hp.rms_eps >= 1.0f)
        return refuse(file,
                      key(hp.arch ? norm_eps_key(*hp.arch) : "attention.layer_norm_rms_epsilon"),
                      fmt::format("{} is not in (0, 1)", hp.rms_eps));
    if (!positive_finite(hp.rope_base))
        return refuse(file, key("rope.freq_base"),
                      fmt::format("{} is not a positive finite RoPE base", hp.rope_base));
    if (!positive_finite(hp.rope_base_local))
        return refuse(file, key("rope.freq_base_swa"),
                      fmt::format("{} is not a positive finite RoPE base", hp.rope_base_local));
    if (!positive_finite(hp.rope_freq_scale))
        return refuse(file, key("rope.scaling.factor"),
                      fmt::format("gives a frequency scale of {}; it must be finite and > 0",
                                  hp.rope_freq_scale));
    // Per-layer work before any tensor is bound (inspect's layer pattern) is
    // sized by this count; llama.cpp's own ceiling (LLAMA_MAX_LAYERS) bounds it.
    // NextN blocks (bound, not run) count too: binding walks them.
    if (uint64_t{hp.n_layer} + hp.n_layer_nextn > kMaxLayers)
        return refuse(file, key("block_count"),
                      fmt::format("{} layers; ferrox reads at most {}",
                                  uint64_t{hp.n_layer} + hp.n_layer_nextn, kMaxLayers));
    if (hp.n_ctx_train == 0) return refuse(file, key("context_length"), "is 0");
    // An attention-free model (mamba2: no head_count read) has no head to size.
    if (hp.n_head != 0 && (hp.head_dim_k == 0 || hp.head_dim_v == 0))
        return refuse(file,
                      key(hp.head_dim_k == 0 ? "attention.key_length" : "attention.value_length"),
                      "is 0");
    // Token ids the tokenizer can produce index token_embd's rows.
    if (const gguf::Value* tokens = file.find("tokenizer.ggml.tokens"))
        if (const auto* list = std::get_if<gguf::Array>(tokens); list && list->size() > hp.vocab)
            return refuse(file, "tokenizer.ggml.tokens",
                          fmt::format("{} tokens, but token_embd.weight has only {} rows: ids "
                                      "{}..{} would index past it",
                                      list->size(), hp.vocab, hp.vocab, list->size() - 1));
    return {};
}

}  // namespace ferrox::model
