#include "ferrox/model/hparams.h"

#include <cmath>

#include "hparams_sanity.h"

namespace ferrox::model {
namespace {

struct ArchInfo {
    std::string_view name;
    Arch arch;
};
constexpr ArchInfo kArchs[] = {{"llama", Arch::Llama},
                               {"qwen2", Arch::Qwen2},
                               {"qwen3", Arch::Qwen3},
                               {"qwen3moe", Arch::Qwen3Moe},
                               {"gemma3", Arch::Gemma3}};

// Reads `<arch>.<suffix>` as u32, with the key named in any error.
class Keys {
  public:
    Keys(const gguf::File& f, std::string prefix) : file_(f), prefix_(std::move(prefix)) {}
    std::string key(std::string_view suffix) const { return prefix_ + "." + std::string(suffix); }
    Expected<uint32_t> u32(std::string_view suffix) const { return file_.get_u32(key(suffix)); }
    Expected<uint32_t> u32_or(std::string_view suffix, uint32_t v) const {
        return file_.get_u32_or(key(suffix), v);
    }
    Expected<float> f32(std::string_view suffix) const { return file_.get_f32(key(suffix)); }
    Expected<float> f32_or(std::string_view suffix, float v) const {
        return file_.get_f32_or(key(suffix), v);
    }
    bool has(std::string_view suffix) const { return file_.find(key(suffix)) != nullptr; }

