#include "draft_model.h"

#include <algorithm>
#include <optional>

#include "ferrox/log.h"

namespace ferrox::cli {
namespace {

// A value written by a call that fills a caller buffer (ferrox_model_meta's
// shape), asked again with the size it needs; nullopt when the call fails
// (an absent key).
template <class Call>
std::optional<std::string> filled(Call&& call) {
    ferrox_call_status st = fresh_status();
    std::string out(64, '\0');
    size_t needed = 0;
    ferrox_code code = call(out.data(), out.size(), &needed, &st);
    if (code == FERROX_CODE_BUFFER_TOO_SMALL) {
        out.resize(needed + 1);
        code = call(out.data(), out.size(), &needed, &st);
    }
    if (code != FERROX_CODE_OK) return std::nullopt;
    out.resize(needed);
    return out;
}

std::optional<std::string> meta(const ferrox_model* m, const char* key) {
    return filled([&](char* b, size_t c, size_t* n, ferrox_call_status* st) {
        return ferrox_model_meta(m, key, b, c, n, st);
    });
}

std::optional<std::string> piece(const ferrox_model* m, int32_t token) {
    return filled([&](char* b, size_t c, size_t* n, ferrox_call_status* st) {
        return ferrox_token_text(m, token, b, c, n, st);
    });
}

std::string shown(const std::optional<std::string>& v) {
    return v ? fmt::format("'{}'", *v) : std::string("none");
}

// Rows whose products equal the single-row ones bit for bit (docs/models.md,
// "Batch invariance").
constexpr size_t kFewRows = 16;

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

}  // namespace

std::string vocabulary_difference(const ferrox_model* target, const ferrox_model* draft) {
    std::vector<std::string> found;
    for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre"}) {
        const auto a = meta(target, key), b = meta(draft, key);
        if (a != b) found.push_back(fmt::format("{} {} vs {}", key, shown(a), shown(b)));
    }
    const uint32_t na = ferrox_model_vocab(target), nb = ferrox_model_vocab(draft);
    if (na != nb) found.push_back(fmt::format("vocabulary size {} vs {}", na, nb));
    // Every id both have; the first that differs is named (one is enough to refuse).
    for (uint32_t id = 0; id < std::min(na, nb); ++id) {
        const auto a = piece(target, int32_t(id)), b = piece(draft, int32_t(id));
        if (a != b) {
            found.push_back(fmt::format("token {}: {} vs {}", id, shown(a), shown(b)));
            break;
        }
    }
    // The ids that start, end and separate text: a draft that ends on
    // another id would stop where the target does not.
    for (const char* name : {"bos", "eos", "unknown", "eot", "eom", "seperator", "padding"}) {
        const std::string key = fmt::format("tokenizer.ggml.{}_token_id", name);
        const auto a = meta(target, key.c_str()), b = meta(draft, key.c_str());
        if (a != b) found.push_back(fmt::format("{} {} vs {}", key, shown(a), shown(b)));
    }
    std::string out;
    for (const std::string& f : found) out += (out.empty() ? "" : "; ") + f;
    return out;
}

Expected<std::unique_ptr<DraftModel>> DraftModel::open(const ferrox_model* target,
                                                       ModelHandle draft) {
    if (ferrox_model_is_recurrent(draft.get()))
        return make_error(
            "--model-draft: the draft model '{}' has recurrent layers, whose state cannot drop a "
            "rejected draft's tail; a draft model must be an attention-only one",
            ferrox_model_arch(draft.get()));
    if (const std::string diff = vocabulary_difference(target, draft.get()); !diff.empty())
        return make_error(
            "--model-draft: the draft model's vocabulary is not the target's ({} vs {}): {}",
            ferrox_model_arch(target), ferrox_model_arch(draft.get()), diff);
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    ferrox_call_status st = fresh_status();
    ferrox_context* raw = nullptr;
    if (ferrox_context_new(draft.get(), &cp, &raw, &st) != FERROX_CODE_OK)
        return make_error("--model-draft: {}", st.message);
    ContextHandle ctx(raw, ferrox_context_free);
    return std::unique_ptr<DraftModel>(new DraftModel(std::move(draft), std::move(ctx)));
}

