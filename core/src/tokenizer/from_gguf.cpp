// Tokenizer::from_gguf: reads the tokenizer.ggml.* keys into a VocabSpec.
#include "ferrox/gguf/file.h"
#include "ferrox/log.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox {
namespace {

Error in_file(const gguf::File& file, const Error& error) {
    return make_error("{}: {}", file.path().string(), error.message());
}

// An optional token id key; absent -> nullopt. A negative id means "none".
Expected<std::optional<int32_t>> optional_id(const gguf::File& file, std::string_view key) {
    if (file.find(key) == nullptr) return std::optional<int32_t>();
    auto id = file.get_i64(key);
    if (!id) return id.error();
    if (*id < 0 || *id > INT32_MAX) return std::optional<int32_t>();
    return std::optional<int32_t>(static_cast<int32_t>(*id));
}

Expected<std::optional<bool>> optional_bool(const gguf::File& file, std::string_view key) {
    if (file.find(key) == nullptr) return std::optional<bool>();
    auto value = file.get_bool(key);
    if (!value) return value.error();
    return std::optional<bool>(*value);
}

// tokenizer.ggml.precompiled_charsmap: an array of UINT8 or INT8, as bytes
// (absent: none). Its inner sizes are checked by Charsmap::parse.
Expected<std::string> charsmap_bytes(const gguf::File& file) {
    constexpr std::string_view kKey = "tokenizer.ggml.precompiled_charsmap";
    const gguf::Value* value = file.find(kKey);
    if (value == nullptr) return std::string();
    const auto* array = std::get_if<gguf::Array>(value);
    if (array != nullptr) {
        if (auto u8 = array->as_vector<uint8_t>()) return std::string(u8->begin(), u8->end());
        if (auto i8 = array->as_vector<int8_t>()) return std::string(i8->begin(), i8->end());
    }
    return make_error("{}: metadata key '{}' must be an ARRAY of UINT8 or INT8",
                      file.path().string(), kKey);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& file) {
    VocabSpec spec;
    auto model = file.get_string("tokenizer.ggml.model");
    if (!model) return model.error();
    spec.model = *model;
    if (auto known = Tokenizer::check_model(spec.model); !known)
        return in_file(file, known.error());
    auto pre = file.get_string_or("tokenizer.ggml.pre", "");
    if (!pre) return pre.error();
    spec.pre = *pre;
    // As llama.cpp does: the "default" split, which is rarely the model's own.
    if (spec.model == "gpt2" && file.find("tokenizer.ggml.pre") == nullptr)
        logger().warn(
            "{}: no tokenizer.ggml.pre key; using the 'default' pre-tokenizer, which may split "
            "text differently from the model's own tokenizer (re-convert the model to fix)",
            file.path().string());

    auto name = file.get_string_or("general.name", "");
    if (!name) return name.error();
    spec.model_name = *name;

    auto tokens = file.get_string_array("tokenizer.ggml.tokens");
    if (!tokens) return tokens.error();
    spec.tokens = std::move(*tokens);
    if (file.find("tokenizer.ggml.scores")) {
        auto scores = file.get_f32_array("tokenizer.ggml.scores");
        if (!scores) return scores.error();
        spec.scores = std::move(*scores);
    }
    if (file.find("tokenizer.ggml.token_type")) {
        auto types = file.get_i32_array("tokenizer.ggml.token_type");
        if (!types) return types.error();
        spec.types.reserve(types->size());
        for (const int32_t t : *types)
            spec.types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t)
                                                  : TokenType::undefined);
    }
    if (spec.model == "gpt2" || spec.model == "gemma4") {  // the BPE models merge by rank
        auto merges = file.get_string_array("tokenizer.ggml.merges");
        if (!merges) return merges.error();
        spec.merges = std::move(*merges);
    }

    if (spec.model == "t5") {
        auto charsmap = charsmap_bytes(file);
        if (!charsmap) return charsmap.error();
        spec.precompiled_charsmap = std::move(*charsmap);
    }

    struct IdKey {
        std::optional<int32_t>* target;
        std::string_view key;
    };
    for (const IdKey& k : {IdKey{&spec.bos, "tokenizer.ggml.bos_token_id"},
                           IdKey{&spec.eos, "tokenizer.ggml.eos_token_id"},
                           IdKey{&spec.unk, "tokenizer.ggml.unknown_token_id"},
                           IdKey{&spec.eot, "tokenizer.ggml.eot_token_id"},
                           IdKey{&spec.eom, "tokenizer.ggml.eom_token_id"},
                           // (sic: the key is spelled so by gguf-py and llama.cpp)
                           IdKey{&spec.sep, "tokenizer.ggml.seperator_token_id"}}) {
        auto id = optional_id(file, k.key);
        if (!id) return id.error();
        *k.target = *id;
    }
    struct BoolKey {
        std::optional<bool>* target;
        std::string_view key;
    };
    for (const BoolKey& k :
         {BoolKey{&spec.add_bos, "tokenizer.ggml.add_bos_token"},
          BoolKey{&spec.add_eos, "tokenizer.ggml.add_eos_token"},
          BoolKey{&spec.add_sep, "tokenizer.ggml.add_sep_token"},
          BoolKey{&spec.add_space_prefix, "tokenizer.ggml.add_space_prefix"},
          BoolKey{&spec.remove_extra_whitespaces, "tokenizer.ggml.remove_extra_whitespaces"},
          BoolKey{&spec.lowercase, "tokenizer.ggml.normalizer.lowercase"},
          BoolKey{&spec.strip_accents, "tokenizer.ggml.normalizer.strip_accents"}}) {
        auto value = optional_bool(file, k.key);
        if (!value) return value.error();
        *k.target = *value;
    }

    auto tokenizer = from_spec(std::move(spec));
    if (!tokenizer) return in_file(file, tokenizer.error());
    return tokenizer;
}

}  // namespace ferrox
