#include "ferrox/model/hparams.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "ferrox/model/architecture.h"
#include "ferrox/model/rope_tables.h"
#include "hparams_readers.h"
#include "hparams_sanity.h"

namespace ferrox::model {
namespace {

// YaRN's tuning keys, each range-checked. An architecture whose llama.cpp
// graph reads them takes them; for the others llama.cpp keeps its defaults,
// so a file that says otherwise is refused: honouring it would disagree with
// llama.cpp, ignoring it with the file.
Expected<void> read_yarn_keys(const gguf::File& file, const Keys& k, const ArchSpec& arch,
                              Hparams& hp) {
    struct YarnKey {
        uint8_t bit;  // YarnKeys
        const char* key;
        float* value;
        float min;      // the smallest value allowed
        bool min_open;  // min itself excluded
        float max;
        // llama.cpp's value where it does not read the key: its ramp weight
        // is 1 for YaRN and 0 otherwise (what rope_spec derives from unset).
        float fixed;
    };
    const float inf = std::numeric_limits<float>::infinity();
    const YarnKey keys[] = {
        {kYarnBetaFast, "rope.scaling.yarn_beta_fast", &hp.rope_yarn_beta_fast, 0, true, inf,
         32.0f},
        {kYarnBetaSlow, "rope.scaling.yarn_beta_slow", &hp.rope_yarn_beta_slow, 0, true, inf, 1.0f},
        {kYarnExtFactor, "rope.scaling.yarn_ext_factor", &hp.rope_yarn_ext_factor, 0, false, 1,
         hp.rope_scaling == RopeScaling::Yarn ? 1.0f : 0.0f},
        {kYarnAttnFactor, "rope.scaling.yarn_attn_factor", &hp.rope_yarn_attn_factor, 0, true, inf,
         1.0f},
        {kYarnLogMultiplier, "rope.scaling.yarn_log_multiplier", &hp.rope_yarn_log_mul, 0, false,
         inf, 0.0f}};
    for (const YarnKey& y : keys) {
        if (!k.has(y.key)) continue;
        auto v = k.f32(y.key);
        if (!v) return v.error();
        const bool below = y.min_open ? !(*v > y.min) : !(*v >= y.min);
        if (below || *v > y.max || !std::isfinite(*v))
            return refuse(file, k.key(y.key),
                          fmt::format("{} is out of range ({} {}{})", *v, y.min_open ? ">" : ">=",
                                      y.min, y.max < inf ? fmt::format(", <= {}", y.max) : ""));
        if (!(arch.yarn_keys & y.bit) && *v != y.fixed)
            return refuse(file, k.key(y.key),
                          fmt::format("{} is not implemented for architecture '{}': llama.cpp "
                                      "does not read the key for it and uses {}",
                                      *v, arch.name, y.fixed));
        *y.value = *v;
    }
    if (hp.rope_yarn_beta_fast < hp.rope_yarn_beta_slow)
        return refuse(file, k.key("rope.scaling.yarn_beta_fast"),
                      fmt::format("{} is below yarn_beta_slow {}: the ramp would run backwards",
                                  hp.rope_yarn_beta_fast, hp.rope_yarn_beta_slow));
    return {};
}

// rope.scaling.*, as llama.cpp reads it: the type defaults to linear, the
// factor (or the older rope.scale_linear) to 1, and "none" never scales.
Expected<void> read_rope_scaling(const gguf::File& file, const Keys& k, const ArchSpec& arch,
                                 Hparams& hp) {
    auto type = k.string_or("rope.scaling.type", "linear");
    if (!type) return type.error();
    const auto* scheme = std::find_if(std::begin(kRopeScalingNames), std::end(kRopeScalingNames),
                                      [&](const RopeScalingName& n) { return n.name == *type; });
    if (scheme == std::end(kRopeScalingNames)) {
        std::string known;
        for (const RopeScalingName& n : kRopeScalingNames)
            known += fmt::format("{}{}", known.empty() ? "" : ", ", n.name);
        return refuse(file, k.key("rope.scaling.type"),
                      fmt::format("rope scaling '{}' is not implemented ({})", *type, known));
    }
    hp.rope_scaling = scheme->scaling;
    const char* factor_key =
        k.has("rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear";
    auto factor = k.f32_or(factor_key, 0.0f);
    if (!factor) return factor.error();
    if (*factor < 0 || !std::isfinite(*factor))
        return refuse(file, k.key(factor_key), fmt::format("{} is not a scaling factor", *factor));
    // 0 means unset, as in llama.cpp.
    hp.rope_freq_scale =
        *factor == 0.0f || hp.rope_scaling == RopeScaling::None ? 1.0f : 1.0f / *factor;
    auto attn = k.f32_or("rope.scaling.attn_factor", 1.0f);
    if (!attn) return attn.error();
    if (!(*attn > 0) || !std::isfinite(*attn))
        return refuse(file, k.key("rope.scaling.attn_factor"), "must be > 0");
    hp.rope_attn_factor = *attn;
    auto orig = k.u32_or("rope.scaling.original_context_length", hp.n_ctx_train);
    if (!orig) return orig.error();
    hp.rope_n_ctx_orig = *orig != 0 ? *orig : hp.n_ctx_train;
    if (hp.rope_scaling == RopeScaling::Yarn && hp.rope_n_ctx_orig == 0)
        return refuse(file, k.key("rope.scaling.original_context_length"), "is 0");
    return read_yarn_keys(file, k, arch, hp);
}

}  // namespace

// A count this architecture's row has no part for (a window, experts): absent
// or 0 is fine; any other value is refused by key, since running the file
// without that part would be wrong.
Expected<void> refuse_if_set(const gguf::File& file, const Keys& k, std::string_view suffix,
                             std::string_view part, std::string_view arch) {
    if (!k.has(suffix)) return {};
    auto v = k.u32(suffix);
    if (!v) return v.error();
    if (*v == 0) return {};
    return refuse(file, k.key(suffix),
                  fmt::format("{} ({}) is not implemented for architecture '{}'", part, *v, arch));
}

namespace {

// granite's four scales (llama.cpp reads logit_scale as required --
// optional for granitehybrid --, the others as optional with 0 meaning "not
// scaled"; attention.scale 0 means the usual 1/sqrt(head_dim)).
Expected<void> read_granite_scales(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                                   Hparams& hp) {
    struct Scale {
        const char* key;
        float* value;
        bool required;
    };
    float attention = 0, embedding = 0, residual = 0, logit = 0;
    const Scale scales[] = {{"logit_scale", &logit, !spec.logit_scale_optional},
                            {"embedding_scale", &embedding, false},
                            {"residual_scale", &residual, false},
                            {"attention.scale", &attention, false}};
    for (const Scale& sc : scales) {
        auto v = sc.required ? k.f32(sc.key) : k.f32_or(sc.key, 0.0f);
        if (!v) return v.error();
        if (!std::isfinite(*v) || *v < 0 || (sc.required && *v == 0))
            return refuse(file, k.key(sc.key),
                          fmt::format("{} is not a scale (finite, {})", *v,
                                      sc.required ? "> 0" : ">= 0, 0 for none"));
        *sc.value = *v;
    }
    if (logit != 0) hp.logit_scale = logit;
    if (embedding != 0) hp.embedding_scale = embedding;
    if (residual != 0) hp.residual_scale = residual;
    if (attention != 0) hp.attn_scale = attention;
    return {};
}

}  // namespace

// Files that are not a chat or base language model say so before anything
// else is read. llama.cpp's converters mark them: `general.type` is
// "adapter" (convert_lora_to_gguf), "mmproj" with architecture "clip" (a
// vision projector; older ones carry only the architecture) or "imatrix"
// (llama-imatrix, which writes no architecture); an embedding or reranking
// model is a decoder's architecture with a nonzero `<arch>.pooling_type`.
Expected<void> refuse_non_decoder(const gguf::File& file, bool embeddings) {
    auto type = file.get_string_or("general.type", "model");
    if (!type) return type.error();
    if (*type == "adapter")
        return refuse(file, "general.type",
                      "is 'adapter': a LoRA adapter, which ferrox does not apply yet (merge it "
                      "into its base model, e.g. with llama.cpp's llama-export-lora)");
    if (*type == "imatrix")
        return refuse(file, "general.type",
                      "is 'imatrix': an importance matrix for quantizing (llama-imatrix), not a "
                      "model; ferrox does not read it");
    auto arch = file.get_string_or("general.architecture", "");
    if (!arch) return arch.error();
    if (*type == "mmproj" || *arch == "clip")
        return refuse(file, *type == "mmproj" ? "general.type" : "general.architecture",
                      "this is a vision projector (mmproj), which ferrox does not run yet; "
                      "load the language model's own GGUF");
    if (arch->empty()) return {};  // read_hparams names the missing key
    // Non-causal attention (an encoder's): every row sees the later ones, so
    // no row predicts the next token.
    const ArchSpec* spec = find_architecture(*arch);
    const std::string causal_key = fmt::format("{}.attention.causal", *arch);
    auto causal = file.get_bool_or(causal_key, true);
    if (!causal) return causal.error();
    if (!embeddings && spec && (spec->non_causal || !*causal))
        return refuse(file, spec->non_causal ? "general.architecture" : causal_key,
                      fmt::format("{}: non-causal (bidirectional) attention, an embedding "
                                  "encoder, which ferrox runs for pooled output only (`ferrox "
                                  "embed` and the server's /v1/embeddings), never for text "
                                  "generation",
                                  spec->non_causal ? "is '" + *arch + "'" : "is false"));
    const std::string pooling = fmt::format("{}.pooling_type", *arch);
    if (!file.find(pooling)) return {};
    auto v = file.get_u32(pooling);
    if (!v) return v.error();
    if (*v == 0) return {};  // a plain decoder
    const auto p = static_cast<Pooling>(*v);
    const std::string what = fmt::format("is {} ({})", *v, pooling_name(p));
    if (*v > static_cast<uint32_t>(Pooling::Rank))
        return refuse(file, pooling,
                      what + ": not a pooling llama.cpp defines (1 mean, 2 cls, 3 last, 4 rank)");
    if (!find_architecture(*arch))
        return refuse(file, pooling,
                      fmt::format("{}: an embedding or reranking model on architecture '{}', "
                                  "an encoder ferrox does not run yet",
                                  what, *arch));
    if (p == Pooling::Rank && !find_architecture(*arch)->rank_head)
        return refuse(file, pooling,
                      what + ": a reranking model with a classifier head on architecture '" +
                          *arch + "', which ferrox does not run yet (qwen3's and bert's it does)");
    if (!embeddings)
        return refuse(file, pooling,
                      what +
                          ": an embedding or reranking model, which ferrox does not run for "
                          "text generation (`ferrox embed` and the server's /v1/embeddings "
                          "or /v1/rerank run it)");
    return {};
}

std::string_view pooling_name(Pooling p) {
    switch (p) {
        case Pooling::None:
            return "none";
        case Pooling::Mean:
            return "mean";
        case Pooling::Cls:
            return "cls";
        case Pooling::Last:
            return "last";
        case Pooling::Rank:
            return "rank";
    }
    return "unknown";
}

namespace {

// The row of general.architecture, or a refusal listing the known ones.
Expected<const ArchSpec*> find_spec(const gguf::File& file, const std::string& name) {
    if (const ArchSpec* spec = find_architecture(name)) return spec;
    std::string known;
    for (const ArchSpec& a : architectures())
        known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
    return refuse(file, "general.architecture",
                  fmt::format("architecture '{}' is not implemented (known: {})", name, known));
}

}  // namespace

// A key that holds one value for every layer or one per layer (llama.cpp's
// get_key_or_arr): `out` gets one value per layer, each in 1..
Expected<void> read_per_layer(const gguf::File& file, const Keys& k, std::string_view suffix,
                              uint32_t n_layer, std::vector<uint32_t>& out) {
    const gguf::Value* value = k.value(suffix);
    if (!value) return refuse(file, k.key(suffix), "is missing");
    if (!std::holds_alternative<gguf::Array>(*value)) {
        auto v = k.u32(suffix);
        if (!v) return v.error();
        out.assign(n_layer, *v);
    } else {
        auto values = file.get_u32_array(k.key(suffix));
        if (!values) return values.error();
        if (values->size() != n_layer)
            return refuse(file, k.key(suffix),
                          fmt::format("holds {} values for {} layers", values->size(), n_layer));
        out = std::move(*values);
    }
    return {};
}

namespace {

// Widths, depth, heads and the training context.
Expected<void> read_shape(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                          Hparams& hp) {
    FERROX_READ(hp.n_embd, k.u32("embedding_length"));
    FERROX_READ(hp.n_layer, k.u32("block_count"));
    FERROX_READ(hp.n_head, k.u32("attention.head_count"));
    // gemma4's files list the KV heads per layer (the sliding layers' and
    // the global layers' differ in the 31B).
    if (kinds_by_kv_heads(spec)) {
        if (auto r = read_kv_head_layers(file, k, hp); !r) return r;
    } else if (spec.per_layer_geometry_keys && k.has("attention.head_count_kv") && hp.n_layer > 0) {
        if (auto r =
                read_per_layer(file, k, "attention.head_count_kv", hp.n_layer, hp.n_head_kv_layers);
            !r)
            return r;
        hp.n_head_kv = *std::max_element(hp.n_head_kv_layers.begin(), hp.n_head_kv_layers.end());
    } else {
        FERROX_READ(hp.n_head_kv, k.u32_or("attention.head_count_kv", hp.n_head));
    }
    FERROX_READ(hp.n_ctx_train, k.u32("context_length"));
    FERROX_READ(hp.rms_eps, k.f32(norm_eps_key(spec)));
    if (spec.norm_eps_fallback)
        FERROX_READ(hp.rms_eps, k.f32_or("attention.layer_norm_rms_epsilon", hp.rms_eps));
    if (hp.n_head == 0) return refuse(file, k.key("attention.head_count"), "is 0");
    if (hp.n_embd == 0) return refuse(file, k.key("embedding_length"), "is 0");
    if (hp.n_layer == 0) return refuse(file, k.key("block_count"), "is 0");
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const uint32_t kv = hp.layer_n_head_kv(il);
        if (kv == 0 || hp.n_head % kv != 0)
            return refuse(
                file, k.key("attention.head_count_kv"),
                fmt::format("{} (layer {}) does not divide head_count {}", kv, il, hp.n_head));
    }
    // key_length defaults to n_embd / n_head in the format itself.
    FERROX_READ(hp.head_dim_k, k.u32_or("attention.key_length", hp.n_embd / hp.n_head));
    FERROX_READ(hp.head_dim_v, k.u32_or("attention.value_length", hp.head_dim_k));
    if (hp.head_dim_k % 2 != 0)
        return refuse(file, k.key("attention.key_length"),
                      fmt::format("{} is odd; RoPE rotates pairs", hp.head_dim_k));
    return {};
}

// The rotated dimensions of a head, one count for every layer.
Expected<void> read_rotary_dims(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                                Hparams& hp) {
    FERROX_READ(hp.n_rot, k.u32_or("rope.dimension_count", hp.head_dim_k));
    if (hp.n_rot == 0 || hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim_k)
        return refuse(file, k.key("rope.dimension_count"),
                      fmt::format("{} is not an even count of rotated dimensions in 2..{} (the "
                                  "head dimension)",
                                  hp.n_rot, hp.head_dim_k));
    if (hp.n_rot != hp.head_dim_k && !spec.partial_rotary)
        return refuse(file, k.key("rope.dimension_count"),
                      fmt::format("partial RoPE ({} of {} dims) is not run for architecture '{}' "
                                  "(llama.cpp requires all {} to rotate for it)",
                                  hp.n_rot, hp.head_dim_k, spec.name, hp.head_dim_k));
    // llama.cpp's graphs take one n_rot for every layer (gemma4's, which
    // has its own, reads it in read_layer_geometry); a sliding-window width
    // of its own would be read by some code paths and not others.
    if (spec.per_layer_geometry_keys || !k.has("rope.dimension_count_swa")) return {};
    auto swa = k.u32("rope.dimension_count_swa");
    if (!swa) return swa.error();
    if (*swa != hp.n_rot)
        return refuse(file, k.key("rope.dimension_count_swa"),
                      fmt::format("{} differs from rope.dimension_count {}: a rotated width "
                                  "of the sliding-window layers' own is not implemented",
                                  *swa, hp.n_rot));
    return {};
}

// Gemma 2's soft-capping of attention scores and logits; refused elsewhere.
Expected<void> read_softcaps(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                             Hparams& hp) {
    if (spec.final_softcap_only) {
        if (k.has("attn_logit_softcapping"))
            return refuse(file, k.key("attn_logit_softcapping"),
                          fmt::format("attention soft-capping is not implemented for "
                                      "architecture '{}' (llama.cpp does not read it)",
                                      spec.name));
        // llama.cpp: absent or 0 leaves the logits uncapped.
        FERROX_READ(hp.final_softcap, k.f32_or("final_logit_softcapping", 0.0f));
        if (hp.final_softcap < 0 || !std::isfinite(hp.final_softcap))
            return refuse(
                file, k.key("final_logit_softcapping"),
                fmt::format("{} is not a cap (finite, >= 0, 0 for none)", hp.final_softcap));
        return {};
    }
    if (!spec.softcapping) {
        for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"})
            if (k.has(cap))
                return refuse(file, k.key(cap),
                              fmt::format("logit soft-capping is not implemented for "
                                          "architecture '{}'",
                                          spec.name));
        return {};
    }
    // llama.cpp's defaults where the keys are absent: 50 and 30 (Gemma 2's).
    FERROX_READ(hp.attn_softcap, k.f32_or("attn_logit_softcapping", 50.0f));
    FERROX_READ(hp.final_softcap, k.f32_or("final_logit_softcapping", 30.0f));
    for (const auto& [key, v] : {std::pair{"attn_logit_softcapping", hp.attn_softcap},
                                 std::pair{"final_logit_softcapping", hp.final_softcap}})
        if (!(v > 0) || !std::isfinite(v))
            return refuse(file, k.key(key), fmt::format("{} is not a cap (finite, > 0)", v));
    return {};
}

// What the tensors say: the vocabulary, biases present, and the scales
// that follow from the widths.
Expected<void> read_tensor_facts(const gguf::File& file, const ArchSpec& spec, Hparams& hp) {
    auto embd = file.find_tensor("token_embd.weight");
    if (!embd) return make_error("{}: tensor 'token_embd.weight' is missing", file.path().string());
    hp.vocab = embd->row_count();

    hp.attn_scale =
        spec.unit_attention_scale ? 1.0f : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
    // Optional for every architecture, as in llama.cpp: a file with q/k/v biases
    // gets them added (qwen2's always have them).
    hp.qkv_bias = file.find_tensor("blk.0.attn_q.bias") || file.find_tensor("blk.0.attn_k.bias") ||
                  file.find_tensor("blk.0.attn_v.bias");
    hp.no_rope_period = spec.no_rope_period;
    hp.attn_output_bias = spec.attn_output_bias == TensorUse::Required;
    if (spec.attn_output_bias == TensorUse::Optional)  // over the tensors: the layer count is
        for (const gguf::Tensor& t : file.tensors())   // unchecked yet
            hp.attn_output_bias |=
                t.name().starts_with("blk.") && t.name().ends_with(".attn_output.bias");
    if (spec.sqrt_embedding_scale) hp.embedding_scale = std::sqrt(static_cast<float>(hp.n_embd));
    return {};
}

// gemma4's window layers: attention.sliding_window_pattern holds one bool
// per layer (true: local), and the local layers' rope base.
Expected<void> read_window_layers(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                                  Hparams& hp) {
    const std::string key = k.key("attention.sliding_window_pattern");
    const gguf::Value* value = k.value("attention.sliding_window_pattern");
    if (!value) return refuse(file, key, "is missing (one bool per layer)");
    const auto* array = std::get_if<gguf::Array>(value);
    if (!array || array->element_type() != gguf::ValueType::Bool)
        return refuse(file, key, "is not an ARRAY of BOOL (one per layer)");
    if (array->size() != hp.n_layer)
        return refuse(file, key,
                      fmt::format("holds {} values for {} layers", array->size(), hp.n_layer));
    hp.local_layers.resize(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il)
        hp.local_layers[il] = std::get<bool>(array->at(il));
    if (hp.sliding_window == 0)
        return refuse(file, k.key("attention.sliding_window"),
                      "is 0 (the window's layers need one)");
    FERROX_READ(hp.rope_base_local, k.f32_or("rope.freq_base_swa", spec.local_rope_base));
    return {};
}

// gemma4's per-layer geometry: the sliding-window layers' own head sizes and
// rotated width (defaulting to the global layers'), and the keys refused
// where they need a part not run yet.
Expected<void> read_layer_geometry(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.head_dim_k_swa, k.u32("attention.key_length_swa"));
    FERROX_READ(hp.head_dim_v_swa, k.u32("attention.value_length_swa"));
    // llama.cpp's default: the global layers' rotated width.
    FERROX_READ(hp.n_rot_swa, k.u32_or("rope.dimension_count_swa", hp.n_rot));
    // llama.cpp's gemma4 graph takes one head size for q, k and v alike.
    if (hp.head_dim_k != hp.head_dim_v)
        return refuse(file, k.key("attention.value_length"),
                      fmt::format("{} differs from key_length {} (gemma4 attends with one head "
                                  "size)",
                                  hp.head_dim_v, hp.head_dim_k));
    if (hp.head_dim_k_swa == 0 || hp.head_dim_k_swa % 2 != 0 ||
        hp.head_dim_v_swa != hp.head_dim_k_swa)
        return refuse(file, k.key("attention.key_length_swa"),
                      fmt::format("{} (value_length_swa {}) is not one even head size for k and v",
                                  hp.head_dim_k_swa, hp.head_dim_v_swa));
    // Released files rotate the whole sliding head (partial_rotary_factor 1);
    // a prefix of it would need a NeoX rope that knows its width.
    if (hp.n_rot_swa != hp.head_dim_k_swa)
        return refuse(file, k.key("rope.dimension_count_swa"),
                      fmt::format("{} differs from key_length_swa {}: partial RoPE on the "
                                  "sliding-window layers is not implemented",
                                  hp.n_rot_swa, hp.head_dim_k_swa));
    // The per-layer embeddings' width; their tensors' shapes bound it.
    FERROX_READ(hp.n_embd_per_layer, k.u32("embedding_length_per_layer_input"));
    auto shared = k.u32_or("attention.shared_kv_layers", 0);
    if (!shared) return shared.error();
    // llama.cpp's reuse rule needs two cached layers (the last of each kind).
    if (*shared != 0 && (*shared >= hp.n_layer || hp.n_layer - *shared < 2))
        return refuse(file, k.key("attention.shared_kv_layers"),
                      fmt::format("{} leaves fewer than 2 of the {} layers with a KV cache",
                                  *shared, hp.n_layer));
    hp.shared_kv_layers = *shared;
    for (uint32_t il = hp.unshared_layers(); il < hp.n_layer; ++il) {
        if (hp.layer_n_head_kv(il) != hp.layer_n_head_kv(hp.kv_layer(il)))
            return refuse(file, k.key("attention.head_count_kv"),
                          fmt::format("{} for shared layer {} differs from the {} of layer {}, "
                                      "whose cache it attends over",
                                      hp.layer_n_head_kv(il), il,
                                      hp.layer_n_head_kv(hp.kv_layer(il)), hp.kv_layer(il)));
        if (hp.is_local_layer(il) != hp.is_local_layer(hp.kv_layer(il)))
            return refuse(file, k.key("attention.shared_kv_layers"),
                          fmt::format("{}: shared layer {} ({}) would attend over layer {}'s "
                                      "cache, of the other kind (llama.cpp takes the last "
                                      "cached layer for a global layer, the one before for a "
                                      "local one)",
                                      *shared, il, hp.is_local_layer(il) ? "local" : "global",
                                      hp.kv_layer(il)));
    }
    return {};
}

// Llama 4's chunked attention and its temperature on the layers without
// RoPE: constants of llama.cpp's llama4 loader, which reads no key for them.
// What the file says must agree: attention.sliding_window 0 is MobileLLM-R1's
// layout (no chunks, another RoPE pattern) and any other value llama.cpp
// replaces by 8192, so both are refused rather than run otherwise than the
// file says; the chunked layers are the rotated ones (a pattern of 4).
Expected<void> read_chunked_attention(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                                      Hparams& hp) {
    uint32_t chunk = 0;
    FERROX_READ(chunk, k.u32_or("attention.sliding_window", spec.attn_chunk));
    if (chunk != spec.attn_chunk)
        return refuse(file, k.key("attention.sliding_window"),
                      chunk == 0 ? std::string("is 0: attention without chunks (MobileLLM-R1's "
                                               "layout) is not implemented")
                                 : fmt::format("{} is not {}: llama.cpp's {} attends in chunks "
                                               "of {} whatever the key says",
                                               chunk, spec.attn_chunk, spec.name, spec.attn_chunk));
    uint32_t pattern = 0;
    FERROX_READ(pattern, k.u32_or("attention.sliding_window_pattern", spec.no_rope_period));
    if (pattern != spec.no_rope_period)
        return refuse(file, k.key("attention.sliding_window_pattern"),
                      fmt::format("{} is not {}: chunked layers other than the rotated ones are "
                                  "not implemented",
                                  pattern, spec.no_rope_period));
    hp.attn_chunk = spec.attn_chunk;
    hp.attn_temp_scale = spec.nope_temperature.scale;
    hp.attn_temp_length = spec.nope_temperature.length;
    hp.attn_temp_offset = spec.nope_temperature.offset;
    hp.attn_temp_nope = spec.nope_temperature.scale != 0.0f;
    return {};
}

// The sliding window, its layer pattern and its rope base (gemma's rows);
// a window the row does not describe is refused.
Expected<void> read_window(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                           Hparams& hp) {
    if (spec.attn_chunk) return read_chunked_attention(file, k, spec, hp);
    if (!spec.sliding_window) {
        // A window this architecture's row does not describe: attending to
        // the whole past there would be wrong.
        if (spec.sliding_window_ignored) return {};
        return refuse_if_set(file, k, "attention.sliding_window", "a sliding window", spec.name);
    }
    FERROX_READ(hp.sliding_window, spec.default_window || spec.window_optional
                                       ? k.u32_or("attention.sliding_window", spec.default_window)
                                       : k.u32("attention.sliding_window"));
    if (spec.window_pattern_array) return read_window_layers(file, k, spec, hp);
    // The architecture's pattern: Gemma 3 has five local layers, then one
    // global (layer il is global when (il + 1) % 6 == 0), Gemma 2 one and
    // one. Real files leave the keys below out, but llama.cpp honours
    // them (other models of these architectures set them), so must we.
    FERROX_READ(hp.swa_period, k.u32_or("attention.sliding_window_pattern", spec.window_period));
    if (hp.swa_period == 0)  // llama.cpp: every layer local
        return refuse(file, k.key("attention.sliding_window_pattern"),
                      "0 (no global layer) is not implemented");
    FERROX_READ(hp.rope_base_local,
                k.f32_or("rope.freq_base_swa",
                         spec.local_rope_base != 0 ? spec.local_rope_base : hp.rope_base));
    return {};
}

// Llama 4's attention temperature (mistral3, deepseek2): q scaled up with the position.
Expected<void> read_attn_temperature(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                                     Hparams& hp) {
    FERROX_READ(hp.attn_temp_scale, k.f32_or("attention.temperature_scale", 0.0f));
    if (!std::isfinite(hp.attn_temp_scale) || hp.attn_temp_scale < 0)
        return refuse(file, k.key("attention.temperature_scale"),
                      fmt::format("{} is not a scale (finite, >= 0)", hp.attn_temp_scale));
    // llama.cpp's length: mistral3's original context (YaRN's), deepseek2's
    // attention.temperature_length.
    const char* const length_key = spec.attn_temperature_length_key
                                       ? "attention.temperature_length"
                                       : "rope.scaling.original_context_length";
    hp.attn_temp_length = hp.rope_n_ctx_orig;
    if (spec.attn_temperature_length_key)
        FERROX_READ(hp.attn_temp_length, k.u32_or("attention.temperature_length", 0));
    if (hp.attn_temp_scale != 0 && hp.attn_temp_length == 0)
        return refuse(file, k.key(length_key),
                      "is 0 or absent: the attention temperature needs a length");
    return {};
}

// Multi-section RoPE's sections (qwen2vl, qwen3vl): checked, not stored (a
// text token has one position in every section).
Expected<void> check_rope_sections(const gguf::File& file, const Keys& k) {
    // llama.cpp requires the key (up to four sections); ggml takes a pair's
    // section modulo their sum, so the sum must not be 0.
    auto sections = k.i32_array("rope.dimension_sections");
    if (!sections) return sections.error();
    int64_t sum = 0;
    bool negative = false;
    for (const int32_t v : *sections) sum += v, negative = negative || v < 0;
    if (sections->empty() || sections->size() > 4 || negative || sum == 0)
        return refuse(file, k.key("rope.dimension_sections"),
                      fmt::format("[{}] is not 1 to 4 section sizes >= 0 with a sum > 0",
                                  fmt::join(*sections, ", ")));
    return {};
}

// Multi-head latent attention's ranks and widths (deepseek2). With the *_mla
// keys (the current converter, attn_k_b / attn_v_b), as llama.cpp's absorbed
// path reads them: the cached head is the latent plus the rotated part
// (key_length = kv_lora_rank + rope.dimension_count), its value the latent
// (value_length = kv_lora_rank), one KV head; the widths before absorption
// come from the *_mla keys. Without them (an older conversion, attn_kv_b),
// as llama.cpp runs such files: un-absorbed, n_head KV heads of key_length
// (unrotated + rotated) and value_length. q.k scales by 1/sqrt(the q.k width
// before absorption) either way.
Expected<void> read_mla(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.mla_q_lora, k.u32_or("attention.q_lora_rank", 0));
    FERROX_READ(hp.mla_kv_lora, k.u32("attention.kv_lora_rank"));
    const bool has_k = k.has("attention.key_length_mla"),
               has_v = k.has("attention.value_length_mla");
    if (has_k != has_v)  // llama.cpp asserts both or neither
        return refuse(
            file, k.key(has_k ? "attention.value_length_mla" : "attention.key_length_mla"),
            fmt::format("is missing while {} is given (both or neither)",
                        k.key(has_k ? "attention.key_length_mla" : "attention.value_length_mla")));
    hp.mla_kv_b = !has_k;
    if (hp.mla_kv_b) {
        hp.mla_head_k = hp.head_dim_k;
        hp.mla_head_v = hp.head_dim_v;
    } else {
        FERROX_READ(hp.mla_head_k, k.u32("attention.key_length_mla"));
        FERROX_READ(hp.mla_head_v, k.u32("attention.value_length_mla"));
    }
    // Each width sizes scratch rows and a product per head: bounded well
    // past any released model (V3: 1536, 512, 192, 128).
    constexpr uint32_t kMaxWidth = 1u << 16;
    const char* const k_key = hp.mla_kv_b ? "attention.key_length" : "attention.key_length_mla";
    const char* const v_key = hp.mla_kv_b ? "attention.value_length" : "attention.value_length_mla";
    const std::pair<const char*, uint32_t> widths[] = {{"attention.q_lora_rank", hp.mla_q_lora},
                                                       {"attention.kv_lora_rank", hp.mla_kv_lora},
                                                       {k_key, hp.mla_head_k},
                                                       {v_key, hp.mla_head_v}};
    for (const auto& [key, v] : widths)
        if (v > kMaxWidth || (v == 0 && key != widths[0].first))
            return refuse(file, k.key(key), fmt::format("{} is not in 1..{}", v, kMaxWidth));
    if (hp.mla_head_k <= hp.n_rot)
        return refuse(file, k.key(k_key),
                      fmt::format("{} leaves no unrotated part beside rope.dimension_count {}",
                                  hp.mla_head_k, hp.n_rot));
    hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.mla_head_k));
    if (hp.mla_kv_b) {
        // attn_kv_b expands the latent into every head's key and value.
        if (hp.n_head_kv != hp.n_head)
            return refuse(file, k.key("attention.head_count_kv"),
                          fmt::format("{} is not head_count {}: a file with attn_kv_b (no "
                                      "attention.key_length_mla) has a KV head per query head",
                                      hp.n_head_kv, hp.n_head));
        return {};
    }
    if (hp.n_head_kv != 1)
        return refuse(file, k.key("attention.head_count_kv"),
                      fmt::format("{}: a latent-attention file with attention.key_length_mla "
                                  "caches one KV head",
                                  hp.n_head_kv));
    if (hp.head_dim_k != hp.mla_kv_lora + hp.n_rot)
        return refuse(file, k.key("attention.key_length"),
                      fmt::format("{} is not kv_lora_rank {} + rope.dimension_count {}",
                                  hp.head_dim_k, hp.mla_kv_lora, hp.n_rot));
    if (hp.head_dim_v != hp.mla_kv_lora)
        return refuse(file, k.key("attention.value_length"),
                      fmt::format("{} is not kv_lora_rank {}", hp.head_dim_v, hp.mla_kv_lora));
    return {};
}