  private:
    const gguf::File& file_;
    std::string prefix_;
};

Error refuse(const gguf::File& f, std::string_view key, std::string_view why) {
    return make_error("{}: metadata key '{}': {}", f.path().string(), key, why);
}

}  // namespace

std::string_view arch_name(Arch arch) {
    for (const auto& a : kArchs)
        if (a.arch == arch) return a.name;
    return "unknown";
}

Expected<Hparams> read_hparams(const gguf::File& file) {
    auto name = file.get_string("general.architecture");
    if (!name) return name.error();
    Hparams hp;
    hp.arch_name = *name;
    bool known = false;
    for (const auto& a : kArchs)
        if (a.name == *name) hp.arch = a.arch, known = true;
    if (!known)
        return refuse(file, "general.architecture",
                      fmt::format("architecture '{}' is not implemented (known: llama, qwen2, "
                                  "qwen3, qwen3moe, gemma3)",
                                  *name));
    const Keys k(file, *name);

// Each required key: a missing one is returned as the reader's Error, which names it.
#define FERROX_READ(dst, expr)      \
    do {                            \
        auto v_ = (expr);           \
        if (!v_) return v_.error(); \
        dst = *v_;                  \
    } while (0)

    FERROX_READ(hp.n_embd, k.u32("embedding_length"));
    FERROX_READ(hp.n_layer, k.u32("block_count"));
    FERROX_READ(hp.n_head, k.u32("attention.head_count"));
    FERROX_READ(hp.n_head_kv, k.u32_or("attention.head_count_kv", hp.n_head));
    FERROX_READ(hp.n_ctx_train, k.u32("context_length"));
    FERROX_READ(hp.rms_eps, k.f32("attention.layer_norm_rms_epsilon"));
    if (hp.n_head == 0) return refuse(file, k.key("attention.head_count"), "is 0");
    if (hp.n_embd == 0) return refuse(file, k.key("embedding_length"), "is 0");
    if (hp.n_layer == 0) return refuse(file, k.key("block_count"), "is 0");
    if (hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0)
        return refuse(file, k.key("attention.head_count_kv"),
                      fmt::format("{} does not divide head_count {}", hp.n_head_kv, hp.n_head));
    // key_length defaults to n_embd / n_head in the format itself.
    FERROX_READ(hp.head_dim_k, k.u32_or("attention.key_length", hp.n_embd / hp.n_head));
    FERROX_READ(hp.head_dim_v, k.u32_or("attention.value_length", hp.head_dim_k));
    if (hp.head_dim_k % 2 != 0)
        return refuse(file, k.key("attention.key_length"),
                      fmt::format("{} is odd; RoPE rotates pairs", hp.head_dim_k));
    if (k.has("rope.dimension_count")) {
        uint32_t n_rot = 0;
        FERROX_READ(n_rot, k.u32("rope.dimension_count"));
        if (n_rot != hp.head_dim_k)
            return refuse(file, k.key("rope.dimension_count"),
                          fmt::format("partial RoPE ({} of {} dims) is not implemented", n_rot,
                                      hp.head_dim_k));
    }
    FERROX_READ(hp.rope_base, k.f32_or("rope.freq_base", 10000.0f));
    if (k.has("rope.scaling.type")) {
        auto type = file.get_string(k.key("rope.scaling.type"));
        if (!type) return type.error();
        if (*type == "linear") {
            float factor = 1;
            FERROX_READ(factor, k.f32("rope.scaling.factor"));
            if (!(factor > 0)) return refuse(file, k.key("rope.scaling.factor"), "must be > 0");
            hp.rope_freq_scale = 1.0f / factor;
        } else if (*type != "none") {
            return refuse(file, k.key("rope.scaling.type"),
                          fmt::format("rope scaling '{}' is not implemented", *type));
        }
    }
    for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"})
        if (k.has(cap)) return refuse(file, k.key(cap), "logit soft-capping is not implemented");

    auto embd = file.find_tensor("token_embd.weight");
    if (!embd) return make_error("{}: tensor 'token_embd.weight' is missing", file.path().string());
    hp.vocab = embd->row_count();

    hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
    switch (hp.arch) {
        case Arch::Llama:
            hp.rope = RopeStyle::Normal;
            break;
        case Arch::Qwen2:
            hp.rope = RopeStyle::Neox;
            hp.qkv_bias = true;
            break;
        case Arch::Qwen3:
        case Arch::Qwen3Moe:
            hp.rope = RopeStyle::Neox;
            hp.qk_norm = true;
            break;
        case Arch::Gemma3:
            hp.rope = RopeStyle::Neox;
            hp.qk_norm = true;
            hp.post_norms = true;
            hp.embed_scale = true;
            hp.activation = FfnActivation::GeluTanh;
            FERROX_READ(hp.sliding_window, k.u32("attention.sliding_window"));
            // Gemma 3's architecture: five local layers, then one global
            // (layer il is global when (il + 1) % 6 == 0); local layers use
            // rope base 10000 and no scaling. Real Gemma 3 files leave these
            // out, but llama.cpp honours the optional keys below (other
            // gemma3-architecture models set them), so we must not ignore them.
            FERROX_READ(hp.swa_period, k.u32_or("attention.sliding_window_pattern", 6));
            if (hp.swa_period == 0)  // llama.cpp: every layer local
                return refuse(file, k.key("attention.sliding_window_pattern"),
                              "0 (no global layer) is not implemented");
            FERROX_READ(hp.rope_base_local, k.f32_or("rope.freq_base_swa", 10000.0f));
            break;
    }
    if (hp.arch == Arch::Qwen3Moe) {
        FERROX_READ(hp.n_expert, k.u32("expert_count"));
        FERROX_READ(hp.n_expert_used, k.u32("expert_used_count"));
        FERROX_READ(hp.n_ff_expert, k.u32("expert_feed_forward_length"));
        auto norm = file.get_bool_or(k.key("expert_weights_norm"), true);
        if (!norm) return norm.error();
        hp.expert_weights_norm = *norm;
        if (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)
            return refuse(
                file, k.key("expert_used_count"),
                fmt::format("{} is not in 1..expert_count ({})", hp.n_expert_used, hp.n_expert));
        hp.n_ff = 0;
    } else {
        FERROX_READ(hp.n_ff, k.u32("feed_forward_length"));
    }
#undef FERROX_READ
    if (auto sane = check_hparams_sane(file, hp, *name); !sane) return sane.error();
    return hp;
}

}  // namespace ferrox::model
