#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>

#include "ferrox/seeded_hash.h"

namespace ferrox::tokenizer_detail {
namespace {

// Texts that end a turn in some model family. Like llama.cpp we treat them as
// end-of-generation control tokens even where a converter typed them normal.
constexpr std::array<std::string_view, 22> kEndOfGenerationTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\uFF5Cend\u2581of\u2581sentence\uFF5C>",
    "[e~["};

// Fill-in-the-middle markers as llama.cpp recognises them by text: each is a
// control token; the pad, repository and file-separator ones also end
// generation. (The texts, per FIM role, are llama.cpp's.)
struct FimTexts {
    bool ends_generation;
    std::array<std::string_view, 8> texts;
};
constexpr std::array<FimTexts, 6> kFimTexts = {{
    {false,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uFF5Cfim\u2581begin\uFF5C>", "<PRE>",
      "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"}},
    {false,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uFF5Cfim\u2581hole\uFF5C>", "<SUF>",
      "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"}},
    {false,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uFF5Cfim\u2581end\uFF5C>", "<MID>",
      "\u2581<MID>", "<|code_middle|>", "<|middle|>"}},
    {true, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {true, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {true, {"<|file_sep|>"}},
}};

}  // namespace

std::optional<int32_t> Vocab::find(std::string_view text) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = SeededHash{}(text)&mask;; i = (i + 1) & mask) {
        const int32_t id = slots_[i];
        if (id == kNoToken) return std::nullopt;
        if (this->text(id) == text) return id;
    }
}