// DeepSeek's YaRN, as llama.cpp's deepseek2 graph runs it: the file's log
// multiplier is 0.1 x mscale_all_dim (the converter's legacy form, undone
// here); rope_spec leaves the rotated pairs without YaRN's magnitude (llama.cpp
// takes mscale = mscale_all_dim for this row) and q.k is scaled by mscale^2
// instead, mscale = a (1 + 0.1 ln s) (1 + 0.1 mscale_all_dim ln s), a the
// factor the rope is given and s the scaling factor -- whatever the scaling
// type, as llama.cpp does (s = 1 leaves a^2).
void apply_yarn_qk_mscale(Hparams& hp, uint32_t head_k) {
    hp.rope_yarn_log_mul /= 0.1f;
    const float attn_factor = rope_spec(hp, {}, false).attn_factor;
    const float ln_s = std::log(1.0f / hp.rope_freq_scale);
    const float mscale =
        attn_factor * (1.0f + 0.1f * ln_s) * (1.0f + 0.1f * hp.rope_yarn_log_mul * ln_s);
    hp.attn_scale = mscale * mscale / std::sqrt(static_cast<float>(head_k));
}

// granite's scales, and its switch that turns RoPE off.
Expected<void> read_granite(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                            Hparams& hp) {
    if (auto r = read_granite_scales(file, k, spec, hp); !r) return r;
    // llama.cpp's granite graph rotates no layer at all when the file says
    // its RoPE was not fine-tuned (the key doubles as a switch for RoPE).
    auto rope_on = k.bool_or("rope.scaling.finetuned", true);
    if (!rope_on) return rope_on.error();
    if (!*rope_on) hp.no_rope_period = 1;
    return {};
}

