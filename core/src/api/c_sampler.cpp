// ferrox.h's sampler entries: the sampler chain, with a grammar when asked.
#include <cmath>
#include <string>
#include <vector>

#include "c_handles.h"
#include "sampler_grammar.h"

// This file defines the exported ferrox_X_params_default function (the frozen
// one older programs call); ferrox.h's macro of that name is for callers.
#undef ferrox_sampler_params_default

using namespace ferrox;
using namespace ferrox::c_api;

namespace {

// What the exported ferrox_X_params_default function writes, frozen: the
// struct's size in the API version that introduced it (docs/api.md, "Struct sizes").
constexpr size_t kSamplerParamsSize_0_1 = offsetof(ferrox_sampler_params, model);

ferrox_sampler_params sampler_defaults() {
    ferrox_sampler_params p{};
    p.struct_size = sizeof p;
    const SamplerParams d;
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.min_p = d.min_p;
    p.repeat_penalty = d.repeat_penalty;
    p.repeat_last_n = d.repeat_last_n;
    p.seed = d.seed;
    return p;
}

}  // namespace

extern "C" {

void ferrox_sampler_params_init(ferrox_sampler_params* p, size_t size) {
    write_defaults(p, size, sampler_defaults());
}

void ferrox_sampler_params_default(ferrox_sampler_params* p) {
    write_defaults(p, kSamplerParamsSize_0_1, sampler_defaults());
}

ferrox_code ferrox_sampler_new(const ferrox_sampler_params* given, ferrox_sampler** out,
                               ferrox_call_status* status) {
    if (!out) return invalid(status, "ferrox_sampler_new: out is NULL");
    *out = nullptr;
    ferrox_sampler_params p;
    ferrox_sampler_params_init(&p, sizeof p);
    if (!read_params(given, p, status, "ferrox_sampler_params"))
        return FERROX_CODE_INVALID_ARGUMENT;
    const auto finite = [](float x) { return std::isfinite(x); };
    if (!finite(p.temperature) || !finite(p.top_p) || p.top_p < 0 || p.top_p > 1 ||
        !finite(p.min_p) || p.min_p < 0 || p.min_p > 1 || !finite(p.repeat_penalty) ||
        p.repeat_penalty <= 0 || !finite(p.frequency_penalty) || !finite(p.presence_penalty))
        return invalid(status,
                       "ferrox_sampler_params: temperature and penalties must be finite, top_p and "
                       "min_p in [0, 1], repeat_penalty > 0");
    if (p.n_logit_bias && !p.logit_bias)
        return invalid(status, "n_logit_bias > 0, logit_bias NULL");
    if ((p.grammar || p.json_schema) && !p.model)
        return invalid(status,
                       "ferrox_sampler_params: a grammar or json_schema needs model (its "
                       "vocabulary is what the grammar is matched against)");
    return guarded(status, [&]() -> ferrox_code {
        auto grammar = api::sampler_grammar(p);
        if (!grammar) return invalid(status, grammar.error().message());
        ChainParams cp;
        cp.base.temperature = p.temperature;
        cp.base.top_k = p.top_k;
        cp.base.top_p = p.top_p;
        cp.base.min_p = p.min_p;
        cp.base.repeat_penalty = p.repeat_penalty;
        cp.base.repeat_last_n = p.repeat_last_n;
        cp.base.seed = p.seed;
        cp.frequency_penalty = p.frequency_penalty;
        cp.presence_penalty = p.presence_penalty;
        for (uint32_t i = 0; i < p.n_logit_bias; ++i)
            cp.logit_bias.emplace_back(p.logit_bias[i].token, p.logit_bias[i].bias);
        if (*grammar) {
            cp.grammar = std::move(*grammar);
            cp.grammar_vocab = vocabulary_trie(*p.model);
        }
        auto sampler = std::make_unique<ferrox_sampler>();
        sampler->has_grammar = cp.grammar != nullptr;
        sampler->chain = SamplerChain::from_params(cp);  // the one builder (sampler_chain.h)
        *out = sampler.release();
        return ok(status);
    });
}

void ferrox_sampler_free(ferrox_sampler* s) { delete s; }

ferrox_code ferrox_sampler_sample(ferrox_sampler* s, const float* logits, uint32_t n_vocab,
                                  int32_t* token, ferrox_call_status* status) {
    if (!s || !logits || !token || n_vocab == 0)
        return invalid(status, "ferrox_sampler_sample: sampler, logits or token is NULL");
    return guarded(status, [&]() -> ferrox_code {
        *token = s->chain.sample({logits, n_vocab});
        if (*token < 0) {
            if (std::string why = s->chain.error(); !why.empty())
                return report(status, FERROX_CODE_GRAMMAR, why);
            return invalid(status, "every token was filtered out");
        }
        s->sampled = true;
        return ok(status);
    });
}

ferrox_code ferrox_sampler_accept(ferrox_sampler* s, const int32_t* tokens, size_t n,
                                  ferrox_call_status* status) {
    if (!s || (!tokens && n)) return invalid(status, "ferrox_sampler_accept: NULL argument");
    if (s->has_grammar && s->sampled)
        return invalid(status,
                       "ferrox_sampler_accept: this sampler has a grammar and has sampled: give "
                       "generated tokens to ferrox_sampler_accept_token (or ferrox_sampler_reset "
                       "before a new prompt)");
    return guarded(status, [&]() -> ferrox_code {
        s->chain.accept(std::span<const int32_t>(tokens, n));
        return ok(status);
    });
}

ferrox_code ferrox_sampler_accept_token(ferrox_sampler* s, int32_t token,
                                        ferrox_call_status* status) {
    if (!s) return invalid(status, "ferrox_sampler_accept_token: sampler is NULL");
    return guarded(status, [&]() -> ferrox_code {
        if (!s->has_grammar) {
            s->chain.accept(std::span<const int32_t>(&token, 1));  // history only, as accept
            return ok(status);
        }
        s->chain.accept(token);  // the history, and the grammar over its bytes
        s->sampled = false;
        if (std::string why = s->chain.error(); !why.empty()) {
            s->broken = true;
            return report(status, FERROX_CODE_GRAMMAR, why);
        }
        return ok(status);
    });
}

ferrox_grammar_state ferrox_sampler_grammar_state(const ferrox_sampler* s) {
    const grammar::GrammarMatcher* m = s ? s->chain.grammar_matcher() : nullptr;
    if (!m) return FERROX_GRAMMAR_NONE;
    if (m->finished()) return FERROX_GRAMMAR_ENDED;
    if (s->broken) return FERROX_GRAMMAR_FAILED;
    // Complete and still refused everything: a vocabulary without an
    // end-of-generation token; the text itself is whole.
    if (m->complete()) return FERROX_GRAMMAR_COMPLETE;
    return s->chain.error().empty() ? FERROX_GRAMMAR_OPEN : FERROX_GRAMMAR_FAILED;
}

ferrox_code ferrox_sampler_reset(ferrox_sampler* s, ferrox_call_status* status) {
    if (!s) return invalid(status, "ferrox_sampler_reset: sampler is NULL");
    return guarded(status, [&]() -> ferrox_code {
        s->chain.clear_history();  // restarts the grammar; the random stream goes on
        s->sampled = s->broken = false;
        return ok(status);
    });
}

}  // extern "C"