Expected<Vocab> Vocab::build(const VocabSpec& spec) {
    Vocab vocab;
    const size_t n = spec.tokens.size();
    if (n == 0) return make_error("tokenizer: the vocabulary is empty");
    if (n > static_cast<size_t>(INT32_MAX))
        return make_error("tokenizer: {} tokens is too many", n);
    if (!spec.scores.empty() && spec.scores.size() != n)
        return make_error("tokenizer: {} scores for {} tokens", spec.scores.size(), n);
    if (!spec.types.empty() && spec.types.size() != n)
        return make_error("tokenizer: {} token types for {} tokens", spec.types.size(), n);

    size_t bytes = 0;
    for (const std::string& t : spec.tokens) bytes += t.size();
    if (bytes > UINT32_MAX)
        return make_error("tokenizer: {} bytes of token text is too many", bytes);
    vocab.pool_.reserve(bytes);
    vocab.offsets_.reserve(n + 1);
    for (const std::string& t : spec.tokens) {
        vocab.pool_ += t;
        vocab.offsets_.push_back(static_cast<uint32_t>(vocab.pool_.size()));
    }
    vocab.scores_ = spec.scores.empty() ? std::vector<float>(n, 0.0f) : spec.scores;
    vocab.types_.assign(n, static_cast<uint8_t>(TokenType::normal));
    for (size_t i = 0; i < spec.types.size(); ++i) {
        const auto t = static_cast<int32_t>(spec.types[i]);
        if (t < 0 || t > static_cast<int32_t>(TokenType::byte))
            return make_error("tokenizer: token {} has type {}, outside 0..{}", i, t,
                              static_cast<int32_t>(TokenType::byte));
        vocab.types_[i] = static_cast<uint8_t>(t);
    }
    // At most half full, so a probe ends at an empty slot soon.
    vocab.slots_.assign(std::bit_ceil(2 * n), kNoToken);
    const size_t mask = vocab.slots_.size() - 1;
    for (size_t id = 0; id < n; ++id) {
        const std::string_view text = vocab.text(static_cast<int32_t>(id));
        size_t i = SeededHash{}(text)&mask;
        // A repeated text maps to its last id, as in llama.cpp.
        while (vocab.slots_[i] != kNoToken && vocab.text(vocab.slots_[i]) != text)
            i = (i + 1) & mask;
        vocab.slots_[i] = static_cast<int32_t>(id);
    }

    // Defaults for absent ids are llama.cpp's: SentencePiece's <unk>=0 <s>=1 </s>=2;
    // BERT's [UNK]=100 [CLS]=101 (the BOS) [SEP]=102, no EOS; T5's unigram
    // </s>=1 <unk>=2, no BOS; GPT-2 style
    // vocabularies have no such convention. A default outside the vocabulary is
    // no token (llama.cpp disables it); a given id outside it is refused.
    struct Defaults {
        int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken, sep = kNoToken;
    };
    Defaults defaults;
    if (spec.model == "llama") defaults = {.bos = 1, .eos = 2, .unk = 0};
    if (spec.model == "bert") defaults = {.bos = 101, .unk = 100, .sep = 102};
    if (spec.model == "t5") defaults = {.eos = 1, .unk = 2};  // T5's </s> and <unk>; <pad> = 0
    const auto pick = [&](const std::optional<int32_t>& given, int32_t fallback,
                          std::string_view what) -> Expected<int32_t> {
        if (!given) return vocab.valid(fallback) ? fallback : kNoToken;
        if (*given != kNoToken && !vocab.valid(*given))
            return make_error("tokenizer: {} id {} is outside the vocabulary of {} tokens", what,
                              *given, n);
        return *given;
    };
    auto bos = pick(spec.bos, defaults.bos, "BOS");
    if (!bos) return bos.error();
    auto eos = pick(spec.eos, defaults.eos, "EOS");
    if (!eos) return eos.error();
    auto unk = pick(spec.unk, defaults.unk, "unknown-token");
    if (!unk) return unk.error();
    auto sep = pick(spec.sep, defaults.sep, "separator");
    if (!sep) return sep.error();
    vocab.bos = *bos;
    vocab.eos = *eos;
    vocab.unk = *unk;
    vocab.sep = *sep;

    for (const auto& extra : {spec.eot, spec.eom}) {
        if (extra && vocab.valid(*extra)) vocab.end_of_generation_.insert(*extra);
    }
    if (vocab.eos != kNoToken) vocab.end_of_generation_.insert(vocab.eos);
    for (std::string_view text : kEndOfGenerationTexts) {
        if (auto id = vocab.find(text)) {
            vocab.end_of_generation_.insert(*id);
            vocab.make_control(*id);
        }
    }
    for (const FimTexts& fim : kFimTexts) {
        for (std::string_view text : fim.texts) {
            const auto id = text.empty() ? std::nullopt : vocab.find(text);
            if (!id) continue;
            if (fim.ends_generation) vocab.end_of_generation_.insert(*id);
            vocab.make_control(*id);
        }
    }
    // Where "</s>" sits beside these markers it is an ordinary word (Gemma 4, PLaMo).
    if (auto s_id = vocab.find("</s>")) {
        if (vocab.find("<|tool_response>") || vocab.find("<|plamo:eos|>")) {
            vocab.end_of_generation_.erase(*s_id);
            vocab.types_[static_cast<size_t>(*s_id)] = static_cast<uint8_t>(TokenType::normal);
        }
    }

    for (size_t i = 0; i < n; ++i) {
        const TokenType t = vocab.type(static_cast<int32_t>(i));
        if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown)
            vocab.special_tokens_.push_back(static_cast<int32_t>(i));
    }
    std::stable_sort(
        vocab.special_tokens_.begin(), vocab.special_tokens_.end(),
        [&](int32_t a, int32_t b) { return vocab.text(a).size() > vocab.text(b).size(); });

    // Phi-3's special tokens swallow the whitespace after them, except these.
    std::string name = spec.model_name;
    std::transform(name.begin(), name.end(), name.begin(), [](char c) {
        return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        vocab.strip_right_.insert(vocab.special_tokens_.begin(), vocab.special_tokens_.end());
        if (auto id = vocab.find("</s>")) vocab.strip_right_.insert(*id);
        for (std::string_view keep : {"<unk>", "<s>", "<|endoftext|>"}) {
            if (auto id = vocab.find(keep)) vocab.strip_right_.erase(*id);
        }
    }
    return vocab;
}

}  // namespace ferrox::tokenizer_detail