// NextN/MTP blocks at the end of block_count: kept, not run.
Expected<void> read_nextn(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.n_layer_nextn, k.u32_or("nextn_predict_layers", 0));
    if (hp.n_layer_nextn >= hp.n_layer)
        return refuse(file, k.key("nextn_predict_layers"),
                      fmt::format("{} of block_count {} leaves no layer to run (a file of NextN "
                                  "blocks alone is not a model ferrox runs)",
                                  hp.n_layer_nextn, hp.n_layer));
    hp.n_layer -= hp.n_layer_nextn;
    return {};
}

// The pooling refuse_non_decoder let through (mean, cls, last; rank on a
// row with a rank head), the head's label count, and whether attention is
// causal.
Expected<void> read_pooling(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                            Hparams& hp) {
    auto pooling = k.u32_or("pooling_type", 0);
    if (!pooling) return pooling.error();
    hp.pooling = static_cast<Pooling>(*pooling);
    if (spec.rank_head && k.has("classifier.output_labels")) {
        auto labels = file.get_string_array(k.key("classifier.output_labels"));
        if (!labels) return labels.error();
        // llama.cpp sizes its head by the labels; a head wider than a vocabulary is no head.
        if (labels->empty() || labels->size() > 65536)
            return refuse(
                file, k.key("classifier.output_labels"),
                fmt::format("has {} entries; a classifier head has 1 to 65536", labels->size()));
        hp.n_cls_out = static_cast<uint32_t>(labels->size());
    }
    // A non-causal row attends both ways whatever the key says, as llama.cpp
    // sets it after reading the key.
    if (spec.non_causal) {
        hp.causal = false;
    } else {
        auto causal = k.bool_or("attention.causal", true);
        if (!causal) return causal.error();
        hp.causal = *causal;
    }
    return {};
}

