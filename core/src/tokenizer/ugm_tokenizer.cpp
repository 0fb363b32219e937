#include "tokenizer/ugm_tokenizer.h"

#include <algorithm>
#include <cfloat>
#include <limits>

#include "tokenizer/sp_spelling.h"
#include "tokenizer/unicode.h"

namespace ferrox::tokenizer_detail {
namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";  // U+FFFD
// SentencePiece's penalty below the lowest normal score for an unknown code point.
constexpr double kUnknownPenalty = 10.0;

bool searchable(TokenType t) {
    return t == TokenType::normal || t == TokenType::user_defined || t == TokenType::unused;
}

// The best segmentation of the prefix ending at one byte offset.
struct Best {
    int32_t token = kNoToken;
    size_t start = 0;  // where that last token begins
    double score = -DBL_MAX;
};

}  // namespace

UgmTokenizer::UgmTokenizer(std::unique_ptr<const Vocab> vocab, Charsmap charsmap,
                           UgmOptions options)
    : Tokenizer(std::move(vocab)), charsmap_(std::move(charsmap)), options_(options) {
    const Vocab& v = this->vocab();
    float min_score = FLT_MAX;
    for (size_t id = 0; id < v.size(); ++id) {
        const auto i = static_cast<int32_t>(id);
        if (v.type(i) == TokenType::normal) min_score = std::min(min_score, v.score(i));
        if (searchable(v.type(i))) max_piece_bytes_ = std::max(max_piece_bytes_, v.text(i).size());
    }
    unknown_score_ = static_cast<double>(min_score) - kUnknownPenalty;
}

std::optional<int32_t> UgmTokenizer::piece_id(std::string_view piece) const {
    const auto id = vocab().find(piece);
    if (id && searchable(vocab().type(*id))) return id;
    return std::nullopt;
}

std::string UgmTokenizer::normalize(std::string_view text) const {
    std::string out;
    out.reserve(text.size() * 3);
    const bool merge = options_.remove_extra_whitespaces;
    bool prefixed = false, in_word = false;
    // Each step consumes at least one byte.
    for (size_t pos = 0; pos < text.size();) {
        std::string_view piece;
        size_t consumed = 0;
        if (const auto match = charsmap_.longest_prefix(text.substr(pos))) {
            piece = match->replacement;
            consumed = match->consumed;
        } else if (const size_t n = utf8_valid_prefix(text.substr(pos)); n > 0) {
            piece = text.substr(pos, n);
            consumed = n;
        } else {  // a malformed byte is U+FFFD, as SentencePiece reads it
            piece = kReplacementUtf8;
            consumed = 1;
        }
        for (const char c : piece) {
            if (c == ' ') {
                in_word = false;
                if (!merge) out += kSpaceMark;
                continue;
            }
            // A word starts: with remove_extra_whitespaces one mark stands for
            // the spaces before it (none at the end of the text); the dummy
            // prefix puts one before the first word.
            if (!in_word) {
                in_word = true;
                if (merge || (options_.add_space_prefix && !prefixed)) {
                    out += kSpaceMark;
                    prefixed = true;
                }
            }
            out.push_back(c);
        }
        pos += consumed;
    }
    return out;
}

void UgmTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
    const Vocab& v = vocab();
    const std::string normalized = normalize(text);
    const size_t n = normalized.size();
    if (n == 0) return;
    std::vector<Best> best(n + 1);
    best[0] = {.token = v.unk, .start = 0, .score = 0};
    // Viterbi over byte offsets, one code point at a time; at each position
    // every piece up to the longest token's length is looked up.
    for (size_t pos = 0; pos < n;) {
        const size_t cp_bytes =
            std::min(utf8_sequence_length(static_cast<uint8_t>(normalized[pos])), n - pos);
        const double here = best[pos].score;
        bool covers_code_point = false;
        const size_t longest = std::min(max_piece_bytes_, n - pos);
        for (size_t len = 1; len <= longest; ++len) {
            const auto id = piece_id(std::string_view(normalized).substr(pos, len));
            if (!id) continue;
            if (len == cp_bytes) covers_code_point = true;
            // User-defined pieces score 0 (the normal ones are log
            // probabilities, below 0), so they win where they fit.
            const double score =
                here + (v.type(*id) == TokenType::user_defined ? 0.0 : double{v.score(*id)});
            Best& at = best[pos + len];
            if (score > at.score) at = {.token = *id, .start = pos, .score = score};
        }
        if (!covers_code_point) {
            const double score = here + unknown_score_;
            Best& at = best[pos + cp_bytes];
            if (score > at.score) at = {.token = v.unk, .start = pos, .score = score};
        }
        pos += cp_bytes;
    }
    // Back from the end; each step moves to a smaller offset, so it ends.
    const size_t first = out.size();
    bool previous_unknown = false;
    for (size_t at = n;;) {
        const Best& b = best[at];
        const bool unknown = b.token == v.unk;
        if (!(unknown && previous_unknown)) out.push_back(b.token);
        previous_unknown = unknown;
        if (b.start == 0) break;
        at = b.start;
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

std::vector<int32_t> UgmTokenizer::encode_fragments(std::span<const Fragment> fragments,
                                                    bool add_special) const {
    const Vocab& v = vocab();
    std::vector<int32_t> out;
    if (add_special && v.add_bos && v.bos != kNoToken) out.push_back(v.bos);
    // Each stretch of text between special tokens is normalised on its own
    // (so each gets its dummy prefix), as llama.cpp does.
    for (const Fragment& f : fragments) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
        } else {
            encode_text(f.text, out);
        }
    }
    if (add_special && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
    return out;
}

std::string UgmTokenizer::token_to_piece(int32_t id) const { return sp_token_piece(vocab(), id); }

Expected<std::unique_ptr<Tokenizer>> make_ugm_tokenizer(const VocabSpec& spec) {
    auto charsmap = Charsmap::parse(spec.precompiled_charsmap);
    if (!charsmap) return make_error("tokenizer: {}", charsmap.error().message());
    auto vocab = Vocab::build(spec);
    if (!vocab) return vocab.error();
    auto owned = std::make_unique<Vocab>(std::move(*vocab));
    if (owned->unk == kNoToken)
        return make_error(
            "tokenizer: a 't5' (unigram) vocabulary needs an unknown token "
            "(tokenizer.ggml.unknown_token_id, default 2)");
    // llama.cpp's defaults for the unigram model: EOS after the text, no BOS.
    owned->add_bos = spec.add_bos.value_or(false);
    owned->add_eos = spec.add_eos.value_or(true);
    owned->pair_bos = owned->add_bos;
    owned->pair_eos = owned->add_eos;
    owned->pair_sep = spec.add_sep.value_or(false);
    if (owned->add_bos && owned->bos == kNoToken)
        return make_error("tokenizer: add_bos_token is set but the vocabulary has no BOS token");
    if (owned->add_eos && owned->eos == kNoToken)
        return make_error("tokenizer: add_eos_token is set but the vocabulary has no EOS token");
    const UgmOptions options{
        .add_space_prefix = spec.add_space_prefix.value_or(false),
        .remove_extra_whitespaces = spec.remove_extra_whitespaces.value_or(false)};
    owned->add_space_prefix = options.add_space_prefix;
    return std::unique_ptr<Tokenizer>(
        std::make_unique<UgmTokenizer>(std::move(owned), std::move(*charsmap), options));
}

}  // namespace ferrox::tokenizer_detail