DraftModel::DraftModel(ModelHandle model, ContextHandle context)
    : model_(std::move(model)),
      ctx_(std::move(context)),
      vocab_(ferrox_model_vocab(model_.get())),
      batch_(std::max(1u, ferrox_model_n_batch(model_.get()))) {}

bool DraftModel::decode(std::span<const int32_t> tokens) {
    for (size_t start = 0; start < tokens.size(); start += batch_) {
        const size_t n = std::min<size_t>(batch_, tokens.size() - start);
        std::vector<int32_t> positions(n), seqs(n, 0);
        std::vector<uint8_t> want(n, 0);
        for (size_t i = 0; i < n; ++i) positions[i] = int32_t(cached_.size() + i);
        want[n - 1] = 1;
        ferrox_batch b{};
        b.struct_size = sizeof b;
        b.n_tokens = uint32_t(n);
        b.tokens = tokens.data() + start;
        b.positions = positions.data();
        b.seq_ids = seqs.data();
        b.logits = want.data();
        ferrox_call_status st = fresh_status();
        ++decodes_;
        if (ferrox_decode(ctx_.get(), &b, &st) != FERROX_CODE_OK ||
            ferrox_logits(ctx_.get(), uint32_t(n - 1), &logits_, &st) != FERROX_CODE_OK) {
            error_ = fmt::format("the draft model: {}", st.message);
            return false;
        }
        cached_.insert(cached_.end(), tokens.begin() + long(start),
                       tokens.begin() + long(start + n));
    }
    return true;
}

bool DraftModel::cut(size_t keep) {
    if (cached_.size() <= keep) return true;
    ferrox_call_status st = fresh_status();
    if (ferrox_seq_remove(ctx_.get(), 0, int32_t(keep), -1, &st) != FERROX_CODE_OK) {
        error_ = fmt::format("the draft model: {}", st.message);
        return false;
    }
    cached_.resize(keep);
    return true;
}

std::vector<int32_t> DraftModel::propose(std::span<const int32_t> tokens, uint32_t max_draft) {
    error_.clear();
    if (max_draft == 0 || tokens.empty()) return {};
    // The cells already hold a prefix of the history (the prompt, the
    // emitted tokens, what accept() kept); the rest -- at least the last
    // token, whose logits the first guess reads -- is decoded now.
    const size_t keep = std::min(common_prefix(cached_, tokens), tokens.size() - 1);
    if (!cut(keep)) return {};
    // In the shapes the target computed them: a long catch-up (the prompt)
    // in chunks of the batch, and the token after it alone -- the target
    // decoded it among at most 16 rows, whose products equal one row's. A
    // batch of more rows may round differently, and the draft's guesses
    // would then drift from what the target itself would guess.
    const size_t last = tokens.size() - 1;
    if (last - keep >= kFewRows && !decode(tokens.subspan(keep, last - keep))) return {};
    if (!decode(tokens.subspan(cached_.size()))) return {};
    proposed_from_ = tokens.size();
    std::vector<int32_t> draft;
    for (uint32_t j = 0; j < max_draft; ++j) {
        // Greedy: the first of the largest logits, as the target's greedy sampler.
        const int32_t next = int32_t(std::max_element(logits_, logits_ + vocab_) - logits_);
        draft.push_back(next);
        if (j + 1 == max_draft) break;  // the last guess needs no logits of its own
        const int32_t one[] = {next};
        if (!decode(one)) return {};
    }
    return draft;
}

void DraftModel::accept(size_t accepted) {
    // The cells past the emitted draft tokens hold rejected guesses.
    (void)cut(proposed_from_ + accepted);
}

}  // namespace ferrox::cli