// sentence-transformers' projections after the pooling (gemma-embedding):
// n_embd -> dense_2_feat_out -> n_embd, as llama.cpp checks them.
Expected<void> read_dense_projections(const gguf::File& file, const Keys& k, Hparams& hp) {
    uint32_t in2 = 0, out2 = 0, in3 = 0, out3 = 0;
    FERROX_READ(in2, k.u32_or("dense_2_feat_in", 0));
    FERROX_READ(out2, k.u32_or("dense_2_feat_out", 0));
    FERROX_READ(in3, k.u32_or("dense_3_feat_in", 0));
    FERROX_READ(out3, k.u32_or("dense_3_feat_out", 0));
    if (in2 != 0 && in2 != hp.n_embd)
        return refuse(file, k.key("dense_2_feat_in"),
                      fmt::format("{} differs from embedding_length {}", in2, hp.n_embd));
    if (out3 != 0 && out3 != hp.n_embd)
        return refuse(file, k.key("dense_3_feat_out"),
                      fmt::format("{} differs from embedding_length {}", out3, hp.n_embd));
    // dense_3 takes what dense_2 gives (one width; the tensors' shapes are
    // checked against it when bound).
    if (in3 != out2)
        return refuse(file, k.key("dense_3_feat_in"),
                      fmt::format("{} differs from dense_2_feat_out {}", in3, out2));
    if (out2 > (1u << 20))
        return refuse(file, k.key("dense_2_feat_out"),
                      fmt::format("{} is not in 0..{}", out2, 1u << 20));
    hp.dense_feat = out2;
    return {};
}

