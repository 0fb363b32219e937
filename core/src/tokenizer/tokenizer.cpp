#include "ferrox/tokenizer/tokenizer.h"

#include <deque>

#include "ferrox/escape.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/ugm_tokenizer.h"
#include "tokenizer/vocab.h"
#include "tokenizer/wpm_tokenizer.h"

namespace ferrox {

using tokenizer_detail::Fragment;
using tokenizer_detail::kNoToken;
using tokenizer_detail::split_special;
using tokenizer_detail::Vocab;

Tokenizer::Tokenizer(std::unique_ptr<const Vocab> vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
    const TextSegment whole{text, parse_special};
    return encode(std::span<const TextSegment>(&whole, 1), add_special);
}

std::vector<int32_t> Tokenizer::encode(std::span<const TextSegment> segments,
                                       bool add_special) const {
    std::vector<Fragment> fragments;
    // Raw text that runs across a segment edge is joined here, so that the
    // model's algorithm sees it whole (deque: growing it moves no string).
    std::deque<std::string> joined;
    for (const TextSegment& segment : segments) {
        for (const Fragment& f : split_special(*vocab_, segment.text, segment.parse_special)) {
            Fragment* last = fragments.empty() ? nullptr : &fragments.back();
            if (f.token != kNoToken || last == nullptr || last->token != kNoToken) {
                fragments.push_back(f);
                continue;
            }
            if (joined.empty() || joined.back().data() != last->text.data())
                joined.emplace_back(last->text);
            joined.back() += f.text;
            last->text = joined.back();
        }
    }
    return encode_fragments(fragments, add_special);
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    for (const int32_t id : ids) out += token_to_piece(id);
    return out;
}

int32_t Tokenizer::bos() const { return vocab_->bos; }
int32_t Tokenizer::eos() const { return vocab_->eos; }
bool Tokenizer::adds_bos() const { return vocab_->add_bos && vocab_->bos >= 0; }
bool Tokenizer::adds_eos() const { return vocab_->add_eos && vocab_->eos >= 0; }

PairSpecials Tokenizer::pair_specials() const {
    const Vocab& v = *vocab_;
    const int32_t eos = v.eos != kNoToken ? v.eos : v.sep;
    PairSpecials p;
    if (v.pair_bos && v.bos != kNoToken) p.before.push_back(v.bos);
    if (v.pair_eos && eos != kNoToken) {
        p.between.push_back(eos);
        p.after.push_back(eos);
    }
    if (v.pair_sep && v.sep != kNoToken) p.between.push_back(v.sep);
    return p;
}

bool Tokenizer::is_end_of_generation(int32_t id) const { return vocab_->is_end_of_generation(id); }
size_t Tokenizer::vocab_size() const { return vocab_->size(); }
std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
    return vocab_->find(text);
}

Expected<void> Tokenizer::check_model(std::string_view model) {
    for (const std::string_view known : {"llama", "gpt2", "gemma4", "bert", "t5"})
        if (model == known) return {};
    return make_error("unknown tokenizer.ggml.model '{}' (known: llama, gpt2, gemma4, bert, t5)",
                      escape_text(model));
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::from_spec(VocabSpec spec) {
    if (auto known = check_model(spec.model); !known) return known.error();
    if (spec.model == "bert") return tokenizer_detail::make_wpm_tokenizer(spec);
    if (spec.model == "t5") return tokenizer_detail::make_ugm_tokenizer(spec);
    const bool spm = spec.model == "llama";
    // Gemma 4's model implies its split, whatever tokenizer.ggml.pre says (as llama.cpp).
    if (spec.model == "gemma4") spec.pre = "gemma4";

    tokenizer_detail::PreTokenizerInfo pre{.kind = tokenizer_detail::PreTokenizer::standard};
    if (!spm) {
        auto named = tokenizer_detail::pre_tokenizer_named(spec.pre);
        if (!named) return named.error();
        pre = *named;
    }

    auto vocab = Vocab::build(spec);
    if (!vocab) return vocab.error();
    auto owned = std::make_unique<Vocab>(std::move(*vocab));
    // Defaults as in llama.cpp: SentencePiece models add BOS and a dummy-prefix
    // space; byte-level BPE adds BOS only for the llama3 family.
    owned->add_bos = pre.bos_always || spec.add_bos.value_or(spm || pre.add_bos);
    owned->add_eos = spec.add_eos.value_or(false);
    owned->add_space_prefix = spm && spec.add_space_prefix.value_or(true);
    owned->pair_bos = owned->add_bos;
    owned->pair_eos = owned->add_eos;
    // llama.cpp's byte-level splits that default add_sep on (RoBERTa's, Jina's).
    owned->pair_sep = spec.add_sep.value_or(
        spec.pre == "jina-v1-en" || spec.pre == "jina-v2-code" || spec.pre == "roberta-bpe");
    if (owned->add_bos && owned->bos == kNoToken)
        return make_error("tokenizer: add_bos_token is set but the vocabulary has no BOS token");
    if (owned->add_eos && owned->eos == kNoToken)
        return make_error("tokenizer: add_eos_token is set but the vocabulary has no EOS token");

    if (spm)
        return std::unique_ptr<Tokenizer>(
            std::make_unique<tokenizer_detail::SpmTokenizer>(std::move(owned)));
    return std::unique_ptr<Tokenizer>(
        std::make_unique<tokenizer_detail::BpeTokenizer>(std::move(owned), pre, spec.merges));
}

}  // namespace ferrox
