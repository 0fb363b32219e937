// Sampling as a chain of stages over a candidate set: logit bias, penalties
// (repetition, frequency, presence), top-k, temperature, top-p, min-p, then
// one terminal stage that picks (greedy, or a seeded draw). A chain holds
// its own state -- the token history the penalties read and the random
// stream -- so each sequence gets its own chain (clone_for) and two
// sequences never share a random stream.
//
// SamplerChain::from_params(p) draws exactly the tokens the first sampler
// (Sampler, removed) drew for the same logits, history and seed: its draws
// are recorded in tests/model/test_sampler_chain.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/sampling.h"

namespace ferrox {

// The candidates a stage filters or reweights. `sorted`: highest logit
// first (ties by id); `has_p`: p holds probabilities (softmax ran since the
// logits last changed).
struct Candidate {
    int32_t id;
    float logit;
    float p;  // set by softmax
};

struct FERROX_API Candidates {
    std::vector<Candidate> c;
    bool sorted = false;
    bool has_p = false;

    void sort();     // by logit, highest first, ties by id
    void softmax();  // sorts first; sets p
    // The filters, on sorted candidates (top_p and min_p need p).
    void keep_top_p(float p);      // the smallest prefix whose mass reaches p
    void keep_min_p(float min_p);  // those with p >= min_p * the best's p
};

// What a stage may read and change besides the candidates.
struct SamplerState {
    std::vector<int32_t> history;  // every accepted token, oldest first
    std::mt19937_64 rng;
    double uniform();  // [0, 1), 53 bits: the same doubles for a seed everywhere
};

class FERROX_API SamplerStage {
  public:
    virtual ~SamplerStage() = default;
    virtual const char* name() const = 0;
    // Filters or reweights; a terminal stage returns the chosen id (>= 0),
    // the others return -1.
    virtual int32_t apply(Candidates& c, SamplerState& state) = 0;
    virtual bool terminal() const { return false; }
    // apply() would change nothing (a stage at its neutral values), so the
    // chain may skip it.
    virtual bool leaves_logits() const { return false; }
    // A terminal stage that picks the highest logit (the lowest id on ties).
    virtual bool picks_highest() const { return false; }
    virtual std::unique_ptr<SamplerStage> clone() const = 0;
    // A token generated and kept (not a prompt's: SamplerChain::accept(span)
    // passes none here); a stage with state of its own (the grammar) advances.
    virtual void accept(int32_t /*token*/) {}
    // Back to the stage's starting state (a new sequence, a chat's next answer).
    virtual void restart() {}
    // Why the stage filtered every candidate out, when it did ("" otherwise).
    virtual std::string error() const { return {}; }
    // A grammar stage's matcher (whether the text so far is complete);
    // nullptr for every other stage.
    virtual const grammar::GrammarMatcher* grammar_matcher() const { return nullptr; }
};

// Stages. Each is off at its neutral value.
FERROX_API std::unique_ptr<SamplerStage> logit_bias_stage(
    std::vector<std::pair<int32_t, float>> bias);  // added to a token's logit; -inf bans it
// Over the last `last_n` tokens of the history: a seen token's logit is
// divided by `repeat` when positive (multiplied when negative), then lowered
// by count * frequency + presence (llama.cpp's penalties sampler, in order).
FERROX_API std::unique_ptr<SamplerStage> penalties_stage(uint32_t last_n, float repeat,
                                                         float frequency, float presence);
FERROX_API std::unique_ptr<SamplerStage> top_k_stage(uint32_t k);  // 0: off
FERROX_API std::unique_ptr<SamplerStage> temperature_stage(float t);
FERROX_API std::unique_ptr<SamplerStage> top_p_stage(float p);      // 1: off
FERROX_API std::unique_ptr<SamplerStage> min_p_stage(float min_p);  // 0: off
FERROX_API std::unique_ptr<SamplerStage> greedy_stage();            // terminal
FERROX_API std::unique_ptr<SamplerStage> distribution_stage();      // terminal, seeded draw
// Removes the tokens whose text cannot continue the grammar (end of
// generation only where it is complete) and advances over each accepted
// token; docs/grammar.md.
FERROX_API std::unique_ptr<SamplerStage> grammar_stage(
    std::shared_ptr<const grammar::Grammar> grammar,
    std::shared_ptr<const grammar::TokenTrie> vocab);

// A lazy grammar (docs/grammar.md, "Lazy grammars"): every token passes
// until a trigger shows up in the generated text, then the grammar masks as
// grammar_stage does, with the trigger's text (and whatever the same token
// wrote after it) already matched. The grammar's sentences therefore begin
// with a trigger's text.
struct LazyTrigger {
    std::string text;       // watched in the generated bytes, across token boundaries
    bool at_start = false;  // only where it begins the answer (after blanks)
};
struct LazyTriggerToken {
    int32_t id;        // a token that arms the grammar wherever it is drawn
    std::string text;  // what the grammar is fed for it (a control token has no piece)
};
struct LazyGrammarParams {
    std::shared_ptr<const grammar::Grammar> grammar;  // null: no lazy stage
    std::vector<LazyTrigger> triggers;
    std::vector<LazyTriggerToken> trigger_tokens;
    // No trigger counts inside the answer's reasoning block: one opened by
    // `reasoning_start` at the answer's start (after blanks), or by the prompt
    // (`starts_in_reasoning`), until `reasoning_end`. Empty: no reasoning.
    std::string reasoning_start, reasoning_end;
    bool starts_in_reasoning = false;
};
// Watches at most the longest trigger's length in bytes per token; per
// sequence (clone, restart). Before the trigger it changes nothing.
FERROX_API std::unique_ptr<SamplerStage> lazy_grammar_stage(
    LazyGrammarParams params, std::shared_ptr<const grammar::TokenTrie> vocab);

// A thinking budget: once `budget` tokens were generated inside a reasoning
// block (opened by `start` in the answer, or by the prompt when
// `starts_inside`), the stage masks every candidate but the next of
// `close_tokens` until they are all written, then lets everything through.
// The block ending by itself (`end` in the text) stops the count.
struct ReasoningBudgetParams {
    int64_t budget = -1;  // < 0: no stage
    std::string start, end;
    std::vector<int32_t> close_tokens;  // the family's reasoning_close, encoded
    bool starts_inside = false;
};
FERROX_API std::unique_ptr<SamplerStage> reasoning_budget_stage(
    ReasoningBudgetParams params, std::shared_ptr<const grammar::TokenTrie> vocab);

// Everything a chain is built from: `ferrox run`'s flags (the base alone), a
// server request, ferrox_sampler_params. One builder for all three, so the
// same settings and seed draw the same tokens through each.
struct ChainParams {
    SamplerParams base;  // temperature, top-k/p, min-p, repetition penalty, seed
    float frequency_penalty = 0, presence_penalty = 0;  // 0: off
    std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit)
    // Both set: a grammar stage first, so that every later stage sees only
    // the tokens the grammar allows.
    std::shared_ptr<const grammar::Grammar> grammar;
    std::shared_ptr<const grammar::TokenTrie> grammar_vocab;
    // With grammar_vocab: a lazy grammar after the grammar (if any), and a
    // thinking budget before both (the forced close must not be masked out).
    LazyGrammarParams lazy;
    ReasoningBudgetParams reasoning_budget;
};