// Non-causal attention through a window: only the symmetric window of a
// non-causal row is one llama.cpp defines for it.
Expected<void> check_causality(const gguf::File& file, const Keys& k, const ArchSpec& spec,
                               const Hparams& hp) {
    if (!hp.causal && !spec.non_causal && hp.sliding_window != 0)
        return refuse(file, k.key("attention.causal"),
                      fmt::format("is false on '{}', whose sliding window looks back only: "
                                  "non-causal attention through it is not implemented",
                                  spec.name));
    return {};
}

// A row without attention or an FFN (mamba2): the widths, depth, training
// context and norm epsilon, the vocabulary, then its layers' keys; every
// layer is a Mamba-2 block.
// attention.head_count and feed_forward_length are not read: converters
// write 0 for both ("unused, but seemingly required when loading").
Expected<void> read_attention_free(const gguf::File& file, const Keys& k, Hparams& hp) {
    FERROX_READ(hp.n_embd, k.u32("embedding_length"));
    FERROX_READ(hp.n_layer, k.u32("block_count"));
    FERROX_READ(hp.n_ctx_train, k.u32("context_length"));
    FERROX_READ(hp.rms_eps, k.f32("attention.layer_norm_rms_epsilon"));
    if (hp.n_embd == 0) return refuse(file, k.key("embedding_length"), "is 0");
    if (hp.n_layer == 0) return refuse(file, k.key("block_count"), "is 0");
    auto embd = file.find_tensor("token_embd.weight");
    if (!embd) return make_error("{}: tensor 'token_embd.weight' is missing", file.path().string());
    hp.vocab = embd->row_count();
    if (auto r = read_mamba2(file, k, hp); !r) return r;
    hp.recurrent_layers.assign(hp.n_layer, true);
    return {};
}

