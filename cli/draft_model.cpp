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

// The model's vocabulary facts through the C API (the model must outlive it).
VocabularyView api_view(const ferrox_model* m) {
    VocabularyView v;
    v.size = ferrox_model_vocab(m);
    v.meta = [m](std::string_view key) { return meta(m, std::string(key).c_str()); };
    v.piece = [m](int32_t id) { return piece(m, id); };
    return v;
}

}  // namespace

Expected<std::unique_ptr<DraftModel>> DraftModel::open(const ferrox_model* target,
                                                       ModelHandle draft) {
    if (ferrox_model_is_recurrent(draft.get()))
        return make_error(
            "--model-draft: the draft model '{}' has recurrent layers, whose state cannot drop a "
            "rejected draft's tail; a draft model must be an attention-only one",
            ferrox_model_arch(draft.get()));
    if (const std::string diff = vocabulary_difference(api_view(target), api_view(draft.get()));
        !diff.empty())
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

std::span<const float> DraftModel::decode(int32_t seq, std::span<const int32_t> tokens,
                                          int32_t pos) {
    const size_t n = tokens.size();
    if (n == 0) return {};
    std::vector<int32_t> positions(n), seqs(n, seq);
    std::vector<uint8_t> want(n, 0);
    for (size_t i = 0; i < n; ++i) positions[i] = pos + int32_t(i);
    want[n - 1] = 1;
    ferrox_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = uint32_t(n);
    b.tokens = tokens.data();
    b.positions = positions.data();
    b.seq_ids = seqs.data();
    b.logits = want.data();
    ferrox_call_status st = fresh_status();
    const float* logits = nullptr;
    if (ferrox_decode(ctx_.get(), &b, &st) != FERROX_CODE_OK ||
        ferrox_logits(ctx_.get(), uint32_t(n - 1), &logits, &st) != FERROX_CODE_OK) {
        error_ = st.message;
        return {};
    }
    return {logits, vocab_};
}

bool DraftModel::remove(int32_t seq, int32_t pos) {
    ferrox_call_status st = fresh_status();
    if (ferrox_seq_remove(ctx_.get(), seq, pos, -1, &st) != FERROX_CODE_OK) {
        error_ = st.message;
        return false;
    }
    return true;
}

}  // namespace ferrox::cli