class FERROX_API SamplerChain {
  public:
    explicit SamplerChain(uint64_t seed = 0);
    SamplerChain(const SamplerChain& other);
    SamplerChain& operator=(const SamplerChain& other);
    SamplerChain(SamplerChain&&) = default;
    SamplerChain& operator=(SamplerChain&&) = default;

    // The thinking budget, the grammar, the lazy grammar (each when set), logit bias (when any),
    // penalties, then greedy when temperature <= 0, else top-k, temperature, top-p, min-p and a
    // draw. A stage that is off changes nothing, except that top-k 0 sorts every candidate, which
    // orders the draw.
    static SamplerChain from_params(const ChainParams& params);
    // The chain `ferrox run` and `ferrox chat` draw with.
    static SamplerChain from_params(const SamplerParams& params) {
        ChainParams chain;
        chain.base = params;
        return from_params(chain);
    }

    SamplerChain& add(std::unique_ptr<SamplerStage> stage);
    size_t size() const { return stages_.size(); }
    const SamplerStage& stage(size_t i) const { return *stages_[i]; }

    // Runs the stages over `logits` (vocab floats) and returns the token the
    // terminal stage picks (greedy when the chain has none). Does not
    // accept it: call accept() with the token actually used.
    int32_t sample(std::span<const float> logits);
    // A generated token: into the history, and through every stage.
    void accept(int32_t token);
    // Tokens for the history only (a prompt): stages do not advance over them.
    void accept(std::span<const int32_t> tokens);
    const std::vector<int32_t>& history() const { return state_.history; }
    // Forgets the history, restarts the stages and keeps the random stream
    // (a chat's next turn).
    void clear_history();
    // Why sample() returned -1, when a stage says ("" otherwise).
    std::string error() const;
    // The first grammar stage's matcher; nullptr when the chain has none.
    const grammar::GrammarMatcher* grammar_matcher() const;

    // The same stages with an empty history and a fresh stream from `seed`:
    // one chain per sequence.
    SamplerChain clone_for(uint64_t seed) const;
    void reset(uint64_t seed);

  private:
    // Every stage before a greedy one leaves the logits as they are.
    bool argmax_of_logits() const;

    std::vector<std::unique_ptr<SamplerStage>> stages_;
    SamplerState state_;
    Candidates work_;
};

}  // namespace ferrox