// BERT's token types, a vocabulary key (no architecture prefix): llama.cpp
// refuses a bert file without the count; a count past 2^16 is no type table
// (BERT's have 2).
Expected<void> read_token_types(const gguf::File& file, Hparams& hp) {
    constexpr std::string_view key = "tokenizer.ggml.token_type_count";
    if (!file.find(key)) return refuse(file, key, "is missing (token_types' row count)");
    FERROX_READ(hp.n_token_types, file.get_u32(key));
    if (hp.n_token_types == 0 || hp.n_token_types > 65536)
        return refuse(
            file, key,
            fmt::format("{} is not a count of token types in 1..65536", hp.n_token_types));
    return {};
}

#undef FERROX_READ

// The readers in the order their keys are read (which decides which of
// several problems a file is refused for first).
Expected<void> read_all(const gguf::File& file, const Keys& k, const ArchSpec& spec, Hparams& hp) {
    if (auto r = read_pooling(file, k, spec, hp); !r) return r;
    if (spec.attention_free) return read_attention_free(file, k, hp);
    if (auto r = read_shape(file, k, spec, hp); !r) return r;
    if (spec.nextn_layers)
        if (auto r = read_nextn(file, k, hp); !r) return r;
    if (auto r = read_rotary_dims(file, k, spec, hp); !r) return r;
    auto base = k.f32_or("rope.freq_base", 10000.0f);
    if (!base) return base.error();
    hp.rope_base = *base;
    if (auto r = read_rope_scaling(file, k, spec, hp); !r) return r;
    if (auto r = read_softcaps(file, k, spec, hp); !r) return r;
    if (auto r = read_tensor_facts(file, spec, hp); !r) return r;
    if (auto r = read_window(file, k, spec, hp); !r) return r;
    // Gemma 3 27B (62 layers) scales q by 1/sqrt(n_embd / n_head) = 1/sqrt(168),
    // not 1/sqrt(head_dim = 128), and Gemma 2 27B (46) likewise, as their
    // reference implementations and llama.cpp do; llama.cpp recognises them
    // by the layer count alone.
    if (spec.wide_attention_scale_layers != 0 && hp.n_layer == spec.wide_attention_scale_layers)
        hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head));
    if (spec.mla)
        if (auto r = read_mla(file, k, hp); !r) return r;
    if (spec.yarn_qk_mscale) apply_yarn_qk_mscale(hp, spec.mla ? hp.mla_head_k : hp.head_dim_k);
    if (spec.attn_temperature)
        if (auto r = read_attn_temperature(file, k, spec, hp); !r) return r;
    if (spec.rope_sections)
        if (auto r = check_rope_sections(file, k); !r) return r;
    if (spec.granite_scales)
        if (auto r = read_granite(file, k, spec, hp); !r) return r;
    if (spec.per_layer_geometry_keys)
        if (auto r = read_layer_geometry(file, k, hp); !r) return r;
    if (spec.delta_net_layers)
        if (auto r = read_delta_net(file, k, hp); !r) return r;
    if (spec.shortconv_layers)
        if (auto r = read_shortconv(file, k, hp); !r) return r;
    if (spec.mamba2_layers)  // beside attention (granitehybrid, nemotron_h)
        if (auto r = read_mamba2(file, k, hp); !r) return r;
    if (spec.dense_projections)
        if (auto r = read_dense_projections(file, k, hp); !r) return r;
    if (spec.bert_encoder)
        if (auto r = read_token_types(file, hp); !r) return r;
    if (auto r = check_causality(file, k, spec, hp); !r) return r;
    return read_ffn(file, k, spec, hp);
}

}  // namespace

Expected<Hparams> read_hparams(const gguf::File& file, KeyTrace* trace) {
    if (auto r = refuse_non_decoder(file, true); !r) return r.error();
    auto name = file.get_string("general.architecture");
    if (!name) return name.error();
    auto spec = find_spec(file, *name);
    if (!spec) return spec.error();
    Hparams hp;
    hp.arch = *spec;
    hp.arch_name = *name;
    const Keys k(file, *name, trace);
    if (auto r = read_all(file, k, **spec, hp); !r) return r.error();
    if (auto sane = check_hparams_sane(file, hp, *name); !sane) return sane.error();
    return hp;
}

}  // namespace ferrox::model
